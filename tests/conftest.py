"""Fixtures for every test directory."""

import contextlib
import importlib.util
import pathlib
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
TOOLS = TESTS.parent / "tools"

# The longest test files, longest first, with their worker seconds in a full run with
# two workers on a 2-core machine. pyproject's addopts give whole files to the two xdist
# workers (`--dist loadfile`) in collection order (`--no-loadscope-reorder`: xdist's
# default order, most tests first, starts the long files with few tests last, and one of
# them then runs alone at the end while the other worker idles). Starting the longest
# files first lets the many short ones fill in around them. A file missing here runs
# after these, in pytest's order; the order changes no result, only the wall time.
LONGEST_FILES = (
    "text/test_tokenizer_parity.py",  # 280 s
    "test_readme_commands_finetuning.py",  # ~250 s (with "Distillation")
    "test_readme_commands_pretraining.py",  # 215 s
    "test_readme_commands.py",  # 195 s
    "serving/test_export.py",  # 180 s
    "runners/test_distillation_job.py",  # ~110 s
    "serving/test_answers.py",  # 120 s
    "tools/test_run_finetuning_interrupt.py",  # ~115 s
    "tools/test_installed_wheel.py",  # ~95 s
    "training/test_trainer.py",  # ~100 s
    "training/test_distribute.py",  # 95 s
    "serving/test_native.py",  # 85 s
    "tools/test_run_distillation.py",  # ~80 s
    "serving/test_litert.py",  # ~75 s
    "tasks/test_sentence_finetuning.py",  # 85 s
    "runners/test_finetuning_distributed.py",  # 80 s
    "tasks/test_task_serving_outputs.py",  # 70 s
    "tools/test_run_finetuning_resume.py",  # 65 s
    "models/test_model_training.py",  # 65 s
    "test_readme.py",  # 60 s
    "pretraining/test_pretraining_dynamic.py",  # 60 s
    "training/test_resume.py",  # 60 s
    "runners/test_finetuning.py",  # 55 s
    "tasks/test_multi_label.py",  # ~55 s
    "tasks/test_long_documents.py",  # ~45 s
    "test_readme_commands_machines.py",  # ~50 s
    "pretraining/test_pretraining_creator.py",  # 50 s
    "tools/test_run_pretraining_tool.py",  # 45 s
    "pretraining/test_beam_pipeline.py",  # ~40 s
    "serving/test_onnx_export.py",  # ~35 s
)


def pytest_collection_modifyitems(config, items):
    """Runs the files of `LONGEST_FILES` first, in its order; the others keep theirs,
    and the tests of each file stay together, in their order."""
    missing = [name for name in LONGEST_FILES if not (TESTS / name).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FILES names no file: {missing}")
    rank = {name: index for index, name in enumerate(LONGEST_FILES)}

    def file_rank(item):
        try:
            name = item.path.relative_to(TESTS).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=file_rank)


@pytest.fixture(autouse=True, scope="module")
def _unset_tensorflow_global_seed():
    """Each file starts with TensorFlow's global seed unset, as in a new process, so
    that its results do not depend on the files that ran before it in the same worker:
    an op seeded with `seed=` alone (a seeded shuffle) also depends on the global seed
    that an earlier `keras.utils.set_random_seed` left."""
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None:
        tensorflow.random.set_seed(None)


@contextlib.contextmanager
def _loaded_tool(name):
    """`tools/<name>.py` imported in this process, its absl flags removed afterwards.

    The flags of every tool live in the one global `absl.flags.FLAGS`, and several tools
    share names (`max_seq_length`, `vocab_file`, ...): without the removal, the second
    tool a pytest process imports fails with a DuplicateFlagError.
    """
    from absl import flags

    before = set(flags.FLAGS)
    spec = importlib.util.spec_from_file_location(f"kbz_tools_{name}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        flags.FLAGS.unparse_flags()
        for flag_name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, flag_name)


@pytest.fixture(scope="session")
def load_tool():
    """`with load_tool("convert_checkpoint") as module:` (see `_loaded_tool`)."""
    return _loaded_tool


@pytest.fixture
def packed_batch_keys(monkeypatch):
    """The input keys of every packed training step traced while the test runs.

    Wraps `models.packed.packed_loss_fn` (called at trace time), so a test can check
    that a run really trained on packed batches.
    """
    from keras_bert_zoo.models import packed

    keys = []
    packed_loss_fn = packed.packed_loss_fn

    def recording_loss_fn(model, x, y, sample_weight):
        keys.append(sorted(x))
        return packed_loss_fn(model, x, y, sample_weight)

    monkeypatch.setattr(packed, "packed_loss_fn", recording_loss_fn)
    return keys
