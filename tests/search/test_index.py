"""The search index: exact search against a numpy argsort of the cosines, FAISS's index
against exact search (recall on clustered vectors, identical results when it scans
every list), and the index directory written atomically and read back."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo.search import index
from keras_bert_zoo.utils.errors import UserError


def _clustered(count, dim=24, clusters=40, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    points = centres[rng.integers(0, clusters, count)] + 0.35 * rng.standard_normal((count, dim))
    return points.astype(np.float32)


def _numpy_top_k(queries, documents, k):
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    documents = documents / np.linalg.norm(documents, axis=1, keepdims=True)
    cosines = queries.astype(np.float64) @ documents.astype(np.float64).T
    order = np.argsort(-cosines, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(cosines, order, axis=1), order


def test_exact_search_is_the_numpy_argsort_of_the_cosines():
    documents = _clustered(500)
    queries = _clustered(30, seed=1)
    scores, positions = index.ExactIndex(documents).search(queries, 7)
    want_scores, want_positions = _numpy_top_k(queries, documents, 7)
    np.testing.assert_array_equal(positions, want_positions)
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)
    # Scale does not change a cosine ranking.
    _, scaled = index.ExactIndex(documents * 3.0).search(queries * 0.5, 7)
    np.testing.assert_array_equal(scaled, want_positions)


def _recall(found, exact):
    return np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, exact, strict=True)])


def test_faiss_index_recall_against_exact_search():
    documents = _clustered(6000)
    queries = _clustered(200, seed=3)
    _, exact = index.ExactIndex(documents).search(queries, 10)
    built = index.FaissIndex.build(documents)
    assert built.index.nlist == index.default_nlist(6000) == 153
    assert built.nprobe == index.default_nprobe(153) == 51
    _, found = built.search(queries, 10)
    recall = _recall(found, exact)
    print(f"recall@10 at nprobe={built.nprobe}: {recall:.3f}")
    assert recall >= 0.9
    # Fewer lists scanned, lower recall: the index is approximate, not exact in disguise.
    built.nprobe = 1
    assert _recall(built.search(queries, 10)[1], exact) < recall
    # Every list scanned: exact search's documents (near-ties aside: float32 against
    # float64) and cosines.
    built.nprobe = built.index.nlist
    scores, found = built.search(queries, 10)
    want_scores, want = _numpy_top_k(queries, documents, 10)
    assert np.mean(found == want) > 0.99
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)
    unit = documents / np.linalg.norm(documents, axis=1, keepdims=True)
    found_cosines = np.einsum(
        "qd,qkd->qk", queries / np.linalg.norm(queries, axis=1, keepdims=True), unit[found]
    )
    np.testing.assert_allclose(found_cosines, want_scores, atol=1e-5)


def test_auto_is_exact_up_to_the_limit():
    assert not index.wants_approximate(index.EXACT_LIMIT)
    assert index.wants_approximate(index.EXACT_LIMIT + 1)
    assert index.wants_approximate(10, "approximate") and not index.wants_approximate(
        10**7, "exact"
    )
    with pytest.raises(UserError, match="index kind 'fast'"):
        index.wants_approximate(10, "fast")


def test_index_directory_round_trip(tmp_path):
    documents = _clustered(300)
    ids = [f"d{i}" for i in range(300)]
    texts = [f"text {i}\twith a tab" for i in range(300)]
    out = tmp_path / "index"
    approximate = index.FaissIndex.build(documents, nlist=4)
    index.write_index(str(out), ids, texts, documents, {"model": "m"}, approximate=approximate)
    assert sorted(os.listdir(tmp_path)) == ["index"]  # no temporary left beside it
    loaded = index.load_index(str(out))
    assert loaded.ids == ids and loaded.texts == texts
    np.testing.assert_array_equal(loaded.vectors, documents)
    assert loaded.manifest["dim"] == 24 and loaded.manifest["count"] == 300
    assert loaded.manifest["normalized"] is False and loaded.manifest["model"] == "m"
    assert loaded.approximate is not None and loaded.searcher().kind == "approximate"
    assert loaded.searcher("exact").kind == "exact"
    queries = _clustered(5, seed=9)
    _, want = _numpy_top_k(queries, documents, 3)
    np.testing.assert_array_equal(loaded.search(queries, 3, "exact")[1], want)
    np.testing.assert_array_equal(loaded.search(queries, 3, nprobe=4)[1], want)  # all lists
    # Rewritten without an approximate index: the old faiss.index goes with it.
    index.write_index(str(out), ids, texts, documents / 10, {"model": "m"})
    assert not (out / index.FAISS_FILE).exists()
    assert index.load_index(str(out)).searcher().kind == "exact"


def test_index_directory_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        index.load_index(str(tmp_path))
    out = tmp_path / "index"
    index.write_index(str(out), ["a", "b"], ["x", "y"], np.eye(2), {"model": "m"})
    loaded = index.load_index(str(out))
    with pytest.raises(UserError, match=r"query vectors of shape \(1, 3\) for an index of 2"):
        loaded.search(np.ones((1, 3)), 1)
    (out / index.MANIFEST_FILE).write_text("{not json")
    with pytest.raises(UserError, match="manifest.json: not valid JSON"):
        index.load_index(str(out))
    manifest = {**loaded.manifest}
    (out / index.MANIFEST_FILE).write_text(json.dumps({**manifest, "count": 3}))
    with pytest.raises(UserError, match="2 documents, vectors of shape"):
        index.load_index(str(out))
    (out / index.DOCUMENTS_FILE).write_text('{"id": "a"}\n')
    with pytest.raises(UserError, match=r"documents.jsonl:1: expected"):
        index.load_index(str(out))
    with pytest.raises(UserError, match="2 ids, 1 texts"):
        index.write_index(str(tmp_path / "bad"), ["a", "b"], ["x"], np.eye(2), {})
    assert not (tmp_path / "bad").exists()
