"""An eval-only run's directory is protected as a training run's is (issue 61, point 3):
`--mode=eval --init_checkpoint=X --output_dir=D` records what it evaluated in
`D/run_settings.json`, so that a later run of another task, or of another model, into D
is refused in one line, nothing written, instead of adding its results beside the
first run's under its own task name."""

import json
import pathlib
import sys

import pytest

from keras_bert_zoo.runners import finetuning
from keras_bert_zoo.utils.errors import UserError

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))
import finetuning_test_helpers as helpers  # noqa: E402

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "good", "bad"]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """A tiny checkpoint evaluated (no training) on sentence data into `eval_dir`."""
    root = tmp_path_factory.mktemp("eval_only")
    data = root / "data"
    data.mkdir()
    rows = ["text\tlabel"] + [f"the film was {w}\t{w}" for w in ("good", "bad") * 4]
    for name in ("train.tsv", "dev.tsv"):
        (data / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    # Another task's data: MRPC's layout.
    (data / "mrpc").mkdir()
    mrpc = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    mrpc += [f"{i % 2}\t{i}\t{i + 100}\tthe film was good\tthe film was bad" for i in range(8)]
    for name in ("train.tsv", "dev.tsv"):
        (data / "mrpc" / name).write_text("\n".join(mrpc) + "\n", encoding="utf-8")
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", VOCABULARY)

    def config(**overrides):
        settings = dict(
            task="text_classification",
            mode="eval",
            data_dir=str(data),
            init_checkpoint=str(root / "trained" / "finetuned"),
            output_dir=str(root / "eval_dir"),
            max_seq_length=16,
            train_batch_size=4,
            num_train_steps=2,
            task_options={"train_file": "train.tsv", "eval_file": "dev.tsv"},
        )
        settings.update(overrides)
        return helpers.quick_config(**settings)

    # A model fine-tuned elsewhere, then evaluated alone into eval_dir.
    finetuning.run_finetuning(
        config(mode="train", init_checkpoint=checkpoint, output_dir=str(root / "trained"))
    )
    finetuning.run_finetuning(config())
    return root, config, checkpoint


def _listing(directory: pathlib.Path) -> dict[str, int]:
    return {
        str(path.relative_to(directory)): path.stat().st_mtime_ns
        for path in sorted(directory.rglob("*"))
    }


@pytest.mark.slow
def test_the_eval_run_records_what_it_evaluated(evaluated):
    root, _, _ = evaluated
    recorded = json.loads((root / "eval_dir" / "run_settings.json").read_text())["settings"]
    assert recorded["mode"] == "eval" and recorded["task"] == "text_classification"
    assert recorded["init_checkpoint"] == str((root / "trained" / "finetuned").resolve())
    assert recorded["train_file"] == "train.tsv"


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides, named",
    [
        (
            dict(task="glue/mrpc", mode="train", data_dir="MRPC", task_options={}),
            "task text_classification -> glue/mrpc",
        ),
        (dict(mode="train", init_checkpoint="OTHER"), "init_checkpoint "),
        (
            dict(mode="eval", task_options={"train_file": "dev.tsv"}),
            "train_file train.tsv -> dev.tsv",
        ),
    ],
    ids=["another_task", "another_model", "another_setting"],
)
def test_another_run_into_it_is_refused_in_one_line_and_writes_nothing(evaluated, overrides, named):
    root, config, pretrained = evaluated
    if overrides.get("init_checkpoint") == "OTHER":
        overrides = {**overrides, "init_checkpoint": pretrained}
    if overrides.get("data_dir") == "MRPC":
        overrides = {**overrides, "data_dir": str(root / "data" / "mrpc")}
    before = _listing(root / "eval_dir")
    with pytest.raises(UserError) as raised:
        finetuning.run_finetuning(config(**overrides))
    message = str(raised.value)
    assert "\n" not in message and named in message, message
    assert "this output directory holds a run with other settings" in message
    assert "--overwrite_output_dir" in message
    assert _listing(root / "eval_dir") == before


def test_the_same_evaluation_again_is_welcome(evaluated):
    root, config, _ = evaluated
    finetuning.run_finetuning(config())
    history = json.loads((root / "eval_dir" / "eval_results.json").read_text())
    assert history["task"] == "text_classification"
