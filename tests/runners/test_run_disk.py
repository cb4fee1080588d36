"""What a run leaves on disk: the exports a user asks for, one copy of a model that is
both the best and the final one, and a main job that leaves only what it prints."""

import json
import os
import pathlib
import re
import shutil
import sys

import numpy as np
import pytest

from keras_bert_zoo import tasks
from keras_bert_zoo.runners import demo, finetuning, run_outputs
from keras_bert_zoo.runners.configs import FinetuningConfig, PretrainingConfig
from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
from keras_bert_zoo.tasks.saving import save_finetuned
from keras_bert_zoo.text.vocab import load_vocab

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))  # the fine-tuning fixtures
import finetuning_test_helpers as helpers  # noqa: E402

SAVED_FILES = ("model.keras", "vocab.txt", "task.json")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random BERT over the real MiniLM vocabulary: the main job's path, fast."""
    vocabulary = load_vocab(os.path.join(demo_model_dir(), "vocab.txt"))
    return helpers.write_tiny_checkpoint(
        tmp_path_factory.mktemp("tiny_minilm_vocab"), vocabulary, layout="huggingface"
    )


def _config(checkpoint, output_dir, **overrides):
    settings = dict(
        init_checkpoint=checkpoint,
        output_dir=None if output_dir is None else str(output_dir),
        num_train_steps=6,
        learning_rate=1e-3,
        steps_per_loop=3,
        export_best=True,
        progress="none",
    )
    settings.update(overrides)
    return demo.demo_config(**settings)


def _same_file(directory, other, name):
    return os.path.samefile(os.path.join(directory, name), os.path.join(other, name))


def _step(directory):
    return json.loads((directory / "metrics.json").read_text(encoding="utf-8"))["step"]


def _weights(directory):
    return tasks.load_finetuned(str(directory)).model.get_weights()


def test_checkpoint_layouts_default_to_none_for_fine_tuning_and_both_for_pretraining():
    assert FinetuningConfig().checkpoint_layouts == ()
    assert PretrainingConfig().checkpoint_layouts == ("google", "huggingface")


@pytest.fixture(scope="module")
def stored_run(checkpoint, tmp_path_factory):
    """`(run directory, result)` of 6 steps with one evaluation, at the end: best/ and
    finetuned/ are the same model. The tests that write to a run work on a copy."""
    run_dir = tmp_path_factory.mktemp("stored") / "run"
    return run_dir, finetuning.run_finetuning(_config(checkpoint, run_dir, eval_every=0))


def _linked_copy(run_dir, copy_dir):
    """`run_dir` again at `copy_dir`, every file a hard link to the run's: the same files,
    linked as the run linked them (whose writes replace files, never rewrite them)."""
    shutil.copytree(run_dir, copy_dir, copy_function=os.link)
    return copy_dir


@pytest.mark.slow
def test_a_run_writes_no_checkpoint_layout_unless_asked(stored_run):
    run_dir, result = stored_run
    assert set(result.exports) == {"keras"}
    assert not (run_dir / "export_google").exists()
    assert not (run_dir / "export_huggingface").exists()


@pytest.mark.slow
def test_final_model_that_is_the_best_is_stored_once(stored_run, tmp_path):
    # One evaluation, at the end: best/ and finetuned/ are the same model.
    run_dir, result = stored_run
    best, final = run_dir / "best", run_dir / "finetuned"
    assert _step(best) == _step(final) == result.step == 6
    for name in SAVED_FILES:
        assert _same_file(best, final, name), name
    assert os.stat(final / "model.keras").st_nlink == 2
    # Each keeps its own metrics.json (the best export's ranking, the run's evaluation).
    assert not _same_file(best, final, "metrics.json")
    for before, after in zip(_weights(best), _weights(final), strict=True):
        np.testing.assert_array_equal(before, after)
    for before, after in zip(result.model.get_weights(), _weights(final), strict=True):
        np.testing.assert_array_equal(before, after)
    # A later write to finetuned/ replaces its files and leaves best/'s as they were.
    run_dir = _linked_copy(run_dir, tmp_path / "run")
    best, final = run_dir / "best", run_dir / "finetuned"
    best_bytes = (best / "model.keras").read_bytes()
    run_outputs.save_run_model(
        str(run_dir),
        result.task,
        result.model,
        result.tokenizer,
        step=7,
        eval_results=None,
        checkpoint_layouts=(),
        same_model_dir=str(best),
    )
    assert not _same_file(best, final, "model.keras")
    assert (best / "model.keras").read_bytes() == best_bytes


