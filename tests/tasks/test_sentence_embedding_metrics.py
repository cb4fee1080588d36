"""The sentence embedding metrics against independent references: the STS correlations
against scipy's, the retrieval metrics against `ir_measures` (trec_eval through
`pytrec_eval`) and against a plain-Python restatement that sorts the whole corpus (which
also fixes the order of equal scores: corpus order)."""

import math

import ir_measures
import numpy as np
import pytest
import scipy.stats
from ir_measures import AP, RR, R, nDCG

from keras_bert_zoo.tasks.sentence_embedding import metrics
from keras_bert_zoo.utils.errors import UserError

# === STS ===


def test_sts_correlations_equal_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 6)), rng.standard_normal((40, 6))
    b[:20] += 2 * a[:20]  # some related pairs
    cosines = np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    # STS's 0-5 in steps of 1 (ties), loosely following the cosines.
    scores = np.clip(np.round(2.5 + 2.5 * cosines + rng.normal(0, 0.7, 40)), 0, 5)
    result = metrics.sts_metrics(a, b, scores)
    assert result["spearman"] == pytest.approx(scipy.stats.spearmanr(cosines, scores)[0], abs=1e-6)
    assert result["pearson"] == pytest.approx(scipy.stats.pearsonr(cosines, scores)[0], abs=1e-6)
    assert 0.3 < result["spearman"] < 1.0


def test_sts_degenerate_inputs():
    a = np.eye(3)
    assert math.isnan(metrics.sts_metrics(a, a, [1.0, 1.0, 1.0])["pearson"])  # constant gold
    with pytest.raises(UserError, match="2 gold scores for 3 pairs"):
        metrics.sts_metrics(a, a, [1.0, 2.0])


# === Retrieval ===


def _plain_metrics(scores, relevance, k_mrr=10, k_ndcg=10, recall_at=(1, 10, 100)):
    """Each query's whole ranking sorted (equal scores in corpus order), then the
    textbook definitions, one query at a time."""
    totals, counted = {}, 0
    for row, judged in zip(scores, relevance, strict=True):
        relevant = {d: g for d, g in judged.items() if g > 0}
        if not relevant:
            continue
        counted += 1
        ranking = sorted(range(len(row)), key=lambda d: (-row[d], d))
        values = {}
        first = next(rank for rank, d in enumerate(ranking, 1) if d in relevant)
        values[f"mrr@{k_mrr}"] = 1 / first if first <= k_mrr else 0.0
        for k in recall_at:
            values[f"recall@{k}"] = sum(d in relevant for d in ranking[:k]) / len(relevant)
        dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:k_ndcg]))
        ideal = sorted(relevant.values(), reverse=True)[:k_ndcg]
        values[f"ndcg@{k_ndcg}"] = dcg / sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        hits, precisions = 0, []
        for rank, d in enumerate(ranking, 1):
            if d in relevant:
                hits += 1
                precisions.append(hits / rank)
        values["map"] = sum(precisions) / len(relevant)
        for name, value in values.items():
            totals[name] = totals.get(name, 0.0) + value
    return {name: total / counted for name, total in totals.items()}


def _unit(v):
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def retrieval_case():
    """25 queries over 150 documents (so that Recall@100 is not Recall@all), 1 to 4
    relevant documents a query with grades 1-3, some judged non-relevant (grade 0),
    one query without a relevant document (skipped)."""
    rng = np.random.default_rng(1)
    corpus = rng.standard_normal((150, 8)).astype("float32")
    queries = rng.standard_normal((25, 8)).astype("float32")
    relevance = []
    for q in range(25):
        documents = rng.choice(150, size=rng.integers(1, 5), replace=False)
        judged = {int(d): float(rng.integers(1, 4)) for d in documents}
        # Make some relevant documents near the query, so that top ranks occur.
        queries[q] += 0.7 * corpus[documents[0]]
        judged[int(rng.integers(0, 150))] = 0.0
        relevance.append(judged)
    relevance[3] = {5: 0.0}
    scores = _unit(queries) @ _unit(corpus).T
    return queries, corpus, relevance, scores


def test_retrieval_metrics_equal_a_plain_restatement(retrieval_case):
    queries, corpus, relevance, scores = retrieval_case
    ours = metrics.retrieval_metrics(queries, corpus, relevance, chunk_size=7)
    plain = _plain_metrics(scores, relevance)
    assert (
        sorted(ours)
        == sorted(plain)
        == sorted(["mrr@10", "ndcg@10", "recall@1", "recall@10", "recall@100", "map"])
    )
    for name in plain:
        assert ours[name] == pytest.approx(plain[name], abs=1e-9), name
    # The metrics move: not all 0 or 1.
    assert 0.05 < ours["mrr@10"] < 0.95 and ours["recall@10"] < ours["recall@100"]


