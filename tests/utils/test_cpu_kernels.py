"""The CPU kernel choice (issue 45): the kind of CPU from its flags, the table's choice,
the user's settings winning, the log lines; and how a process knows it runs a tool."""

import ast
import os
import pathlib

import pytest

from keras_bert_zoo.utils import cpu_kernels, installation, startup

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools"
AVX2 = {"sse4_2", "fma", "avx", "avx2"}
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl"}
AVX512_VNNI = AVX512 | {"avx512_vnni"}
SAPPHIRE_RAPIDS = AVX512_VNNI | {"avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}


@pytest.mark.parametrize(
    "flags, kind, tensorflow_default",
    [
        (AVX2, cpu_kernels.AVX2, False),
        (AVX2 | {"avx_vnni"}, cpu_kernels.AVX2, True),  # TensorFlow counts AVX-VNNI too
        (AVX512, cpu_kernels.AVX512, False),
        (AVX512_VNNI, cpu_kernels.AVX512_VNNI, True),
        (AVX512_VNNI | {"avx512_bf16"}, cpu_kernels.AMX_OR_BF16, True),
        (SAPPHIRE_RAPIDS, cpu_kernels.AMX_OR_BF16, True),
        ({"sse4_2"}, cpu_kernels.OTHER, False),
        (set(), cpu_kernels.OTHER, False),
    ],
)
def test_the_kind_of_cpu_and_tensorflows_own_onednn_default(
    flags, kind, tensorflow_default, monkeypatch
):
    monkeypatch.setattr(cpu_kernels.platform, "system", lambda: "Linux")
    assert cpu_kernels.cpu_kind(flags) == kind
    assert cpu_kernels.tensorflow_onednn_default(flags) == tensorflow_default


def test_this_machines_flags_are_read():
    flags = cpu_kernels.read_cpu_flags()
    if pathlib.Path("/proc/cpuinfo").is_file():
        assert flags and cpu_kernels.cpu_kind(flags) in cpu_kernels.CHOICES
    assert cpu_kernels.read_cpu_flags("/no/such/cpuinfo") == frozenset()


def test_on_an_avx2_cpu_the_choice_turns_onednn_on_against_tensorflows_default(monkeypatch):
    monkeypatch.setattr(cpu_kernels.platform, "system", lambda: "Linux")
    choice = cpu_kernels.choose(flags=AVX2, environ={})
    assert choice.onednn is True and choice.env_value == "1"
    assert not choice.training_jit_compile and choice.inference_jit_compile
    first, second = choice.describe().splitlines()
    assert first == "CPU kernels (AVX2 CPU): oneDNN on, XLA for inference, not for training"
    assert "TF_ENABLE_ONEDNN_OPTS=1" in second and "leaves it off" in second
    environ = {}
    monkeypatch.setattr(cpu_kernels, "_chosen", None)  # restored after the test
    cpu_kernels.apply(choice, environ)
    assert environ == {"TF_ENABLE_ONEDNN_OPTS": "1"} and cpu_kernels.chosen() is choice


def test_where_tensorflow_already_chose_the_same_nothing_is_set(monkeypatch):
    monkeypatch.setattr(cpu_kernels.platform, "system", lambda: "Linux")
    for flags in (AVX512_VNNI, SAPPHIRE_RAPIDS):
        choice = cpu_kernels.choose(flags=flags, environ={})
        assert choice.onednn is True and choice.env_value is None
        assert "TensorFlow's default" in choice.onednn_reason


def test_the_users_environment_and_flags_win(monkeypatch):
    monkeypatch.setattr(cpu_kernels.platform, "system", lambda: "Linux")
    # The environment's TF_ENABLE_ONEDNN_OPTS is the user's: kept, and said.
    kept = cpu_kernels.choose(flags=AVX2, environ={"TF_ENABLE_ONEDNN_OPTS": "0"})
    assert kept.onednn is False and kept.env_value is None
    assert "TF_ENABLE_ONEDNN_OPTS=0 in the environment" in kept.onednn_reason
    # --onednn wins over both.
    forced = cpu_kernels.choose("off", flags=AVX512_VNNI, environ={"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert forced.onednn is False and forced.env_value == "0"
    assert forced.onednn_reason == "--onednn=off"
    # --jit_compile / --nojit_compile force XLA everywhere or nowhere.
    on = cpu_kernels.choose(jit_compile=True, flags=AVX2, environ={})
    off = cpu_kernels.choose(jit_compile=False, flags=AVX2, environ={})
    assert on.training_jit_compile and on.inference_jit_compile
    assert not off.training_jit_compile and not off.inference_jit_compile
    assert "no XLA" in off.describe() and "--nojit_compile" in off.describe()
    with pytest.raises(ValueError, match="onednn must be one of"):
        cpu_kernels.choose("maybe")


def test_an_unmeasured_cpu_keeps_tensorflows_defaults():
    choice = cpu_kernels.choose(flags={"neon", "asimd"}, environ={})
    assert choice.cpu_kind == cpu_kernels.OTHER and choice.env_value is None
    assert not choice.training_jit_compile and not choice.inference_jit_compile


def test_the_jobs_read_the_choice(monkeypatch):
    class Model:
        jit_compile = False

    monkeypatch.setattr(cpu_kernels, "_chosen", None)
    # A library user's process: Keras' own setting, and the job's.
    assert cpu_kernels.inference_jit_compile(Model()) is False
    assert cpu_kernels.training_jit_compile(None) is False
    assert cpu_kernels.training_jit_compile(True) is True
    monkeypatch.setattr(cpu_kernels, "_chosen", cpu_kernels.choose(flags=AVX2, environ={}))
    assert cpu_kernels.inference_jit_compile(Model()) is True
    assert cpu_kernels.training_jit_compile(None) is False


def _imports(path):
    tree = ast.parse(pathlib.Path(path).read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_what_runs_before_tensorflow_imports_none_of_it():
    """The modules a tool's start runs (tests/tools/test_tool_start.py runs them with
    TensorFlow absent)."""
    for module in (cpu_kernels, installation):
        assert _imports(module.__file__) <= {
            "__future__",
            "collections.abc",
            "dataclasses",
            "functools",
            "os",
            "platform",
        }, module.__name__


@pytest.mark.parametrize(
    "orig_argv, tool",
    [
        (["python", f"{TOOLS}/run_finetuning.py", "--task=x"], "run_finetuning"),
        (["python", "-u", "-X", "dev", f"{TOOLS}/list_presets.py"], "list_presets"),
        (["python", "/venv/bin/keras-bert-zoo-run-finetuning", "--help"], "run_finetuning"),
        (["python", "-m", "keras_bert_zoo.tools.export_saved_model"], "export_saved_model"),
        (["python", "-mkeras_bert_zoo.tools.build_vocab"], "build_vocab"),
        (["python", "-m", "pytest", "tests"], None),
        (["python", "-c", "from multiprocessing.forkserver import main; main()"], None),
        (["python", "benchmarks/train_step.py"], None),
        (["python", "setup.py"], None),
        (["python"], None),
    ],
)
def test_a_process_knows_which_tool_it_runs(orig_argv, tool):
    assert startup.starting_tool(orig_argv) == tool


def test_a_linked_tools_directory_is_the_clones(tmp_path):
    """`tools/` linked into a working directory beside the data (as the README chain
    tests run the commands) is the clone's: the tool starts as from the clone."""
    (tmp_path / "tools").symlink_to(TOOLS)
    orig_argv = ["python", "tools/run_finetuning.py", "--task=x"]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert startup.starting_tool(orig_argv) == "run_finetuning"
    finally:
        os.chdir(cwd)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "run_finetuning.py").write_text("")
    assert (
        startup.starting_tool(["python", str(tmp_path / "elsewhere" / "run_finetuning.py")]) is None
    )


def test_help_names_the_program_the_user_called(monkeypatch):
    text = (
        "Usage:\n  python tools/run_finetuning.py --task=x\n  (tools/list_presets.py lists "
        "them; see keras_bert_zoo/runners/finetuning.py)"
    )
    monkeypatch.setattr(installation, "from_source_tree", lambda: True)
    assert startup.usage_for(text, "run_finetuning", "python tools/run_finetuning.py") == text
    monkeypatch.setattr(installation, "from_source_tree", lambda: False)
    console = startup.usage_for(text, "run_finetuning", "keras-bert-zoo-run-finetuning")
    assert "keras-bert-zoo-run-finetuning --task=x" in console
    assert "keras-bert-zoo-list-presets lists" in console
    assert "keras_bert_zoo.runners.finetuning)" in console and "tools/" not in console
    module = startup.usage_for(text, "run_finetuning", "python -m keras_bert_zoo.tools.x")
    assert "python -m keras_bert_zoo.tools.run_finetuning --task=x" in module


def test_the_install_hint_of_an_extra_fits_the_installation(monkeypatch):
    assert installation.from_source_tree()  # this checkout
    assert installation.install_extra_command("demo") == 'pip install -e ".[demo]"'
    monkeypatch.setattr(installation, "from_source_tree", lambda: False)
    assert installation.install_extra_command("demo") == 'pip install "keras_bert_zoo[demo]"'


def test_a_tool_not_checked_early_reads_its_kernel_flags_as_written():
    """A tool that plugins extend is parsed once its flags are loaded: the kernel flags,
    needed before TensorFlow loads, are read from the arguments themselves."""
    assert startup._kernel_flags([]) == ("auto", None)  # noqa: SLF001
    assert startup._kernel_flags(["--onednn=off", "--jit_compile"]) == ("off", True)  # noqa: SLF001
    assert startup._kernel_flags(["--onednn", "on", "--nojit_compile"]) == ("on", False)  # noqa: SLF001
    assert startup._kernel_flags(["--jit_compile=false", "--x=1"]) == ("auto", False)  # noqa: SLF001


def test_a_tool_imports_tensorflow_without_the_modules_no_tool_uses(tmp_path, monkeypatch):
    """Within the block a module of `UNUSED_BY_TOOLS` imports as if not installed (Keras
    then skips scikit-learn); after it, it imports as usual."""
    import importlib
    import sys

    from keras_bert_zoo.utils import quiet_import

    assert "sklearn" in quiet_import.UNUSED_BY_TOOLS
    (tmp_path / "kbz_unused_probe.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(quiet_import, "UNUSED_BY_TOOLS", ("kbz_unused_probe",))
    with quiet_import.without_modules_tools_do_not_use():
        with pytest.raises(ImportError):
            importlib.import_module("kbz_unused_probe")
    assert importlib.import_module("kbz_unused_probe").VALUE == 7
    del sys.modules["kbz_unused_probe"]
