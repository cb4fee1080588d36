"""tools/index_corpus.py, search_corpus.py and mine_hard_negatives.py run as a user runs
them: their `main` in this process as `cli.run` runs it (flags, the one-line error and
exit status of a user error), one bad input in a fresh process. MiniLM indexes a
BEIR-layout corpus and answers queries in the order of sentence-transformers' own
vectors; a tiny checkpoint's index is re-ranked by a fine-tuned pair model in the order
of that model's probabilities; the mined triplets follow the brute-force restatement of
the rules; bad input ends in one line naming the file and line, with nothing written."""

import json
import os
import pathlib
import subprocess
import sys

import child_process
import numpy as np
import pytest
import search_helpers
import tensorflow as tf

from keras_bert_zoo.search import mining
from keras_bert_zoo.text import BertPreprocessor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tasks"))
import finetuning_test_helpers  # noqa: E402

DOCUMENTS = {
    "guitar": "A man is playing a guitar on stage.",
    "concert": "The band performed songs in front of a large audience.",
    "stocks": "The stock market fell sharply after the announcement.",
    "shares": "Shares dropped quickly when the news came out.",
    "cat": "A cat is sleeping on the windowsill.",
    "kitten": "The kitten curled up and took a nap in the sun.",
    "rain": "Heavy rain flooded the streets of the city.",
    "storm": "A storm with strong winds knocked down trees.",
}
QUERIES = ["stocks went down", "a sleepy cat", "live music"]


def _run_process(tool, *args, timeout=600):
    """The tool in a fresh process, from the checkout, as a user runs it."""
    command = [sys.executable, str(child_process.REPO_ROOT / "tools" / f"{tool}.py"), *args]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=child_process.environment(),
        cwd=child_process.REPO_ROOT,
        timeout=timeout,
    )


@pytest.fixture
def run(load_tool, monkeypatch):
    """`run(tool, *args)`: the tool's `main` in this process, from the checkout's
    directory, as `cli.run` runs it; a `CompletedProcess`-like result."""
    monkeypatch.chdir(child_process.REPO_ROOT)

    def run_tool(tool, *args):
        with load_tool(tool) as module:
            status, stdout, stderr = finetuning_test_helpers.run_tool_as_user(module, tool, *args)
        return subprocess.CompletedProcess([tool, *args], status, stdout, stderr)

    return run_tool


