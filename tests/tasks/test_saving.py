"""tasks/saving.py: a fine-tuned model directory rebuilds its task, preprocessor and model."""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

from keras_bert_zoo import tasks
from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.text import BertTokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import sentence_fixtures as fixtures  # noqa: E402


def _write_labelled_tsv(path):
    rows = ["text\tlabel", "a good film\tpos", "a bad film\tneg", "good fun\tpos", "bad mess\tneg"]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("saving")
    data_dir = root / "data"
    data_dir.mkdir()
    _write_labelled_tsv(data_dir / "train.tsv")
    task = tasks.create_task("text_classification", data_dir=str(data_dir), max_seq_length=16)
    examples = task.read("train")
    tokenizer = BertTokenizer(fixtures.VOCABULARY, lowercase=True)
    encoder = BertEncoder(
        vocab_size=len(fixtures.VOCABULARY),
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    model = task.build_model(encoder)
    preprocessor = task.make_preprocessor(tokenizer)
    outputs, _ = tasks.predict_raw(task, model, examples, preprocessor)
    directory = root / "finetuned"
    tasks.save_finetuned(str(directory), task, model, tokenizer)
    return directory, examples, outputs, task


@pytest.mark.slow
def test_reload_gives_the_same_task_state_and_outputs(saved):
    directory, examples, outputs, task = saved
    assert sorted(os.listdir(directory)) == ["model.keras", "task.json", "vocab.txt"]
    finetuned = tasks.load_finetuned(str(directory))
    assert finetuned.task.task_name == "text_classification"
    assert (
        finetuned.task.state()
        == task.state()
        == {
            "regression": False,
            "label_names": ["neg", "pos"],
        }
    )
    assert finetuned.task.max_seq_length == 16
    assert finetuned.tokenizer.get_vocabulary() == fixtures.VOCABULARY
    reloaded, _ = tasks.predict_raw(
        finetuned.task, finetuned.model, examples, finetuned.preprocessor
    )
    np.testing.assert_allclose(reloaded, outputs, rtol=0, atol=1e-6)


def test_missing_or_broken_task_file_is_named(saved, tmp_path):
    with pytest.raises(FileNotFoundError, match="no task.json"):
        tasks.load_finetuned(str(tmp_path))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "task.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="task.json: not valid JSON"):
        tasks.load_finetuned(str(broken))
    incomplete = tmp_path / "incomplete"
    incomplete.mkdir()
    (incomplete / "task.json").write_text(json.dumps({"task_name": "glue/sst2"}))
    with pytest.raises(ValueError, match="missing field 'max_seq_length'"):
        tasks.load_finetuned(str(incomplete))


def test_a_state_from_another_label_set_is_refused(saved, tmp_path):
    directory, _, _, _ = saved
    description = tasks.read_task_description(str(directory))
    description["task_name"] = "glue/mnli"
    description["options"] = {}
    with pytest.raises(ValueError, match="does not match"):
        tasks.task_from_description(description)


# A fresh process that imports only what tools/export_saved_model.py imports: the
# registration of our optimizer and schedule (keras_bert_zoo.training) is never run,
# before each directory it loads (one process for every directory of this file).
_LOAD_IN_FRESH_PROCESS = """
import sys
import numpy as np
from keras_bert_zoo import tasks
for directory, out in zip(sys.argv[1::2], sys.argv[2::2]):
    assert "keras_bert_zoo.training.optimization" not in sys.modules
    finetuned = tasks.load_finetuned(directory)
    assert not finetuned.model.compiled
    weights = finetuned.model.get_weights()
    np.savez(out, *weights)
"""


def _load_in_fresh_process(directories, tmp_path):
    """The weights of each directory's model, loaded by one fresh process."""
    import subprocess

    outs = [tmp_path / f"weights_{index}.npz" for index in range(len(directories))]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(__file__).parents[2]), ""])
    arguments = [str(path) for pair in zip(directories, outs, strict=True) for path in pair]
    completed = subprocess.run(
        [sys.executable, "-c", _LOAD_IN_FRESH_PROCESS, *arguments],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    weights = []
    for out in outs:
        with np.load(out) as loaded:
            weights.append([loaded[f"arr_{i}"] for i in range(len(loaded.files))])
    return weights


def _compiled_with_our_optimizer(model, steps=2):
    """`model` compiled as the runner compiles it (our AdamW and schedule), with its
    optimizer's slots built, as after training."""
    from keras_bert_zoo.training import optimization

    model.compile(
        optimizer=optimization.create_optimizer(
            optimization.OptimizerConfig(learning_rate=1e-3, warmup_steps=1), steps
        ),
        loss="sparse_categorical_crossentropy",
    )
    model.optimizer.build(model.trainable_variables)
    assert len(model.optimizer.variables) > len(model.trainable_variables)
    return model


@pytest.fixture(scope="module")
def compiled_directories(saved, tmp_path_factory):
    """`{name: (directory, the compiled model saved there, the weights a fresh process
    loaded from it)}`: `"compiled"` saved by `save_finetuned`, `"old"` by plain
    `model.save` (what earlier releases wrote); one fresh process loads both."""
    import shutil

    directory, _, _, task = saved
    root = tmp_path_factory.mktemp("compiled")
    finetuned = tasks.load_finetuned(str(directory))
    compiled = _compiled_with_our_optimizer(finetuned.model)
    target = root / "compiled"
    tasks.save_finetuned(str(target), task, compiled, finetuned.tokenizer)
    old = root / "old"
    shutil.copytree(directory, old)
    old_model = _compiled_with_our_optimizer(tasks.load_finetuned(str(directory)).model)
    (old / "model.keras").unlink()
    old_model.save(old / "model.keras")
    loaded = _load_in_fresh_process([target, old], root)
    return {"compiled": (target, compiled, loaded[0]), "old": (old, old_model, loaded[1])}


@pytest.mark.slow
def test_a_compiled_model_saves_without_optimizer_and_loads_in_a_fresh_process(
    compiled_directories,
):
    """The defect: `model.keras` of a compiled model named our `AdamW`, and a process
    that had not imported keras_bert_zoo.training could not load it."""
    target, model, loaded = compiled_directories["compiled"]
    with __import__("zipfile").ZipFile(target / "model.keras") as archive:
        config = json.loads(archive.read("config.json"))
    assert not config.get("compile_config")
    expected = model.get_weights()
    assert len(loaded) == len(expected)
    for got, want in zip(loaded, expected, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_a_directory_saved_compiled_by_an_earlier_release_still_loads(compiled_directories):
    """`model.keras` written by plain `model.save` of a compiled model (what earlier
    releases wrote) loads in a fresh process too; its optimizer state is not read."""
    _, model, loaded = compiled_directories["old"]
    for got, want in zip(loaded, model.get_weights(), strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_longest_word_limit_travels_with_the_directory(saved, tmp_path):
    """The tokenizer is rebuilt with the word limit it was trained with: the original's
    200 characters now, 100 for a directory written before the limit was recorded."""
    import shutil

    directory, _, _, _ = saved
    description = json.loads((directory / "task.json").read_text(encoding="utf-8"))
    assert description["max_chars_per_token"] == 200
    assert tasks.load_finetuned(str(directory)).tokenizer.max_chars_per_token == 200
    old = tmp_path / "old"
    shutil.copytree(directory, old)
    del description["max_chars_per_token"]
    (old / "task.json").write_text(json.dumps(description), encoding="utf-8")
    assert tasks.load_finetuned(str(old)).tokenizer.max_chars_per_token == 100
