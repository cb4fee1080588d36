"""GLUE tasks end to end on fixture files in the official layout, through the
fine-tuning runner (`keras_bert_zoo.runners.finetuning`, what `tools/run_finetuning.py`
runs): `train_and_eval` fine-tunes a tiny encoder (the loss falls), evaluates (every
metric in `eval_results.json` equal to scikit-learn / scipy on the answers in the
prediction file) and saves the model; a separate `predict` run loads the saved
directory (Keras, Google or Hugging Face layout, in turn) and writes the GLUE
submission files, checked against the trained model run directly on the raw texts and
against the task's serving function.

The runs cover each kind of GLUE task once (`TRAINED`: one sentence with Matthews
correlation, a pair with F1, regression, three classes over two eval splits and three
submission files, named two-class labels); the other tasks run the same code on other
files, which every task's reader test (test_sentence_readers.py) and its evaluation and
submission files (`test_every_glue_task_evaluates_and_writes_its_submission_files`)
check without training.
"""

import json
import os
import pathlib
import sys

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.runners import finetuning
from keras_bert_zoo.tasks.sentence import GLUE_TASK_NAMES, SentenceAnswer
from keras_bert_zoo.text import BertTokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import finetuning_test_helpers as helpers  # noqa: E402
import sentence_fixtures as fixtures  # noqa: E402

SEQUENCE_LENGTH = 32

# The label orders of google-research/bert's processors and the GLUE server's names.
LABELS = {
    "glue/cola": ("0", "1"),
    "glue/sst2": ("0", "1"),
    "glue/mrpc": ("0", "1"),
    "glue/stsb": None,
    "glue/qqp": ("0", "1"),
    "glue/mnli": ("contradiction", "entailment", "neutral"),
    "glue/qnli": ("entailment", "not_entailment"),
    "glue/rte": ("entailment", "not_entailment"),
    "glue/wnli": ("0", "1"),
}
# The predict runs load the trained model from each saved layout in turn.
SAVED_LAYOUTS = ("finetuned", "export_google", "export_huggingface")
# The GLUE tasks trained end to end: one of each kind (see the module docstring).
TRAINED = ("glue/cola", "glue/mrpc", "glue/stsb", "glue/mnli", "glue/qnli")


def _with_warnings_ignored(function, *args, **kwargs):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def reference_metrics(name, gold, predicted):
    """The official GLUE metrics from scikit-learn and scipy."""
    if name == "glue/stsb":
        return {
            "pearson": _with_warnings_ignored(scipy.stats.pearsonr, gold, predicted).statistic,
            "spearman": _with_warnings_ignored(scipy.stats.spearmanr, gold, predicted).statistic,
        }
    if name == "glue/cola":
        return {
            "matthews_corrcoef": _with_warnings_ignored(
                sklearn.metrics.matthews_corrcoef, gold, predicted
            )
        }
    accuracy = sklearn.metrics.accuracy_score(gold, predicted)
    if name in ("glue/mrpc", "glue/qqp"):
        f1 = _with_warnings_ignored(sklearn.metrics.f1_score, gold, predicted, pos_label="1")
        return {"f1": f1, "accuracy": accuracy}
    return {"accuracy": accuracy}


