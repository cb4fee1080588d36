"""Fixtures for every test directory."""

import contextlib
import gc
import importlib.util
import pathlib
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
TOOLS = TESTS.parent / "tools"

# The test files that use the session-scoped SavedModel exports of
# tests/serving/conftest.py: `all_exports` (seven exports, one per task family; ~60 s
# to build) and `tensorflow_text_export` (~8 s); test_answers takes the same seven
# exports one by one. Under `--dist loadfile` each xdist worker that runs one of these
# files builds them all itself: in a CI run the setup of test_export.py took 67.6 s on
# one worker and that of test_native.py 65.5 s on the other, the same build twice.
# `pytest_xdist_make_scheduler` below makes these files one work unit, run by one worker
# in this order, which builds the exports once (~60 s less worker time). test_tools.py
# shares `cpp_runner` with test_native.py (compiled once per worker: 12-17 s); with the
# exports cut down (group A, 2026-12), the unit stays under ~350 s with it.
SHARED_EXPORT_FILES = (
    "serving/test_export.py",  # 180 s, ~70 s of it building the exports
    "serving/test_answers.py",  # ~25 s (120 s when it builds the exports)
    "serving/test_native.py",  # ~60 s (85 s when it builds the exports)
    "serving/test_fresh_process.py",  # ~25 s
    "serving/test_robustness.py",  # ~10 s
    "serving/test_tools.py",  # ~50 s (12-17 s more when it compiles `cpp_runner`)
)
SHARED_EXPORT_SCOPE = "tests/serving/[session exports]"

# The longest test files, longest first, with their worker seconds in a full run with
# two workers on a 2-core machine. pyproject's addopts give whole files to the two xdist
# workers (`--dist loadfile`) in collection order (`--no-loadscope-reorder`: xdist's
# default order, most tests first, starts the long files with few tests last, and one of
# them then runs alone at the end while the other worker idles). Starting the longest
# files first lets the many short ones fill in around them. A file missing here runs
# after these, in pytest's order; the order changes no result, only the wall time.
LONGEST_FILES = (
    # Worker seconds of each file of 25 s or more in a full run with two workers
    # (2026-12-07, the machine's 2 cores shared with other work, so on the slow side;
    # test_export_grid.py and goldens/ estimated), longest first.
    # One work unit (see SHARED_EXPORT_FILES), ~408 s in all: the longest, so first.
    *SHARED_EXPORT_FILES,
    "test_readme_commands_finetuning.py",  # 345 s
    "test_readme_commands_embeddings.py",  # 243 s
    "tools/test_run_finetuning_interrupt.py",  # 203 s
    "runners/test_distillation_job.py",  # 197 s
    "serving/test_embedding_export.py",  # 190 s
    "test_readme_commands_pretraining.py",  # 169 s
    "training/test_gathered_losses.py",  # 161 s
    "text/test_tokenizer_parity.py",  # 156 s
    "test_readme_commands.py",  # 155 s
    "training/test_trainer.py",  # 144 s
    "tasks/test_sentence_finetuning.py",  # 135 s
    "runners/test_embedding_distillation.py",  # 126 s
    "serving/test_export_grid.py",  # 100 s
    "training/test_distribute.py",  # 97 s
    "runners/test_finetuning.py",  # 96 s
    "serving/test_onnx_export.py",  # 94 s
    "models/test_model_training.py",  # 87 s
    "pretraining/test_run_pretraining.py",  # 82 s
    "models/test_gradient_cache_loss_fn.py",  # 80 s
    "tasks/test_tagging.py",  # 66 s
    "tasks/test_sentence_embedding_run.py",  # 60 s
    "tools/test_installed_wheel.py",  # 59 s
    "serving/test_int8_minilm.py",  # 59 s
    "pretraining/test_pretraining_dynamic.py",  # 56 s
    "runners/test_run_disk.py",  # 56 s
    "search/test_embedders.py",  # 53 s
    "pretraining/test_beam_pipeline.py",  # 51 s
    "tasks/test_batching.py",  # 51 s
    "tools/test_run_distillation.py",  # 47 s
    "runners/test_finetuning_distributed.py",  # 47 s
    "tools/test_quiet_logs.py",  # 46 s
    "training/test_resume.py",  # 45 s
    "tasks/test_task_serving_outputs.py",  # 44 s
    "models/test_padding_free.py",  # 43 s
    "serving/test_litert.py",  # 43 s
    "tools/test_run_finetuning_resume.py",  # 42 s
    "serving/test_tool_inputs_and_answers.py",  # 42 s
    "test_readme.py",  # 37 s
    "search/test_search_tools.py",  # 36 s
    "goldens/test_bert_goldens.py",  # 35 s
    "pretraining/test_pretraining_creator.py",  # 34 s
    "models/test_packed.py",  # 32 s
    "runners/test_runners.py",  # 31 s
    "serving/test_hub_pair_manifests.py",  # 31 s
    "data/test_data_pipeline.py",  # 30 s
    "test_readme_commands_machines.py",  # 29 s
    "models/test_sentence_embedder_parity.py",  # 28 s
    "models/test_model_serialization.py",  # 27 s
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


@pytest.hookimpl(optionalhook=True)  # optional: not called without xdist or with -n 0
def pytest_xdist_make_scheduler(config, log):
    """xdist's `--dist loadfile` scheduler, except that the files of
    `SHARED_EXPORT_FILES` are one scope (one work unit, one worker). Scopes are still
    handed out in collection order under `--no-loadscope-reorder`; this one comes where
    its first file is collected (first: LONGEST_FILES starts with these files)."""
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling

    shared = set()
    for name in SHARED_EXPORT_FILES:
        try:
            shared.add((TESTS / name).relative_to(config.rootpath).as_posix())
        except ValueError:  # tests/ outside the rootdir: no grouping
            pass

    class SharedExportsScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid):
            path = super()._split_scope(nodeid)
            return SHARED_EXPORT_SCOPE if path in shared else path

    return SharedExportsScheduling(config, log)


