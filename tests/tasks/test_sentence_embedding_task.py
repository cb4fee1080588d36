"""The `sentence_embedding` task's contract: features (shapes, prompts, scores), the
loss each kind of data and option picks, answers in example order, the metrics of each
kind of evaluation data against scipy and a plain-Python restatement, state and the
init checkpoint's sentence-transformers settings.
"""

import json
import math
import pathlib
import sys

import numpy as np
import pytest
import scipy.stats

from keras_bert_zoo import tasks
from keras_bert_zoo.models import embedding_losses
from keras_bert_zoo.tasks.sentence_embedding import EmbeddingAnswer
from keras_bert_zoo.tasks.sentence_embedding.reader import EmbeddingExample
from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.utils.errors import UserError

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import sentence_embedding_fixtures as fixtures  # noqa: E402

SEQUENCE_LENGTH = 12


def make_task(**options):
    return tasks.create_task("sentence_embedding", max_seq_length=SEQUENCE_LENGTH, **options)


def packed_ids(text: str) -> list[int]:
    """`[CLS] words [SEP]` padded, by hand: every fixture word is one vocabulary entry."""
    vocabulary = fixtures.VOCABULARY
    words = text.replace(":", " :").split()[: SEQUENCE_LENGTH - 2]
    ids = [
        vocabulary.index("[CLS]"),
        *(vocabulary.index(w) for w in words),
        vocabulary.index("[SEP]"),
    ]
    return ids + [0] * (SEQUENCE_LENGTH - len(ids))


# === Features ===


def test_triplet_features_pack_each_text_alone_with_its_prompt(tmp_path):
    rows = fixtures.triplets(5)
    path = fixtures.write_table(tmp_path / "t.tsv", ["anchor", "positive", "negative"], rows)
    task = make_task(train_file=path, query_prompt="query: ", document_prompt="passage: ")
    preprocessor = task.make_preprocessor(BertTokenizer(fixtures.VOCABULARY, lowercase=True))
    features = list(task.features(task.read("train"), preprocessor, training=True))
    assert len(features) == len(rows)
    for feature, (anchor, positive, negative) in zip(features, rows, strict=True):
        assert feature["input_word_ids"].shape == (3, SEQUENCE_LENGTH)
        expected = [packed_ids("query: " + anchor)]
        expected += [packed_ids("passage: " + positive), packed_ids("passage: " + negative)]
        assert feature["input_word_ids"].numpy().tolist() == expected
        assert feature["input_mask"].numpy().tolist() == [
            [int(i != 0) for i in r] for r in expected
        ]
        assert not feature["input_type_ids"].numpy().any()
        assert float(feature["label"]) == 0.0  # a placeholder: in-batch negatives
    assert [int(f["example_index"]) for f in features] == list(range(len(rows)))


def test_scored_pair_features_carry_the_mapped_score(tmp_path):
    rows = fixtures.scored_pairs(4)
    path = fixtures.write_table(tmp_path / "s.tsv", ["anchor", "positive", "score"], rows)
    task = make_task(train_file=path, score_range="0,5")
    preprocessor = task.make_preprocessor(BertTokenizer(fixtures.VOCABULARY, lowercase=True))
    features = list(task.features(task.read("train"), preprocessor, training=True))
    assert [f["input_word_ids"].shape for f in features] == [(2, SEQUENCE_LENGTH)] * 4
    assert [float(f["label"]) for f in features] == [score / 5 for *_, score in rows]
    x, y, weight = task.split_features(features[0])
    assert sorted(x) == ["input_mask", "input_type_ids", "input_word_ids"]
    assert float(y) == rows[0][2] / 5 and weight is None


# === Losses ===


def _task_on(tmp_path, kind, **options):
    if kind == "pairs":
        path = fixtures.write_table(
            tmp_path / "p.tsv", ["anchor", "positive"], [("a cat", "the cat")]
        )
    else:
        path = fixtures.write_table(
            tmp_path / "s.tsv", ["anchor", "positive", "score"], [("a cat", "the cat", 1)]
        )
    return make_task(train_file=path, **options)