def test_retrieval_metrics_equal_trec_eval(retrieval_case):
    """`ir_measures` over `pytrec_eval` (trec_eval's C code) on the full runs."""
    queries, corpus, relevance, scores = retrieval_case
    # No document within float32 rounding of a relevant one: the rounding of the scores
    # (theirs double, ours float32) cannot reorder what the metrics read.
    for q, judged in enumerate(relevance):
        for d in judged:
            gaps = np.abs(np.delete(scores[q], d) - scores[q, d])
            assert gaps.min() > 1e-6
    # The queries with a relevant document: ours skips the others (as
    # sentence-transformers' evaluator does); a reference may count them as 0.
    judged_queries = [q for q, judged in enumerate(relevance) if max(judged.values()) > 0]
    assert len(judged_queries) == len(queries) - 1
    qrels = [
        ir_measures.Qrel(f"q{q}", f"d{d}", int(grade))
        for q in judged_queries
        for d, grade in relevance[q].items()
    ]
    run = [
        ir_measures.ScoredDoc(f"q{q}", f"d{d}", float(scores[q, d]))
        for q in judged_queries
        for d in range(len(corpus))
    ]
    reference = ir_measures.calc_aggregate(
        [RR @ 10, nDCG @ 10, R @ 1, R @ 10, R @ 100, AP], qrels, run
    )
    ours = metrics.retrieval_metrics(queries, corpus, relevance)
    expected = {
        "mrr@10": reference[RR @ 10],
        "ndcg@10": reference[nDCG @ 10],
        "recall@1": reference[R @ 1],
        "recall@10": reference[R @ 10],
        "recall@100": reference[R @ 100],
        "map": reference[AP],
    }
    for name, value in expected.items():
        assert ours[name] == pytest.approx(value, abs=1e-6), name


def test_ties_rank_in_corpus_order():
    corpus = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [0.6, 0.8]])
    query = np.array([[1.0, 0.0]])  # documents 0, 2, 3 tie at cosine 1
    scores, indices = metrics.exact_search(query, corpus, top_k=4)
    np.testing.assert_array_equal(indices, [[0, 2, 3, 4]])
    np.testing.assert_allclose(scores, [[1.0, 1.0, 1.0, 0.6]], atol=1e-6)
    assert [list(r) for r in metrics.relevant_ranks(query, corpus, [{3: 1.0, 1: 1.0}])] == [[3, 5]]
    ours = metrics.retrieval_metrics(query, corpus, [{3: 1.0}], recall_at=(1, 3))
    plain = _plain_metrics(query @ _unit(corpus).T, [{3: 1.0}], recall_at=(1, 3))
    assert ours == pytest.approx(plain)
    assert ours["mrr@10"] == pytest.approx(1 / 3)


def test_exact_search_equals_sorting(retrieval_case):
    queries, corpus, _, scores = retrieval_case
    for top_k, chunk_size in ((10, 4), (150, 128), (500, 25)):
        found_scores, found = metrics.exact_search(queries, corpus, top_k, chunk_size=chunk_size)
        expected = np.argsort(-scores, axis=1, kind="stable")[:, : min(top_k, 150)]
        np.testing.assert_array_equal(found, expected)
        np.testing.assert_allclose(found_scores, np.take_along_axis(scores, expected, 1), atol=1e-6)


def test_relevance_by_index():
    relevance = metrics.relevance_by_index(
        ["q1", "q2", "q3"],
        ["a", "b", "c"],
        {"q1": {"c": 1, "a": 0}, "q3": {"b": 2}, "q9": {"zz": 1}},
    )
    assert relevance == [{2: 1.0, 0: 0.0}, {}, {1: 2.0}]
    with pytest.raises(UserError, match="query 'q1': the judged document 'd' is not in the corpus"):
        metrics.relevance_by_index(["q1"], ["a"], {"q1": {"d": 1}})
    with pytest.raises(UserError, match="corpus ids repeat: a"):
        metrics.relevance_by_index(["q1"], ["a", "a"], {})
    with pytest.raises(UserError, match="no query has a relevant document"):
        metrics.retrieval_metrics(np.eye(2), np.eye(2), [{0: 0.0}, {}])
