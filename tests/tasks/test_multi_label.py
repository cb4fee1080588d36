"""Multi-label `text_classification`: reading label sets, the metrics, the thresholds and
the run end to end (training, evaluation, prediction files, the Hugging Face export in
`transformers`, the thresholds in a fresh process, the served answers).

References: scikit-learn's `f1_score` / `accuracy_score` for the metrics, a brute-force
search with scikit-learn for the tuned thresholds, `transformers` for the Hugging Face
export, and `postprocess` (numpy) for the exported model's answers.
"""

import json
import pathlib
import sys
import warnings

import numpy as np
import pytest
import sklearn.metrics
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.runners import finetuning
from keras_bert_zoo.tasks.sentence import InputFileError, multi_label

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import finetuning_test_helpers as helpers  # noqa: E402
import sentence_fixtures as fixtures  # noqa: E402

LABELS = tuple(fixtures.MULTI_LABELS)
SEQUENCE_LENGTH = 32


def _sklearn_report(gold, predicted, names):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_label = sklearn.metrics.f1_score(gold, predicted, average=None, zero_division=0)
        report = {
            "micro_f1": sklearn.metrics.f1_score(gold, predicted, average="micro", zero_division=0),
            "macro_f1": sklearn.metrics.f1_score(gold, predicted, average="macro", zero_division=0),
            "subset_accuracy": sklearn.metrics.accuracy_score(gold, predicted),
        }
    report.update({f"f1/{name}": value for name, value in zip(names, per_label, strict=True)})
    return report


@pytest.mark.parametrize("seed", range(4))
def test_metrics_equal_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    names = [f"l{i}" for i in range(6)]
    gold = (rng.uniform(size=(37, 6)) < 0.3).astype(int)
    predicted = (rng.uniform(size=(37, 6)) < 0.3).astype(int)
    gold[:, 0] = predicted[:, 0] = 0  # a label never gold nor predicted: F1 0
    gold[:, 1] = 0  # predicted, never gold
    if seed == 3:
        predicted = gold.copy()  # all right
    ours = multi_label.multi_label_report(gold, predicted, names)
    reference = _sklearn_report(gold, predicted, names)
    assert set(ours) == set(reference)
    for key, value in reference.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key