def _ok(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _printed_ids(stdout):
    """`{query: [id, ...]}` from the printed answers."""
    answers, query = {}, None
    for line in stdout.splitlines():
        if line.startswith("query: "):
            query = line[len("query: ") :]
            answers[query] = []
        elif query is not None and line.strip()[:1].isdigit():
            answers[query].append(line.split()[1])
    return answers


@pytest.mark.slow
def test_minilm_index_and_search(tmp_path, monkeypatch, run):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"_id": key, "title": "", "text": text, "metadata": {}}) + "\n"
            for key, text in DOCUMENTS.items()
        )
    )
    index_dir = tmp_path / "index"
    stdout = _ok(
        run(
            "index_corpus",
            "--model=all-MiniLM-L6-v2",
            f"--corpus_file={corpus}",
            f"--output_dir={index_dir}",
        )
    )
    assert "indexed 8 documents" in stdout and "384 dimensions" in stdout
    manifest = json.loads((index_dir / "manifest.json").read_text())
    assert manifest["model"] == "all-MiniLM-L6-v2" and manifest["count"] == 8
    assert manifest["normalized"] is True and manifest["approximate"] is None
    answers_file = tmp_path / "answers.jsonl"
    arguments = [f"--index_dir={index_dir}", "--top_k=3", f"--output_file={answers_file}"]
    stdout = _ok(run("search_corpus", *arguments, *(f"--query={q}" for q in QUERIES)))

    # The reference: sentence-transformers' vectors of the same texts, ranked in numpy.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from keras_bert_zoo.checkpoints.installed import INSTALLED_CHECKPOINTS

    reference = SentenceTransformer(INSTALLED_CHECKPOINTS["all-MiniLM-L6-v2"].path(), device="cpu")
    documents = reference.encode(list(DOCUMENTS.values()), normalize_embeddings=True)
    queries = reference.encode(QUERIES, normalize_embeddings=True)
    np.testing.assert_allclose(np.load(index_dir / "vectors.npy"), documents, atol=1e-5)
    cosines = queries @ documents.T
    ids = list(DOCUMENTS)
    want = {
        q: [ids[i] for i in np.argsort(-row)[:3]] for q, row in zip(QUERIES, cosines, strict=True)
    }
    assert _printed_ids(stdout) == want
    # Results that make sense: each query's best document is of its topic.
    topics = [{"stocks", "shares"}, {"cat", "kitten"}, {"guitar", "concert"}]
    assert all(want[q][0] in topic for q, topic in zip(QUERIES, topics, strict=True))
    written = [json.loads(line) for line in answers_file.read_text().splitlines()]
    first = written[0]["documents"][0]
    assert first["id"] == "stocks" and first["text"] == DOCUMENTS["stocks"]
    assert first["cosine"] == pytest.approx(float(cosines[0].max()), abs=1e-5)
    # The FAISS index (built now: the directory has none) scanning its one list: the same.
    stdout = _ok(
        run("search_corpus", *arguments[:2], "--index=approximate", f"--query={QUERIES[0]}")
    )
    assert _printed_ids(stdout)[QUERIES[0]] == want[QUERIES[0]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_tools")
    checkpoint, encoder = search_helpers.write_checkpoint(root / "checkpoint")
    pair_dir = root / "pair_model"
    task, model, tokenizer = search_helpers.save_pair_classifier(root, pair_dir)
    return root, checkpoint, encoder, (str(pair_dir), task, model, tokenizer)


TINY_DOCUMENTS = [
    "the cat sat on the mat",
    "a kitten slept on the sofa",
    "stock market fell",
    "shares dropped news",
    "the dog ran far away",
    "guitar music played on the stage",
    "the river bank",
    "money in the bank",
]


@pytest.mark.slow
def test_search_reranked_by_a_cross_encoder(tiny, run):
    root, checkpoint, _, (pair_dir, task, model, tokenizer) = tiny
    corpus = root / "docs.tsv"
    corpus.write_text(
        "id\ttext\n" + "".join(f"t{i}\t{text}\n" for i, text in enumerate(TINY_DOCUMENTS))
    )
    index_dir = root / "tiny_index"
    # The model given relative to the working directory: the manifest holds its absolute
    # path, which search_corpus finds from anywhere.
    relative = os.path.relpath(checkpoint, child_process.REPO_ROOT)
    _ok(
        run(
            "index_corpus",
            f"--model={relative}",
            f"--corpus_file={corpus}",
            f"--output_dir={index_dir}",
        )
    )
    assert json.loads((index_dir / "manifest.json").read_text())["model"] == checkpoint
    query = "the cat sat"
    plain = _printed_ids(
        _ok(run("search_corpus", f"--index_dir={index_dir}", f"--query={query}", "--top_k=8"))
    )
    reranked_out = _ok(
        run(
            "search_corpus",
            f"--index_dir={index_dir}",
            f"--query={query}",
            "--top_k=8",
            "--rerank_top_k=5",
            f"--reranker={pair_dir}",
        )
    )
    assert f"re-ranked by {pair_dir}" in reranked_out
    head = plain[query][:5]
    texts = [TINY_DOCUMENTS[int(i[1:])] for i in head]
    inputs = BertPreprocessor(tokenizer, sequence_length=task.max_seq_length)(
        (tf.constant([query] * 5), tf.constant(texts))
    )
    logits = np.asarray(model(inputs, training=False), np.float64)
    probability = np.exp(logits[:, 1]) / np.exp(logits).sum(axis=1)
    want = [head[i] for i in np.argsort(-probability, kind="stable")] + plain[query][5:]
    assert _printed_ids(reranked_out)[query] == want
    assert want != plain[query]  # the re-ranker moved something: the check can fail


@pytest.mark.slow
def test_mine_hard_negatives_tool(tiny, run):
    root, checkpoint, encoder, _ = tiny
    anchors = ["the cat", "stock market", "the dog", "guitar music", "the river"]
    positives = [
        "a kitten slept",
        "shares dropped news",
        "the dog ran far away",
        "music played on the stage",
        "the river bank",
    ]
    train = root / "pairs.csv"
    train.write_text(
        "anchor,positive\n" + "".join(f"{a},{p}\n" for a, p in zip(anchors, positives, strict=True))
    )
    output = root / "triplets.tsv"
    stdout = _ok(
        run(
            "mine_hard_negatives",
            f"--model={checkpoint}",
            f"--train_file={train}",
            f"--output_file={output}",
            "--num_negatives=2",
            "--skip_top=1",
            "--margin=0.01",
        )
    )
    lines = output.read_text().splitlines()
    assert lines[0].split("\t") == ["anchor", "positive", "negative_1", "negative_2"]
    written = {row.split("\t")[0]: row.split("\t")[2:] for row in lines[1:]}
    assert f"wrote {len(written)} rows" in stdout
    # The reference: the numpy vectors of the texts and the rules restated.
    anchor_vectors = search_helpers.mean_pooled_unit_vectors(encoder, anchors)
    positive_vectors = search_helpers.mean_pooled_unit_vectors(encoder, positives)
    positive_scores = np.sum(anchor_vectors * positive_vectors, axis=1)
    settings = mining.MiningSettings(2, margin=0.01, skip_top=1)
    want = search_helpers.brute_force_negatives(
        anchor_vectors, positive_vectors, positive_scores, [{i} for i in range(5)], settings
    )
    expected = {
        anchors[i]: [positives[j] for j in row] for i, row in enumerate(want) if row is not None
    }
    assert written == expected and len(expected) >= 2
    for anchor, negatives in written.items():
        assert positives[anchors.index(anchor)] not in negatives


def _one_line_error(result, tool, *fragments):
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{tool}: error: "), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in last, last


@pytest.mark.slow
def test_bad_input_is_one_line_and_writes_nothing(tiny, run):
    """The first case in a fresh process, as a user runs the tool; the others in this
    process (the same `cli.run` wrapper prints the same line)."""
    root, checkpoint, _, _ = tiny
    bad = root / "bad.jsonl"
    bad.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b", "text": \n')
    out = root / "never_written"
    result = _run_process(
        "index_corpus", f"--model={checkpoint}", f"--corpus_file={bad}", f"--output_dir={out}"
    )
    _one_line_error(result, "index_corpus", f"{bad}:2: not JSON")
    pairs = root / "bad_pairs.tsv"
    pairs.write_text("anchor\tpositive\nthe cat\t\t\n")
    triplets = root / "never.tsv"
    result = run(
        "mine_hard_negatives",
        f"--model={checkpoint}",
        f"--train_file={pairs}",
        f"--output_file={triplets}",
    )
    _one_line_error(result, "mine_hard_negatives", f"{pairs}:2: expected 2 columns")
    result = run("search_corpus", f"--index_dir={root / 'absent'}", "--query=x")
    _one_line_error(result, "search_corpus", "no manifest.json")
    result = run("index_corpus", f"--corpus_file={bad}", f"--output_dir={out}")
    _one_line_error(result, "index_corpus", "--model")
    assert not out.exists() and not triplets.exists()