# Python's full collections scan every tracked object, and a test worker holds more
# than a million (TensorFlow's and Keras' modules, traced graphs, session fixtures):
# measured on three heavy files in one process, 30 full collections took 24.6 of 320 s.
# What has lived through the collection of the tests or a whole module lives on, so it
# is frozen out of later scans (gc.freeze): 284 s instead of 320 s on those files.


def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # the module's fixtures are finalized in here
    if nextitem is None or nextitem.module is not item.module:
        gc.collect()
        gc.freeze()


# The suite's budget, kept visible (README "Development"; .ci/run shows it): after a
# run, the files that took the most worker-seconds (setup, call and teardown of their
# tests, summed over the xdist workers), from the reports pytest itself times.
SLOWEST_FILES_SHOWN = 10


def pytest_addoption(parser):
    parser.addoption(
        "--slowest-files",
        type=int,
        default=SLOWEST_FILES_SHOWN,
        metavar="N",
        help="after the run, list the N test files that took the most worker-seconds (0: none)",
    )


# {test file: (tests, worker-seconds)} of this run.
_FILE_SECONDS: dict[str, tuple[int, float]] = {}


def pytest_runtest_logreport(report):
    """Sums each file's phases (under xdist, the controller sees every worker's)."""
    path = report.nodeid.split("::", 1)[0]
    count, total = _FILE_SECONDS.get(path, (0, 0.0))
    _FILE_SECONDS[path] = (count + (report.when == "call"), total + report.duration)


def pytest_terminal_summary(terminalreporter, config):
    shown = config.getoption("--slowest-files")
    seconds = _FILE_SECONDS
    if not shown or not seconds or hasattr(config, "workerinput"):
        return
    total = sum(total for _, total in seconds.values())
    terminalreporter.write_sep("=", f"slowest {min(shown, len(seconds))} test files")
    terminalreporter.write_line(
        f"{total:.0f} worker-s over {len(seconds)} files (setup + call + teardown)"
    )
    ranked = sorted(seconds.items(), key=lambda item: -item[1][1])[:shown]
    for path, (count, file_total) in ranked:
        terminalreporter.write_line(f"{file_total:8.1f} s  {count:4d} tests  {path}")


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

    Wraps `models.sequence_packing.forward.packed_loss_fn` (called at trace time), so a
    test can check that a run really trained on packed batches.
    """
    from keras_bert_zoo.models.sequence_packing import forward as packed

    keys = []
    packed_loss_fn = packed.packed_loss_fn

    def recording_loss_fn(model, x, y, sample_weight):
        keys.append(sorted(x))
        return packed_loss_fn(model, x, y, sample_weight)

    monkeypatch.setattr(packed, "packed_loss_fn", recording_loss_fn)
    return keys
