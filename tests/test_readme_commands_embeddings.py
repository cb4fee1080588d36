"""The page "Sentence embeddings and semantic search" (docs/embeddings.md) and the README's
quick start of it, run as a new user runs
it (see readme_commands_helpers.py): in order, each command in a fresh process, on the
Lee news files the helper writes in `data/news/`, after the command of "Tools" that
fine-tunes the MRPC pair model its search re-ranks with. And every flag the section
names, in its prose or its commands, is a flag of the tool it is given to (or, in the
prose, of one of the section's tools), by the tools' recorded definitions
(`tools/flag_definitions.json`, kept equal to the tools' by tests/tools/test_tool_start.py).
"""

import csv
import json
import re

import numpy as np
import pytest
import readme_commands_helpers as readme

SECTION = "Sentence embeddings and semantic search"
RETRIEVAL_METRICS = {"mrr@10", "ndcg@10", "recall@1", "recall@10", "recall@100", "map"}
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*)")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return readme.make_work(tmp_path_factory)


def _tool_flags() -> dict[str, set[str]]:
    """Each tool's flags (and their `no` forms), with absl's help flags."""
    definitions = json.loads((readme.REPO_ROOT / "tools" / "flag_definitions.json").read_text())
    flags = {}
    for tool, entry in definitions.items():
        names = {flag["name"] for flag in entry["flags"]}
        flags[tool] = names | {f"no{name}" for name in names} | {"help", "helpfull"}
    return flags


def _section_text() -> str:
    return readme.section_text(SECTION)


def test_every_flag_the_section_names_is_a_flag_of_its_tools():
    flags = _tool_flags()
    commands = [c for s, c in readme.readme_commands() if s == SECTION]
    used = set()
    for command in commands:
        tool = re.match(r"python tools/(\w+)\.py", command).group(1)
        used.add(tool)
        unknown = set(FLAG.findall(command)) - flags[tool]
        assert not unknown, (tool, sorted(unknown))
    # The prose (outside the bash blocks) names flags of the tools the commands run.
    prose = re.sub(r"```bash\n.*?```", "", _section_text(), flags=re.S)
    known = set().union(*(flags[tool] for tool in used))
    named = set(FLAG.findall(prose))
    assert named and not named - known, sorted(named - known)
    # The section's figures say which script measured them, and that script exists.
    assert "Measured figures (`benchmarks/embedding_check.py`" in _section_text()
    assert (readme.REPO_ROOT / "benchmarks" / "embedding_check.py").is_file()


def _read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.mark.slow
def test_sentence_embeddings_and_semantic_search(work):
    readme.run_commands("Tools", work, pattern=r"--task=glue/mrpc")
    outputs = readme.run_section("Sentence embeddings and semantic search", work)
    tmp, news = work / "tmp", work / "data" / "news"

    # 1. Trained on pairs, evaluated on the scored pairs: Spearman picks best/.
    results = json.loads((tmp / "news_embedder" / "eval_results.json").read_text())
    assert results["primary_metric"] == "spearman"
    assert set(results["results"]["sts_dev"]) == {"spearman", "pearson"}
    assert (tmp / "news_embedder" / "best" / "model.keras").is_file()

    # 2. The mined negative of each kept row is another row's positive, never its own.
    pairs = _read_tsv(news / "pairs.tsv")
    triplets = _read_tsv(news / "triplets.tsv")
    assert list(triplets[0]) == ["anchor", "positive", "negative_1"]
    positives = {row["positive"] for row in pairs}
    assert 0 < len(triplets) <= len(pairs)
    for row in triplets:
        assert row["negative_1"] in positives and row["negative_1"] != row["positive"]
    assert {(row["anchor"], row["positive"]) for row in triplets} <= {
        (row["anchor"], row["positive"]) for row in pairs
    }

    # 3-4. The Matryoshka model on triplets, then evaluated on the retrieval files; the
    # untouched MiniLM on the same files.
    task = json.loads((tmp / "news_embedder_hn" / "finetuned" / "task.json").read_text())
    assert task["options"]["matryoshka_dims"] == "384,192,96"
    for run in ("news_embedder_hn", "minilm_eval"):
        evaluated = json.loads((tmp / run / "eval_results.json").read_text())
        assert set(evaluated["results"]["retrieval"]) == RETRIEVAL_METRICS, run
    assert evaluated["primary_metric"] == "ndcg@10"

    # 5-6. The exports, and the answer: unit vectors, the cosines symmetric, and the two
    # sentences about interest rates nearer each other than either to the bushfire.
    assert (work / "exports" / "news_embedder" / "1" / "saved_model.pb").is_file()
    assert (work / "exports" / "news_embedder_192" / "1" / "saved_model.pb").is_file()
    answer = next(o for c, o in outputs.items() if "saved_model_run.py" in c)
    norms = re.findall(r"embedding norm: (\S+)\s+dim: (\d+)", answer)
    assert [(float(n), int(d)) for n, d in norms] == [(pytest.approx(1.0, abs=1e-5), 384)] * 3
    rows = re.findall(r"^\[\d\]((?:\s+-?\d\.\d+){3})\s*$", answer, flags=re.M)
    cosines = np.array([[float(v) for v in row.split()] for row in rows])
    assert cosines.shape == (3, 3), answer[-2000:]
    np.testing.assert_allclose(cosines, cosines.T, atol=1e-6)
    np.testing.assert_allclose(np.diag(cosines), 1.0, atol=1e-5)
    assert cosines[0, 1] > max(cosines[0, 2], cosines[1, 2]), cosines

    # 7. The index holds the corpus in order, as unit vectors; the search finds the two
    # held-out articles on rate cuts and prints them in the re-ranker's order.
    corpus = [json.loads(line) for line in (news / "beir" / "corpus.jsonl").open()]
    index = tmp / "news_index"
    manifest = json.loads((index / "manifest.json").read_text())
    assert manifest["count"] == len(corpus) and manifest["dim"] == 384
    vectors = np.load(index / "vectors.npy")
    assert vectors.shape == (len(corpus), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    documents = [json.loads(line) for line in (index / "documents.jsonl").open()]
    assert [d["id"] for d in documents] == [d["_id"] for d in corpus]
    search = next(o for c, o in outputs.items() if "search_corpus.py" in c)
    hits = re.findall(r"^\s+\d+\. (\S+)\s+rerank (\S+)\s+cosine \S+ \(was (\d+)\)", search, re.M)
    assert len(hits) == 3, search[-2000:]
    assert {"lee244", "lee251"} <= {hit[0] for hit in hits}
    assert sorted(int(hit[2]) for hit in hits) == [1, 2, 3]
    scores = [float(hit[1]) for hit in hits]
    assert scores == sorted(scores, reverse=True)

    # 8. The student: a fine-tuned run with the teacher's evaluation beside its own.
    student = tmp / "news_student"
    assert (student / "finetuned" / "model.keras").is_file()
    distilled = json.loads((student / "distillation.json").read_text())
    assert "sts_dev" in distilled["teacher_results"]

    # The README's quick start: its first command is the page's (run once); the index of
    # the run's directory and a search of it.
    quick = readme.run_section("Quick start: sentence embeddings and search", work)
    index = tmp / "news_index_quick"
    assert json.loads((index / "manifest.json").read_text())["count"] == len(corpus)
    searched = next(o for c, o in quick.items() if "search_corpus.py" in c)
    found = re.findall(r"^\s+\d+\. (\S+)\s+cosine ", searched, re.M)
    assert len(found) == 3 and {"lee244", "lee251"} & set(found), searched[-2000:]
