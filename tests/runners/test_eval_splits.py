"""Evaluation names its split (issue 47, point 2).

`--mode=eval --eval_file=test.tsv` on a finished run reported "dev", overwrote
`predictions_dev.jsonl` and `eval_results.json`'s dev entry, and wrote a second dev
confusion matrix to TensorBoard. Now the split is named (`--eval_split`, by default the
file's stem), each split's results and predictions are kept apart, and `--mode=predict`
on a labelled file prints and writes its metrics. One tiny run is trained once; each
test evaluates or predicts with it.
"""

import dataclasses
import json
import pathlib
import sys

import pytest

from keras_bert_zoo import tasks
from keras_bert_zoo.runners import finetuning

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))
import finetuning_test_helpers as helpers  # noqa: E402

WORDS = {"1": ["good", "great", "fun"], "0": ["bad", "awful", "dull"]}
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "very", "."]
VOCABULARY += sorted(WORDS["1"] + WORDS["0"])


def _write(path, count, offset, labelled=True):
    rows = ["text\tlabel" if labelled else "text"]
    for index in range(offset, offset + count):
        label = str(index % 2)
        text = f"the film was very {WORDS[label][index % 3]} ."
        rows.append(f"{text}\t{label}" if labelled else text)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished `train_and_eval` run on train.tsv, evaluated on dev.tsv."""
    root = tmp_path_factory.mktemp("eval_splits")
    data = root / "data"
    data.mkdir()
    _write(data / "train.tsv", 24, 0)
    _write(data / "dev.tsv", 8, 100)
    _write(data / "test.tsv", 10, 200)
    _write(data / "unlabelled.tsv", 4, 300, labelled=False)
    config = helpers.quick_config(
        task="text_classification",
        mode="train_and_eval",
        data_dir=str(data),
        init_checkpoint=helpers.write_tiny_checkpoint(root / "bert", VOCABULARY),
        output_dir=str(root / "run"),
        max_seq_length=16,
        train_batch_size=8,
        num_train_steps=6,
        task_options={"train_file": "train.tsv", "eval_file": "dev.tsv"},
    )
    result = finetuning.run_finetuning(config)
    assert list(result.eval_results) == ["dev"]
    return config, result


def _inference(config, mode, **options):
    return dataclasses.replace(
        config, mode=mode, task=None, init_checkpoint=None, task_options=options
    )


def _eval_results(config):
    return json.loads((pathlib.Path(config.output_dir) / "eval_results.json").read_text("utf-8"))


def _confusion_events(config):
    """`{(TensorBoard run, tag): number of events}` of the confusion matrices written in
    the run directory, as TensorBoard's own reader finds them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root = pathlib.Path(config.output_dir)
    counts = {}
    for directory in sorted({path.parent for path in root.rglob("events.out.tfevents.*")}):
        events = EventAccumulator(str(directory), size_guidance={"tensors": 0})
        events.Reload()
        for tag in events.Tags()["tensors"]:
            if "confusion" in tag:
                counts[(str(directory.relative_to(root)), tag)] = len(events.Tensors(tag))
    return counts


@pytest.mark.slow
def test_an_eval_file_is_named_by_its_stem_and_kept_apart_from_dev(run):
    config, trained = run
    predictions = pathlib.Path(config.output_dir) / "predictions"
    dev_predictions = (predictions / "predictions_dev.jsonl").read_bytes()
    dev_results = _eval_results(config)["results"]["dev"]
    confusion_before = _confusion_events(config)

    result = finetuning.run_finetuning(_inference(config, "eval", eval_file="test.tsv"))

    assert list(result.eval_results) == ["test"]
    summary = finetuning.summary(result)
    assert "  test: accuracy" in summary and "dev:" not in summary
    written = _eval_results(config)
    assert written["results"]["dev"] == dev_results
    assert written["results"]["test"] == result.eval_results["test"]
    assert written["splits"]["test"]["step"] == trained.step
    assert written["history"][-1]["results"] == {"test": result.eval_results["test"]}
    assert (predictions / "predictions_dev.jsonl").read_bytes() == dev_predictions
    rows = [json.loads(line) for line in (predictions / "predictions_test.jsonl").open()]
    assert len(rows) == 10
    # TensorBoard: the dev matrix is not written again; the test one is under its name.
    confusion_after = _confusion_events(config)
    assert confusion_before and all(confusion_after[k] == n for k, n in confusion_before.items())
    (new,) = set(confusion_after) - set(confusion_before)
    assert "test" in "/".join(new), confusion_after


@pytest.mark.slow
def test_eval_split_names_the_evaluation(run):
    config, _ = run
    evaluated = _inference(config, "eval", eval_file="test.tsv")
    result = finetuning.run_finetuning(dataclasses.replace(evaluated, eval_split="final_test"))
    assert list(result.eval_results) == ["final_test"]
    assert "final_test" in _eval_results(config)["results"]
    assert (pathlib.Path(config.output_dir) / "predictions/predictions_final_test.jsonl").is_file()


@pytest.mark.slow
def test_predict_on_a_labelled_file_prints_and_writes_its_metrics(run):
    config, _ = run
    result = finetuning.run_finetuning(_inference(config, "predict", predict_file="test.tsv"))
    assert set(result.eval_results) == {"test"}
    assert 0.0 <= result.eval_results["test"]["accuracy"] <= 1.0
    assert "  test: accuracy" in finetuning.summary(result)
    assert _eval_results(config)["results"]["test"] == result.eval_results["test"]
    unlabelled = finetuning.run_finetuning(
        _inference(config, "predict", predict_file="unlabelled.tsv")
    )
    assert unlabelled.eval_results == {} and unlabelled.prediction_files["test"]


def test_a_split_name_is_checked(tmp_path):
    from keras_bert_zoo.runners import run_outputs
    from keras_bert_zoo.utils.errors import UserError

    task = tasks.create_task("text_classification", eval_file="my test.csv")
    assert run_outputs.eval_split_names(task) == {"my_test": "dev"}
    assert run_outputs.eval_split_names(task, "heldout") == {"heldout": "dev"}
    with pytest.raises(UserError, match="a split name is letters"):
        run_outputs.eval_split_names(task, "../x")
    mnli = tasks.create_task("glue/mnli")
    assert run_outputs.eval_split_names(mnli) == {
        "dev_matched": "dev_matched",
        "dev_mismatched": "dev_mismatched",
    }
    with pytest.raises(UserError, match="evaluates 2 splits"):
        run_outputs.eval_split_names(mnli, "test")