@pytest.mark.slow
def test_finetuned_links_best_only_when_it_is_the_same_model(checkpoint, tmp_path):
    # Evaluations at steps 3 and 6: the final model is the best one or not.
    run_dir = tmp_path / "run"
    result = finetuning.run_finetuning(_config(checkpoint, run_dir, eval_every=3))
    best, final = run_dir / "best", run_dir / "finetuned"
    assert _step(final) == 6 and _step(best) in (3, 6)
    assert _same_file(best, final, "model.keras") == (_step(best) == 6)
    for directory in (best, final):
        assert tasks.load_finetuned(str(directory)).task.task_name == "text_classification"

    # --use_best_model: finetuned/ is best/'s model, whichever step it was.
    chosen = finetuning.run_finetuning(
        _config(checkpoint, run_dir, eval_every=3, use_best_model=True)
    )
    assert chosen.step == _step(best) == _step(final)
    for name in SAVED_FILES:
        assert _same_file(best, final, name), name
    assert result.task.task_name == tasks.load_finetuned(str(final)).task.task_name


def test_a_stale_best_of_the_same_step_with_other_weights_is_not_linked(stored_run, tmp_path):
    # best/ from an earlier run that reached the same step with other weights: the step
    # alone does not make it this model.
    source_dir, result = stored_run
    run_dir = tmp_path / "run"
    shutil.copytree(source_dir, run_dir)  # copies: nothing linked
    best = run_dir / "best"
    other = tasks.load_finetuned(str(run_dir / "finetuned")).model
    other.set_weights([w + 1.0 for w in result.model.get_weights()])
    save_finetuned(str(best), result.task, other, result.tokenizer)
    # Another step: not this model, whatever the files hold.
    (best / "metrics.json").write_text(json.dumps({"step": 3}), encoding="utf-8")
    assert run_outputs.link_identical_model_files(str(best), str(run_dir / "finetuned"), 6) == []
    (best / "metrics.json").write_text(json.dumps({"step": result.step}), encoding="utf-8")
    linked = run_outputs.link_identical_model_files(str(best), str(run_dir / "finetuned"), 6)
    assert linked == ["vocab.txt", "task.json"]
    assert not _same_file(best, run_dir / "finetuned", "model.keras")
    for before, after in zip(
        result.model.get_weights(), _weights(run_dir / "finetuned"), strict=True
    ):
        np.testing.assert_array_equal(before, after)


def test_no_link_possible_keeps_the_copy(stored_run, tmp_path, monkeypatch):
    run_dir, result = stored_run
    copy_dir = tmp_path / "copy"
    shutil.copytree(run_dir / "finetuned", copy_dir)

    def no_links(*args, **kwargs):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    assert (
        run_outputs.link_identical_model_files(str(run_dir / "best"), str(copy_dir), result.step)
        == []
    )
    assert not _same_file(run_dir / "best", copy_dir, "model.keras")
    assert tasks.load_finetuned(str(copy_dir)).task.task_name == "text_classification"
    assert not [p for p in copy_dir.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_main_job_in_a_temporary_directory_leaves_what_it_prints(checkpoint, tmp_path, monkeypatch):
    import io

    output_dir = tmp_path / "main_job"
    mkdtemp = demo.tempfile.mkdtemp

    def main_job_directory(*args, **kwargs):
        if kwargs.get("prefix", "").startswith("keras_bert_zoo_finetuning_demo_"):
            output_dir.mkdir()
            return str(output_dir)
        return mkdtemp(*args, **kwargs)

    monkeypatch.setattr(demo.tempfile, "mkdtemp", main_job_directory)
    printed = io.StringIO()
    # export_best: a best/ is one more thing the main job must not leave.
    main_job = demo.run_demo(
        _config(checkpoint, None, num_train_steps=3, eval_every=0, export_best=True), out=printed
    )
    assert main_job.output_dir == str(output_dir)
    assert sorted(os.listdir(output_dir)) == ["finetuned", "serving"]
    # The README's first paragraph says what the main job leaves: these, and nothing else.
    readme = (HERE.parents[1] / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("The first command runs the main job", 1)[1].split("\n\n", 1)[0]
    left = paragraph.split("It leaves", 1)[1].split(". The second runs", 1)[0]
    assert sorted(re.findall(r"`(\w+)/`", left)) == ["finetuned", "serving"], left
    assert "--checkpoint_layouts" in left  # the other layouts, only when asked for
    assert f"fine-tuned model: {output_dir / 'finetuned'}" in printed.getvalue()
    assert f"exported for TF Serving: {main_job.exported.path}" in printed.getvalue()
    assert tasks.load_finetuned(str(output_dir / "finetuned")).task.task_name == (
        "text_classification"
    )