def test_loss_by_kind_and_option(tmp_path):
    loss = _task_on(tmp_path, "pairs", scale=10.0, symmetric_loss=True).loss()
    assert type(loss) is embedding_losses.MultipleNegativesRankingLoss
    assert (loss.scale, loss.symmetric) == (10.0, True)
    loss = _task_on(tmp_path, "scored").loss()
    assert type(loss) is embedding_losses.CoSENTLoss and loss.scale == 20.0
    loss = _task_on(tmp_path, "scored", loss="cosine_similarity").loss()
    assert type(loss) is embedding_losses.CosineSimilarityLoss
    loss = _task_on(tmp_path, "pairs", matryoshka_dims="16,64,32").loss()
    assert type(loss) is embedding_losses.MatryoshkaLoss
    assert loss.dims == [64, 32, 16]
    assert type(loss.loss) is embedding_losses.MultipleNegativesRankingLoss
    with pytest.raises(UserError, match="--loss=cosent trains on scored pairs"):
        _task_on(tmp_path, "pairs", loss="cosent").loss()
    with pytest.raises(UserError, match="multiple_negatives_ranking trains on pairs"):
        _task_on(tmp_path, "scored", loss="multiple_negatives_ranking").loss()


def test_the_loss_of_a_batch_is_the_in_batch_softmax(tmp_path):
    """The task's pair loss on known vectors: numpy's cross-entropy of scaled cosines."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(4, 3, 8)).astype("float32")
    loss = float(_task_on(tmp_path, "pairs", scale=5.0).loss()(None, vectors))
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    candidates = np.concatenate([unit[:, 1], unit[:, 2]])
    logits = 5.0 * unit[:, 0] @ candidates.T
    expected = np.mean([np.log(np.exp(row).sum()) - row[i] for i, row in enumerate(logits)])
    assert loss == pytest.approx(expected, rel=1e-5)


def test_training_loss_fn_is_the_jobs_unless_gradient_cache(tmp_path):
    assert _task_on(tmp_path, "pairs").training_loss_fn() is None
    assert tasks.create_task("text_classification").training_loss_fn() is None


# === Answers and metrics ===


def _examples(kind, count, **fields):
    return [
        EmbeddingExample(
            example_id=f"dev-{i}",
            texts=tuple(f"text {i} {j}" for j in range(2)),
            roles=("query", "document"),
            kind=kind,
            **{name: values[i] for name, values in fields.items()},
        )
        for i in range(count)
    ]


def test_postprocess_answers_in_example_order(tmp_path):
    task = make_task()
    examples = _examples("pairs", 3)
    outputs = np.arange(3 * 2 * 4, dtype="float32").reshape(3, 2, 4)
    answers = task.postprocess(outputs, {"example_index": np.array([2, 0, 1])}, examples)
    assert [a.vectors.tolist() for a in answers] == [
        outputs[1].tolist(),
        outputs[2].tolist(),
        outputs[0].tolist(),
    ]


def test_sts_metrics_are_scipys(tmp_path):
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(20, 2, 6)).astype("float32")
    scores = rng.uniform(size=20).round(1)  # ties, as real gold scores have
    task = make_task()
    examples = _examples("scored_pairs", 20, score=list(scores))
    results = task.evaluate([EmbeddingAnswer(v) for v in vectors], examples)
    a, b = vectors[:, 0].astype("float64"), vectors[:, 1].astype("float64")
    cosines = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert results["spearman"] == pytest.approx(scipy.stats.spearmanr(cosines, scores)[0], abs=1e-6)
    assert results["pearson"] == pytest.approx(scipy.stats.pearsonr(cosines, scores)[0], abs=1e-6)


def _plain_retrieval(scores, relevant):
    """MRR@10, nDCG@10, Recall@1/10/100, MAP of one score row per query, by sorting
    (ties: corpus order), in plain Python."""
    totals = dict.fromkeys(["mrr@10", "ndcg@10", "recall@1", "recall@10", "recall@100", "map"], 0.0)
    for row, judged in zip(scores, relevant, strict=True):
        ranking = sorted(range(len(row)), key=lambda d: (-row[d], d))
        hits = [ranking.index(d) + 1 for d in judged]
        totals["mrr@10"] += 1 / min(hits) if min(hits) <= 10 else 0
        for k in (1, 10, 100):
            totals[f"recall@{k}"] += sum(h <= k for h in hits) / len(hits)
        dcg = sum(
            judged[d] / math.log2(ranking.index(d) + 2) for d in judged if ranking.index(d) < 10
        )
        ideal = sorted(judged.values(), reverse=True)[:10]
        totals["ndcg@10"] += dcg / sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        totals["map"] += sum((i + 1) / h for i, h in enumerate(sorted(hits))) / len(hits)
    return {name: total / len(scores) for name, total in totals.items()}


def test_retrieval_metrics_on_beir_examples_are_the_plain_restatement(tmp_path):
    files = fixtures.write_beir(tmp_path, count=6)
    task = make_task(**files)
    examples = task.read("retrieval")
    queries = [e for e in examples if e.relevant is not None]
    documents = [e for e in examples if e.relevant is None]
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(len(examples), 1, 5)).astype("float32")
    results = task.evaluate([EmbeddingAnswer(v) for v in vectors], examples)
    unit = vectors[:, 0] / np.linalg.norm(vectors[:, 0], axis=1, keepdims=True)
    scores = unit[: len(queries)] @ unit[len(queries) :].T
    ids = [d.text_id for d in documents]
    relevant = [{ids.index(d): g for d, g in q.relevant.items()} for q in queries]
    expected = _plain_retrieval(scores.tolist(), relevant)
    assert results.keys() == expected.keys()
    for name, value in expected.items():
        assert results[name] == pytest.approx(value, abs=1e-6), name


def test_pairs_evaluate_each_anchor_among_the_distinct_positives():
    positives = ["p0", "p1", "p0", "p2"]  # rows 0 and 2 share their positive
    examples = [
        EmbeddingExample(f"dev-{i}", (f"a{i}", p), ("query", "document"), "pairs")
        for i, p in enumerate(positives)
    ]
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(4, 2, 5)).astype("float32")
    vectors[2, 1] = vectors[0, 1]  # one text, one vector
    results = make_task().evaluate([EmbeddingAnswer(v) for v in vectors], examples)
    corpus = vectors[[0, 1, 3], 1]
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    scores = unit(vectors[:, 0]) @ unit(corpus).T
    expected = _plain_retrieval(scores.tolist(), [{0: 1.0}, {1: 1.0}, {0: 1.0}, {2: 1.0}])
    for name, value in expected.items():
        assert results[name] == pytest.approx(value, abs=1e-6), name
    assert make_task().primary_metric == "spearman"


# === State and the init checkpoint ===


def _sentence_transformers_dir(path, pooling_flag, normalize):
    path.mkdir()
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    if normalize:
        modules.append(
            {
                "idx": 2,
                "name": "2",
                "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize",
            }
        )
    (path / "modules.json").write_text(json.dumps(modules))
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text(json.dumps({pooling_flag: True}))
    return str(path)


def test_pooling_and_normalize_from_the_init_checkpoint_unless_given(tmp_path):
    directory = _sentence_transformers_dir(tmp_path / "st", "pooling_mode_cls_token", False)
    (tmp_path / "st" / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 48}))
    task = make_task()
    assert (task.pooling, task.normalize) == ("mean", True)
    task.use_init_checkpoint(directory)
    assert (task.pooling, task.normalize) == ("cls", False)
    assert task.max_seq_length == SEQUENCE_LENGTH  # given: kept
    unset = tasks.create_task("sentence_embedding")
    unset.use_init_checkpoint(directory)
    assert unset.max_seq_length == 48
    given = make_task(pooling="max", normalize_embeddings="true")
    given.use_init_checkpoint(directory)
    assert (given.pooling, given.normalize) == ("max", True)
    plain = make_task()
    plain.use_init_checkpoint(str(tmp_path))  # no modules.json: a plain BERT
    assert (plain.pooling, plain.normalize) == ("mean", True)


def test_state_round_trip_and_contradiction(tmp_path):
    task = _task_on(tmp_path, "pairs", query_prompt="query: ", matryoshka_dims="8,4", pooling="cls")
    task.read("train")
    state = task.state()
    assert state == {
        "training_data": "pairs",
        "pooling": "cls",
        "normalize": True,
        "embedding_dim": None,
        "matryoshka_dims": [8, 4],
        "query_prompt": "query: ",
        "document_prompt": "",
    }
    loaded = make_task(query_prompt="query: ", matryoshka_dims="8,4")
    loaded.load_state(json.loads(json.dumps(state)))
    assert loaded.state() == state
    with pytest.raises(UserError, match="--pooling=max contradicts"):
        make_task(pooling="max").load_state(state)
