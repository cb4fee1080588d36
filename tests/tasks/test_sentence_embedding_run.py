"""`sentence_embedding` through the one fine-tuning job (`runners.finetuning`), on a tiny
BERT: a `train_and_eval` run on triplets writes `finetuned/` whose reloaded model gives
the same vectors; `--mode=eval` on BEIR retrieval files and `--mode=predict` on a file of
texts, checked against vectors computed here with the model's embedder and a plain
restatement of the metrics; a resumed run refuses another loss or scale.
"""

import json
import math
import os
import pathlib
import sys

import numpy as np
import pytest

from keras_bert_zoo import from_pretrained, tasks
from keras_bert_zoo.models import BertTextGroupEmbedder
from keras_bert_zoo.runners.finetuning import FinetuningJob, run_finetuning
from keras_bert_zoo.text import BertPreprocessor
from keras_bert_zoo.utils.errors import UserError

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import finetuning_test_helpers as helpers  # noqa: E402
import sentence_embedding_fixtures as fixtures  # noqa: E402

SEQUENCE_LENGTH = 16


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A `train_and_eval` run: 48 triplets, an STS dev file (0-5 scores)."""
    root = tmp_path_factory.mktemp("embedding_run")
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", fixtures.VOCABULARY)
    options = {
        "train_file": fixtures.write_table(
            root / "pairs.tsv", ["anchor", "positive", "negative"], fixtures.triplets(48)
        ),
        "eval_file": fixtures.write_table(
            root / "sts_dev.tsv", ["anchor", "positive", "score"], fixtures.scored_pairs(20)
        ),
        "score_range": "0,5",
        "query_prompt": "query: ",
    }
    config = helpers.quick_config(
        task="sentence_embedding",
        init_checkpoint=checkpoint,
        output_dir=str(root / "out"),
        mode="train_and_eval",
        train_batch_size=8,
        num_train_steps=24,
        eval_every=12,
        max_seq_length=SEQUENCE_LENGTH,
        do_lower_case=True,
        task_options=options,
    )
    return root, config, run_finetuning(config)


def embed(model, tokenizer, texts):
    """The texts' vectors from the model's one-text embedder, packed here."""
    preprocessor = BertPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)
    x = {name: value.numpy() for name, value in preprocessor(np.array(texts)).items()}
    return np.asarray(model.embedder.predict(x, verbose=0))


@pytest.mark.slow
def test_train_and_eval_writes_finetuned_whose_model_gives_the_same_vectors(trained):
    root, config, result = trained
    out = pathlib.Path(config.output_dir)
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results["results"]["sts_dev"]) == {"spearman", "pearson"}
    assert results["primary_metric"] == "spearman"
    assert os.path.isdir(out / "finetuned") and os.path.isdir(out / "best")
    finetuned = tasks.load_finetuned(str(out / "finetuned"))
    assert type(finetuned.model).__name__ == "BertTextGroupEmbedder"
    assert finetuned.task.state()["query_prompt"] == "query: "
    texts = [text for row in fixtures.triplets(6, seed=9) for text in row]
    before = embed(result.model, result.tokenizer, texts)
    after = embed(finetuned.model, finetuned.tokenizer, texts)
    np.testing.assert_allclose(after, before, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(after, axis=1), 1.0, atol=1e-5)
    # The STS figure is scipy's correlation of these vectors' cosines.
    examples, answers = result.eval_answers[0]["sts_dev"], result.eval_answers[1]["sts_dev"]
    import scipy.stats

    a = embed(result.model, result.tokenizer, ["query: " + e.texts[0] for e in examples])
    b = embed(result.model, result.tokenizer, [e.texts[1] for e in examples])
    np.testing.assert_allclose(
        np.stack([x.vectors for x in answers]), np.stack([a, b], 1), atol=1e-5
    )
    spearman = scipy.stats.spearmanr((a * b).sum(1), [e.score for e in examples])[0]
    assert result.eval_results["sts_dev"]["spearman"] == pytest.approx(spearman, abs=1e-5)


def _plain_ndcg_and_mrr(scores, relevant):
    ndcg = mrr = 0.0
    for row, judged in zip(scores, relevant, strict=True):
        ranking = sorted(range(len(row)), key=lambda d: (-row[d], d))
        ranks = sorted(ranking.index(d) + 1 for d in judged)
        mrr += 1 / ranks[0] if ranks[0] <= 10 else 0
        dcg = sum(1 / math.log2(r + 1) for r in ranks if r <= 10)
        ndcg += dcg / sum(1 / math.log2(i + 2) for i in range(min(10, len(ranks))))
    return ndcg / len(scores), mrr / len(scores)


@pytest.mark.slow
def test_eval_mode_on_retrieval_files(trained, tmp_path):
    root, config, result = trained
    files = fixtures.write_beir(tmp_path / "beir", count=10)
    evaluated = run_finetuning(
        helpers.quick_config(
            mode="eval",
            init_checkpoint=str(pathlib.Path(config.output_dir) / "finetuned"),
            output_dir=str(tmp_path / "eval"),
            task_options=files,
        )
    )
    # The model's own --eval_file (STS) and the retrieval files: two splits.
    assert set(evaluated.eval_results) == {"dev", "retrieval"}
    assert set(evaluated.eval_results["dev"]) == {"spearman", "pearson"}
    metrics = evaluated.eval_results["retrieval"]
    assert set(metrics) == {"mrr@10", "ndcg@10", "recall@1", "recall@10", "recall@100", "map"}
    saved = json.loads((tmp_path / "eval" / "eval_results.json").read_text())
    assert saved["results"]["retrieval"]["ndcg@10"] == pytest.approx(metrics["ndcg@10"])
    queries = [json.loads(line) for line in open(files["queries_file"], encoding="utf-8")]
    corpus = [json.loads(line) for line in open(files["corpus_file"], encoding="utf-8")]
    q = embed(result.model, result.tokenizer, ["query: " + x["text"] for x in queries])
    d = embed(result.model, result.tokenizer, [f"{x['title']} {x['text']}".strip() for x in corpus])
    ndcg, mrr = _plain_ndcg_and_mrr((q @ d.T).tolist(), [{i} for i in range(len(queries))])
    assert metrics["ndcg@10"] == pytest.approx(ndcg, abs=1e-5)
    assert metrics["mrr@10"] == pytest.approx(mrr, abs=1e-5)


@pytest.mark.slow
def test_predict_mode_writes_the_vectors(trained, tmp_path):
    root, config, result = trained
    texts = ["a cat is on the mat", "the river is quiet", "a red car"]
    path = tmp_path / "texts.txt"
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    out = tmp_path / "predict"
    run_finetuning(
        helpers.quick_config(
            mode="predict",
            init_checkpoint=str(pathlib.Path(config.output_dir) / "finetuned"),
            output_dir=str(out),
            task_options={"predict_file": str(path)},
        )
    )
    found = list(out.rglob("embeddings_*.npy"))
    assert len(found) == 1, found
    vectors = np.load(found[0])
    records = [json.loads(line) for line in open(found[0].with_suffix(".jsonl"), encoding="utf-8")]
    assert [r["text"] for r in records] == texts and [r["index"] for r in records] == [0, 1, 2]
    np.testing.assert_allclose(vectors, embed(result.model, result.tokenizer, texts), atol=1e-5)


@pytest.mark.parametrize(
    ("option", "value"), [("scale", 10.0), ("loss", "multiple_negatives_ranking")]
)
def test_a_resume_refuses_another_loss_or_scale(trained, option, value):
    root, config, _ = trained
    options = {**config.task_options, option: value}
    changed = type(config)(**{**config.__dict__, "task_options": options})
    with pytest.raises(UserError, match=rf"other settings: {option} \S+ -> "):
        run_finetuning(changed)


@pytest.mark.slow
def test_gradient_cache_trains_the_same_weights_through_the_job(trained, tmp_path):
    """`gradient_cache_chunk_size` trains through the task's `training_loss_fn` (GradCache):
    the same steps as one pass over each batch, to float rounding (without dropout: a
    chunk draws other masks than the whole batch)."""
    _, config, _ = trained
    checkpoint = helpers.write_tiny_checkpoint(
        tmp_path / "bert", fixtures.VOCABULARY, hidden_dropout=0.0, attention_dropout=0.0
    )
    texts = [text for row in fixtures.triplets(4, seed=5) for text in row]
    vectors = {}
    for chunk_size in (0, 3):
        options = {
            "train_file": config.task_options["train_file"],
            "gradient_cache_chunk_size": chunk_size,
        }
        run_config = helpers.quick_config(
            task="sentence_embedding",
            init_checkpoint=checkpoint,
            output_dir=str(tmp_path / f"chunks_{chunk_size}"),
            mode="train",
            train_batch_size=8,
            num_train_steps=4,
            max_seq_length=SEQUENCE_LENGTH,
            do_lower_case=True,
            task_options=options,
        )
        result = run_finetuning(run_config)
        job = FinetuningJob(run_config)
        job.task = result.task
        loss_fn = job.loss_fn(result.model)
        assert (loss_fn.__qualname__.split(".")[0] == "gradient_cache_loss_fn") == bool(chunk_size)
        vectors[chunk_size] = embed(result.model, result.tokenizer, texts)
    np.testing.assert_allclose(vectors[3], vectors[0], atol=1e-4)
    # And the steps trained: the checkpoint's own vectors are others.
    initial = from_pretrained(checkpoint, model=BertTextGroupEmbedder)
    assert not np.allclose(vectors[0], embed(initial, result.tokenizer, texts), atol=1e-3)


@pytest.mark.slow
def test_the_finetuned_directory_exports_raw_text_to_its_vectors(trained, tmp_path):
    """The run's `finetuned/` as a TF Serving SavedModel: `serving_default` answers the
    vectors of the texts as given, `query` those of the texts after the task's
    `query_prompt`, as the reloaded model's embedder gives them; export.json records
    the prompt."""
    import tensorflow as tf

    from keras_bert_zoo import serving

    _, config, result = trained
    exported = serving.export(
        str(pathlib.Path(config.output_dir) / "finetuned"),
        str(tmp_path),
        model_name="emb",
        verify=False,  # compared with the reloaded model's embedder below
    )
    assert {"serving_default", "serve_ids", "query"} <= set(exported.signatures)
    assert exported.description["task"]["query_prompt"] == "query: "
    loaded = tf.saved_model.load(exported.path)
    texts = ["a cat is on the mat", "the river is quiet"]
    served = loaded.signatures["serving_default"](sentence=tf.constant(texts))["embedding"]
    np.testing.assert_allclose(
        served.numpy(), embed(result.model, result.tokenizer, texts), atol=1e-5
    )
    queried = loaded.signatures["query"](sentence=tf.constant(texts))["embedding"]
    np.testing.assert_allclose(
        queried.numpy(),
        embed(result.model, result.tokenizer, ["query: " + text for text in texts]),
        atol=1e-5,
    )