def test_tuned_thresholds_reach_the_best_f1_of_a_brute_force_search():
    rng = np.random.default_rng(0)
    gold = (rng.uniform(size=(40, 4)) < 0.4).astype(int)
    gold[:, 3] = 0  # no positive: keeps the default
    probabilities = np.clip(gold * 0.3 + rng.uniform(size=gold.shape) * 0.7, 0.001, 0.999)
    tuned = multi_label.tune_thresholds(probabilities, gold)
    for label in range(4):
        column = probabilities[:, label]
        candidates = np.concatenate([np.unique(column), [0.5, 1.0]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            best = max(
                sklearn.metrics.f1_score(gold[:, label], column >= t, zero_division=0)
                for t in candidates
            )
            reached = sklearn.metrics.f1_score(
                gold[:, label], column >= tuned[label], zero_division=0
            )
        assert reached == pytest.approx(best, abs=1e-12)
    assert tuned[3] == 0.5


def _rows_files(tmp_path, rows):
    """The same label sets as a separator TSV, fastText lines and 0/1 columns."""
    fixtures.write_multi_label_tsv(str(tmp_path / "sets.tsv"), rows, separator="|")
    fasttext = [" ".join([*(f"__label__{n}" for n in labels), text]) for text, labels in rows]
    (tmp_path / "sets.txt").write_text("\n".join(fasttext) + "\n", encoding="utf-8")
    columns = ["text\t" + "\t".join(LABELS)]
    for text, labels in rows:
        columns.append(text + "\t" + "\t".join("1" if n in labels else "0" for n in LABELS))
    (tmp_path / "columns.tsv").write_text("\n".join(columns) + "\n", encoding="utf-8")


def test_reads_label_sets_from_a_separator_fasttext_tags_and_0_1_columns(tmp_path):
    rows = fixtures.multi_label_rows(12, seed=1)
    _rows_files(tmp_path, rows)
    made = [
        tasks.create_task(
            "text_classification",
            data_dir=str(tmp_path),
            train_file="sets.tsv",
            label_column="labels",
            multi_label=True,
            label_separator="|",
        ),
        tasks.create_task(
            "text_classification", data_dir=str(tmp_path), train_file="sets.txt", multi_label=True
        ),
        tasks.create_task(
            "text_classification",
            data_dir=str(tmp_path),
            train_file="columns.tsv",
            label_columns=",".join(LABELS),
        ),
    ]
    for task in made:
        examples = task.read("train")
        assert task.is_multi_label and task.primary_metric == "micro_f1"
        assert sorted(task.label_names) == sorted(LABELS)
        expected = [
            (text, tuple(n for n in task.label_names if n in labels)) for text, labels in rows
        ]
        assert [(e.texts[0], e.label) for e in examples] == expected


def _write_split_files(root, train=40, dev=16, test=6):
    fixtures.write_multi_label_tsv(f"{root}/train.tsv", fixtures.multi_label_rows(train, 1))
    fixtures.write_multi_label_tsv(f"{root}/dev.tsv", fixtures.multi_label_rows(dev, 2))
    fixtures.write_multi_label_tsv(
        f"{root}/test.tsv", fixtures.multi_label_rows(test, 3), labelled=False
    )


def _bad_input_cases(root):
    """(option overrides, file to rewrite, its lines, the expected message)."""
    header = "text\tlabels"
    return [
        (
            {},
            "dev.tsv",
            [header, "good film\tpos", "bad film\tneg,angry"],
            r"dev.tsv:3: label 'angry' is not one of",
        ),
        ({}, "train.tsv", [header, "good film\tpos", "a film\t"], r"train.tsv:3: empty label"),
        (
            {"thresholds_file": "thresholds.tsv"},
            "thresholds.tsv",
            ["pos\t0.4", "angry\t0.5"],
            r"thresholds.tsv:2: label 'angry' is not one of",
        ),
        (
            {"thresholds_file": "thresholds.tsv"},
            "thresholds.tsv",
            ["pos\t0.4", "neg\t0.5"],
            r"thresholds.tsv: no threshold for the label\(s\) \['unsure'\]",
        ),
        (
            {"thresholds_file": "thresholds.tsv"},
            "thresholds.tsv",
            ["pos\t0.4", "neg\t1.5", "unsure\t0.5"],
            r"thresholds.tsv:2: threshold '1.5' is not a number in \(0, 1\)",
        ),
    ]


@pytest.mark.parametrize("case", range(5))
def test_bad_input_names_the_file_and_line_and_writes_nothing(tmp_path, case):
    root = tmp_path / "data"
    root.mkdir()
    _write_split_files(str(root))
    options, name, lines, message = _bad_input_cases(str(root))[case]
    (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "tiny", fixtures.VOCABULARY)
    output_dir = tmp_path / "run"
    with pytest.raises(InputFileError, match=message):
        finetuning.run_finetuning(
            helpers.quick_config(
                task="text_classification",
                mode="train_and_eval",
                data_dir=str(root),
                init_checkpoint=checkpoint,
                output_dir=str(output_dir),
                max_seq_length=SEQUENCE_LENGTH,
                num_train_steps=2,
                task_options={"label_column": "labels", "multi_label": True, **options},
            )
        )
    assert not output_dir.exists() or not any(output_dir.iterdir())


@pytest.mark.slow
def test_multi_label_run_end_to_end(tmp_path):
    import transformers

    from keras_bert_zoo import serving

    root = tmp_path / "data"
    root.mkdir()
    _write_split_files(str(root))
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "tiny", fixtures.VOCABULARY)
    run_dir = tmp_path / "run"
    config = helpers.quick_config(
        task="text_classification",
        mode="train_and_eval",
        data_dir=str(root),
        init_checkpoint=checkpoint,
        output_dir=str(run_dir),
        max_seq_length=SEQUENCE_LENGTH,
        train_batch_size=8,
        num_train_steps=60,
        task_options={"label_column": "labels", "multi_label": True, "tune_thresholds": True},
        checkpoint_layouts=("huggingface",),
    )
    result = finetuning.run_finetuning(config)
    task, model, preprocessor = result.task, result.model, result.preprocessor
    losses = result.training.losses
    # Bucketed batches (by length) make the last eight losses noisy: 0.71 of the first.
    assert losses[-8:].mean() < 0.75 * losses[:8].mean(), losses

    # Evaluation: the written metrics are scikit-learn's on the written predictions.
    dev = task.read("dev")
    records = [
        json.loads(line)
        for line in (run_dir / "predictions" / "predictions_dev.jsonl").read_text().splitlines()
    ]
    assert [r["gold_labels"] for r in records] == [list(e.label) for e in dev]
    assert all(set(r["probabilities"]) == set(task.label_names) for r in records)
    gold = multi_label.multi_hot([r["gold_labels"] for r in records], task.label_names)
    predicted = multi_label.multi_hot([r["labels"] for r in records], task.label_names)
    written = json.loads((run_dir / "eval_results.json").read_text())["results"]["dev"]
    for key, value in _sklearn_report(gold, predicted, task.label_names).items():
        assert written[key] == pytest.approx(value, abs=1e-9), key
    assert written["micro_f1"] > 0.6
    tuned = [float(t) for t in task.label_thresholds]

    # The tuned thresholds travel with the model: the directory alone gives them back
    # (a new task, read from its task.json).
    saved = json.loads((run_dir / "finetuned" / "task.json").read_text())
    assert saved["state"]["thresholds"] == tuned
    loaded = tasks.load_finetuned(str(run_dir / "finetuned"))
    assert loaded.task is not task
    assert json.loads(json.dumps([float(t) for t in loaded.task.label_thresholds])) == tuned

    # The best model is chosen by what it answers with (the tuned thresholds); the run's
    # own task.json holds its settings, not the thresholds it learned, so the same
    # command resumes; the summary names the primary metric first.
    assert task.primary_metric == "tuned_micro_f1"
    assert json.loads((run_dir / "eval_results.json").read_text())["primary_metric"] == (
        "tuned_micro_f1"
    )
    assert "thresholds" not in json.loads((run_dir / "task.json").read_text())["state"]
    assert finetuning.run_finetuning(config).step == 60
    # TensorBoard (its own event reader) shows each label's threshold at each evaluation.
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    events = EventAccumulator(str(run_dir / "eval"))
    events.Reload()
    for name, threshold in zip(task.label_names, tuned, strict=True):
        last = events.Tensors(f"threshold/{name}")[-1]
        assert last.step == 60
        assert float(tensor_util.make_ndarray(last.tensor_proto)) == pytest.approx(threshold)
    dev_line = next(line for line in finetuning.summary(result).splitlines() if "dev:" in line)
    assert dev_line.startswith("  dev: tuned_micro_f1 ") and "(primary)" in dev_line

    # Hugging Face: problem_type set, so transformers trains with binary cross-entropy.
    export = run_dir / "export_huggingface"
    config = json.loads((export / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    theirs = transformers.BertForSequenceClassification.from_pretrained(
        str(export), local_files_only=True
    )
    assert theirs.config.problem_type == "multi_label_classification"
    import torch

    ids = preprocessor(tf.constant([e.texts[0] for e in dev]))
    ours = np.asarray(model(ids, training=False), np.float64)
    with torch.no_grad():
        output = theirs(
            input_ids=torch.tensor(ids["input_word_ids"].numpy(), dtype=torch.long),
            attention_mask=torch.tensor(ids["input_mask"].numpy(), dtype=torch.long),
            token_type_ids=torch.tensor(ids["input_type_ids"].numpy(), dtype=torch.long),
            labels=torch.tensor(gold, dtype=torch.float32),
        )
    np.testing.assert_allclose(output.logits.numpy(), ours, atol=1e-4)
    bce = np.mean(np.logaddexp(0, ours) - gold * ours)  # binary cross-entropy of logits
    assert float(output.loss) == pytest.approx(bce, abs=1e-4)

    # The served model answers what postprocess answers, with the tuned thresholds.
    texts = [e.texts[0] for e in dev]
    answers = tasks.predict(task, model, dev, preprocessor)
    exported = serving.export(
        serving.ModelSource(task, model, result.tokenizer),
        str(tmp_path / "serving"),
        model_name="tags",
        verify=False,  # compared with postprocess below
    )
    served = tf.saved_model.load(exported.path).signatures["serving_default"](
        text=tf.constant(texts)
    )
    probabilities = np.array([[a.probabilities[n] for n in task.label_names] for a in answers])
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    np.testing.assert_array_equal(
        served["label_mask"].numpy(),
        multi_label.multi_hot([a.labels for a in answers], task.label_names),
    )
    served_labels = [
        tuple(label.decode() for label in row[:count])
        for row, count in zip(served["labels"].numpy(), served["label_count"].numpy(), strict=True)
    ]
    assert served_labels == [a.labels for a in answers]