@pytest.fixture(scope="module")
def glue_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue_data")
    return root, fixtures.write_glue(str(root))


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(fixtures.VOCABULARY, lowercase=True)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A random tiny BERT over the fixtures' vocabulary, as a google-research/bert
    release directory: what `--init_checkpoint` points at."""
    return helpers.write_tiny_checkpoint(
        tmp_path_factory.mktemp("tiny_bert"), fixtures.VOCABULARY, layout="google"
    )


def _task(name, root):
    return tasks.create_task(
        name,
        data_dir=str(root / fixtures.TASK_DIRECTORIES[name]),
        max_seq_length=SEQUENCE_LENGTH,
    )


def _direct_outputs(model, preprocessor, examples):
    """The model on the raw texts of `examples` in one batch: no tf.data, no postprocess."""
    count = len(examples[0].texts)
    segments = tuple(tf.constant([e.texts[i] for e in examples]) for i in range(count))
    inputs = preprocessor(segments if count > 1 else segments[0])
    return np.asarray(model(inputs, training=False), np.float64)


def _read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
@pytest.mark.parametrize("name", TRAINED)
def test_glue_task_fine_tunes_evaluates_and_writes_submission_files(
    name, glue_root, tiny_checkpoint, tmp_path
):
    root, expected = glue_root
    data_dir = str(root / fixtures.TASK_DIRECTORIES[name])
    run_dir = tmp_path / "run"
    # === train_and_eval ===
    result = finetuning.run_finetuning(
        helpers.quick_config(
            task=name,
            mode="train_and_eval",
            data_dir=data_dir,
            init_checkpoint=tiny_checkpoint,
            output_dir=str(run_dir),
            max_seq_length=SEQUENCE_LENGTH,
            train_batch_size=4,
            num_train_steps=64,
            learning_rate=2e-3,
            checkpoint_layouts=("google", "huggingface"),
        )
    )
    task, model, preprocessor = result.task, result.model, result.preprocessor
    assert task.max_seq_length == SEQUENCE_LENGTH
    losses = result.training.losses
    assert len(losses) == 64 and losses[-8:].mean() < 0.7 * losses[:8].mean(), losses

    eval_results = json.loads((run_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert eval_results["step"] == 64 and eval_results["task"] == name
    assert list(eval_results["results"]) == list(task.split_names()["eval"])
    for split in task.split_names()["eval"]:
        examples = task.read(split)
        records = _read_jsonl(run_dir / "predictions" / f"predictions_{split}.jsonl")
        gold = [e.label for e in examples]
        assert [r["gold_label"] for r in records] == gold
        predicted = [r["score"] if LABELS[name] is None else r["label"] for r in records]
        direct = _direct_outputs(model, preprocessor, examples)
        if LABELS[name] is None:
            np.testing.assert_allclose(predicted, direct[:, 0], atol=2e-6, rtol=1e-5)
        else:
            assert predicted == [LABELS[name][i] for i in direct.argmax(axis=-1)]
        reference = reference_metrics(name, gold, predicted)
        written = eval_results["results"][split]
        assert set(written) == set(reference)
        for key, value in reference.items():
            if np.isnan(value):
                assert written[key] is None  # NaN is null in JSON
            else:
                assert written[key] == pytest.approx(value, abs=1e-9), key
    # The saved model directories, each with the task's state.
    for layout in SAVED_LAYOUTS:
        saved = json.loads((run_dir / layout / "task.json").read_text(encoding="utf-8"))
        assert saved["task_name"] == name and saved["state"] == task.state()

    # === predict, in a new run that loads the saved model ===
    layout = SAVED_LAYOUTS[TRAINED.index(name) % len(SAVED_LAYOUTS)]
    output_dir = tmp_path / "predict"
    predicted_run = finetuning.run_finetuning(
        helpers.quick_config(
            mode="predict",
            data_dir=data_dir,
            init_checkpoint=str(run_dir / layout),
            output_dir=str(output_dir),
        )
    )
    assert predicted_run.task.task_name == name
    assert predicted_run.task.max_seq_length == SEQUENCE_LENGTH
    for split, submission_name in fixtures.SUBMISSION_FILES[name].items():
        assert split in task.split_names()["predict"]
        examples = task.read(split)
        paths = predicted_run.prediction_files[split]
        assert os.path.basename(paths[-1]) == submission_name
        lines = (output_dir / "predictions" / submission_name).read_text(encoding="utf-8")
        lines = lines.split("\n")
        assert lines[0] == "index\tprediction" and lines[-1] == ""
        rows = [line.split("\t") for line in lines[1:-1]]
        assert [index for index, _ in rows] == [i for _, _, i in expected[name].rows[split]]
        # The trained model (in memory) on the raw texts answers what the reloaded one wrote.
        direct = _direct_outputs(model, preprocessor, examples)
        # The exported signature's function answers the same, in TF ops.
        served = task.serving_outputs(model, preprocessor)(
            **{
                field: tf.constant([e.texts[i] for e in examples])
                for i, field in enumerate(task.text_fields)
            }
        )
        records = _read_jsonl(paths[0])
        if LABELS[name] is None:
            np.testing.assert_allclose(
                [float(p) for _, p in rows], direct[:, 0], atol=2e-6, rtol=1e-5
            )
            np.testing.assert_allclose(served["score"], direct[:, 0], atol=1e-5)
        else:
            assert [p for _, p in rows] == [LABELS[name][i] for i in direct.argmax(axis=-1)]
            assert [s.decode() for s in served["label"].numpy()] == [p for _, p in rows]
            np.testing.assert_allclose(
                served["probabilities"],
                [[r["probabilities"][label] for label in LABELS[name]] for r in records],
                atol=1e-5,
            )
        assert [r["index"] for r in records] == [index for index, _ in rows]
        # The texts under the task's field names, as in its files (sentence1, ...).
        assert [tuple(r[f] for f in task.text_fields) for r in records] == [
            e.texts for e in examples
        ]
        for record in records:
            if LABELS[name] is None:
                assert isinstance(record["score"], float)
            else:
                probabilities = record["probabilities"]
                assert list(probabilities) == list(LABELS[name])
                assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-6)
                assert record["label"] == max(probabilities, key=probabilities.get)
    # Only finished files: no temporary names left behind.
    for directory in (run_dir, run_dir / "predictions", output_dir / "predictions"):
        assert not [f for f in os.listdir(directory) if f.startswith(".")], directory


def _answers(name, task, examples, rng):
    """Answers of the task's kind for `examples`: random labels with their
    probabilities, or random scores."""
    if LABELS[name] is None:
        return [SentenceAnswer(score=float(rng.uniform(0, 5))) for _ in examples]
    answers = []
    for _ in examples:
        probabilities = rng.dirichlet(np.ones(len(task.label_names)))
        label = task.label_names[int(probabilities.argmax())]
        answers.append(
            SentenceAnswer(
                label=label,
                probabilities={
                    n: float(p) for n, p in zip(task.label_names, probabilities, strict=True)
                },
            )
        )
    return answers


@pytest.mark.parametrize("name", GLUE_TASK_NAMES)
def test_every_glue_task_evaluates_and_writes_its_submission_files(name, glue_root, tmp_path):
    """Each task's metrics (scikit-learn / scipy on the same answers), its label order
    and its submission files (names, `index\tprediction`, the test files' indices), on
    answers made up here: what a run of every task writes, without the training that
    the end-to-end test above does for one task of each kind."""
    root, expected = glue_root
    task = _task(name, root)
    assert tuple(task.label_names or ()) == (LABELS[name] or ())
    rng = np.random.default_rng(GLUE_TASK_NAMES.index(name))
    for split in task.split_names()["eval"]:
        examples = task.read(split)
        answers = _answers(name, task, examples, rng)
        gold = [e.label for e in examples]
        predicted = [a.score if LABELS[name] is None else a.label for a in answers]
        results = task.evaluate(answers, examples)
        reference = reference_metrics(name, gold, predicted)
        assert set(results) == set(reference)
        for key, value in reference.items():
            assert results[key] == pytest.approx(value, abs=1e-9, nan_ok=True), key
    for split, submission_name in fixtures.SUBMISSION_FILES[name].items():
        assert split in task.split_names()["predict"]
        examples = task.read(split)
        answers = _answers(name, task, examples, rng)
        paths = task.write_predictions(answers, examples, str(tmp_path), split)
        assert os.path.basename(paths[-1]) == submission_name
        lines = (tmp_path / submission_name).read_text(encoding="utf-8").split("\n")
        assert lines[0] == "index\tprediction" and lines[-1] == ""
        rows = [line.split("\t") for line in lines[1:-1]]
        assert [index for index, _ in rows] == [i for _, _, i in expected[name].rows[split]]
        if LABELS[name] is None:
            np.testing.assert_allclose(
                [float(p) for _, p in rows], [a.score for a in answers], atol=2e-6, rtol=1e-5
            )
        else:
            assert [p for _, p in rows] == [a.label for a in answers]
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]


@pytest.mark.slow
def test_features_are_the_preprocessor_outputs_in_example_order(glue_root, tokenizer):
    root, _ = glue_root
    task = _task("glue/mrpc", root)
    preprocessor = task.make_preprocessor(tokenizer)
    examples = task.read("dev")
    features = list(task.features(examples, preprocessor, training=False))
    assert [int(f["example_index"]) for f in features] == list(range(len(examples)))
    # The layer called once on the whole split, outside tf.data.
    expected = preprocessor(
        (tf.constant([e.texts[0] for e in examples]), tf.constant([e.texts[1] for e in examples]))
    )
    for position, (feature, example) in enumerate(zip(features, examples, strict=True)):
        for key in ("input_word_ids", "input_mask", "input_type_ids"):
            np.testing.assert_array_equal(feature[key], expected[key][position])
        assert int(feature["label"]) == ("0", "1").index(example.label)
    # Test sets carry no label; a mix of labelled and unlabelled examples is an error.
    unlabelled = list(task.features(task.read("test"), preprocessor, training=False))
    assert "label" not in unlabelled[0]
    with pytest.raises(ValueError, match="without a label among labelled"):
        task.features(examples + task.read("test"), preprocessor, training=False)


def test_submission_file_is_never_left_half_written(tmp_path):
    task = tasks.create_task("glue/rte", data_dir=str(tmp_path))
    examples = task.examples_from_texts([("A.", "B."), ("C.", "D.")], split="test")
    good = SentenceAnswer(label="entailment", probabilities={"entailment": 1.0})
    (tmp_path / "RTE.tsv").write_text("old\n", encoding="utf-8")
    with pytest.raises(AttributeError):
        task.write_predictions([good, object()], examples, str(tmp_path), "test")
    assert (tmp_path / "RTE.tsv").read_text(encoding="utf-8") == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["RTE.tsv"]
    task.write_predictions([good, good], examples, str(tmp_path), "test")
    assert (tmp_path / "RTE.tsv").read_text(encoding="utf-8") == (
        "index\tprediction\n0\tentailment\n1\tentailment\n"
    )
    # The test split's records are named after it, as the eval splits' are.
    assert sorted(os.listdir(tmp_path)) == ["RTE.tsv", "predictions_test.jsonl"]
    records = _read_jsonl(tmp_path / "predictions_test.jsonl")
    assert [(r["sentence1"], r["sentence2"]) for r in records] == [("A.", "B."), ("C.", "D.")]
    assert "text" not in records[0]


def test_text_classification_records_name_the_texts_by_their_columns(tmp_path):
    (tmp_path / "train.csv").write_text(
        "review,summary,stars\nGreat.,Good,5\nAwful.,Bad,1\n", encoding="utf-8"
    )
    (tmp_path / "test.csv").write_text("review,summary\nFine.,Ok\n", encoding="utf-8")
    answer = SentenceAnswer(label="5", probabilities={"1": 0.25, "5": 0.75})

    def records(split, **options):
        task = tasks.create_task("text_classification", data_dir=str(tmp_path), **options)
        paths = task.write_predictions([answer], task.read(split)[:1], str(tmp_path), split)
        assert os.path.basename(paths[0]) == f"predictions_{split}.jsonl"
        return _read_jsonl(paths[0])

    (single,) = records("test", text_column="review", label_column="stars")
    assert single["review"] == "Fine." and "text" not in single
    (pair,) = records(
        "train", text_column="review", text_pair_column="summary", label_column="stars"
    )
    assert (pair["review"], pair["summary"], pair["gold_label"]) == ("Great.", "Good", "5")
    # Columns given by number have no name of the user's: the served names.
    (numbered,) = records("test", text_column="0", text_pair_column="1", label_column="2")
    assert (numbered["text"], numbered["text_pair"]) == ("Fine.", "Ok")
    # A text column named like a field of the record keeps both.
    (tmp_path / "train.csv").write_text("label,stars\nGreat.,5\nAwful.,1\n", encoding="utf-8")
    (clash,) = records("train", text_column="label", label_column="stars")
    assert (clash["text:label"], clash["label"]) == ("Great.", "5")


def test_task_state_round_trips_and_rejects_another_label_set(glue_root):
    root, _ = glue_root
    mnli = _task("glue/mnli", root)
    assert mnli.state() == {"regression": False, "label_names": list(LABELS["glue/mnli"])}
    mnli.load_state(json.loads(json.dumps(mnli.state())))
    with pytest.raises(ValueError, match="does not match"):
        mnli.load_state(_task("glue/rte", root).state())


def test_text_classification_answers_on_the_pang_lee_heldout_split(tmp_path):
    """Evaluation and prediction files of `text_classification` (no submission TSV)."""
    import importlib.util

    data_dir = os.path.join(
        list(importlib.util.find_spec("gensim").submodule_search_locations)[0],
        "test",
        "test_data",
    )
    task = tasks.create_task(
        "text_classification",
        data_dir=data_dir,
        train_file="pang_lee_polarity.cor",
        encoding="latin-1",
        heldout_fraction=0.25,
    )
    examples = task.read("dev")
    rng = np.random.default_rng(0)
    answers = []
    for p in rng.uniform(size=len(examples)):
        label = "pos" if p > 0.5 else "neg"
        answers.append(SentenceAnswer(label=label, probabilities={"neg": 1 - p, "pos": p}))
    gold = [e.label for e in examples]
    predicted = [a.label for a in answers]
    assert task.evaluate(answers, examples) == {
        "accuracy": pytest.approx(sklearn.metrics.accuracy_score(gold, predicted), abs=1e-12)
    }
    paths = task.write_predictions(answers, examples, str(tmp_path), "dev")
    assert [os.path.basename(p) for p in paths] == ["predictions_dev.jsonl"]
    records = [json.loads(line) for line in open(paths[0], encoding="utf-8")]
    assert [r["text"] for r in records] == [e.texts[0] for e in examples]  # fastText: no names
    assert [r["label"] for r in records] == predicted
    assert [r["gold_label"] for r in records] == gold
    # Raw sentences to answer (the main job's last step) become unlabelled examples.
    raw = task.examples_from_texts(["a gripping , heartfelt film .", "dull and lifeless ."])
    assert [(e.texts, e.label) for e in raw] == [
        (("a gripping , heartfelt film .",), None),
        (("dull and lifeless .",), None),
    ]
