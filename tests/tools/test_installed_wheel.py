"""The tools after `pip install` of a wheel, outside the repository: the wheel built from
this checkout installs every tool as a console script (`keras-bert-zoo-<tool>`) and as
`python -m keras_bert_zoo.tools.<tool>`; each answers `--helpfull` (status 0, naming the
console script, not the source tree), a misspelt flag is one line before TensorFlow
loads, TensorFlow's C++ start-up lines stay hidden as in a clone, the hints name
`pip install "keras_bert_zoo[demo]"`, and the main job runs from there (issue 47, point 6).

To keep CI time, the fresh virtualenv takes its dependencies from the test run's own
environment (a path file to its site-packages; the wheel is installed with `--no-deps`
and comes first on the path), and the wheel is built without build isolation. Every
process runs in a directory outside the checkout, so nothing of the clone is imported.
"""

import concurrent.futures
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest
from test_quiet_logs import NOISE

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
from tools import TOOLS  # noqa: E402

TIMEOUT = 600


def _run(command, cwd, env=None, timeout=TIMEOUT):
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`(bin directory, work directory, environment)` of a fresh venv holding the wheel."""
    root = tmp_path_factory.mktemp("wheel")
    # Built from a copy: an in-tree build would leave build/ and *.egg-info in the clone.
    source = root / "source"
    source.mkdir()
    for name in ("setup.py", "README.md", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("keras_bert_zoo", "tools"):
        shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
    dist = root / "dist"
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            dist,
            source,
        ],
        cwd=root,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("keras_bert_zoo-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "keras_bert_zoo/tools/run_finetuning.py" in names and not any(
        name.startswith("tests/") for name in names
    )
    assert "keras_bert_zoo/tools/flag_definitions.json" in names

    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=root)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed_wheel = _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", wheel],
        cwd=root,
    )
    assert installed_wheel.returncode == 0, installed_wheel.stdout + installed_wheel.stderr
    site_packages = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root
    ).stdout.strip()
    # The dependencies: this environment's packages, after the wheel on the path.
    pathlib.Path(site_packages, "test_environment.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8"
    )
    work = root / "work"
    work.mkdir()
    # A user's environment: no TF_CPP_MIN_LOG_LEVEL of ours (the tools set their own).
    dropped = ("PYTHONPATH", "PYTHONHOME", "TF_CPP_MIN_LOG_LEVEL")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return venv / "bin", work, env


# One process of the venv's python answers two questions: where the package and a tool
# come from (the wheel), and what an install hint and a missing [demo] extra say.
PROBE = (
    "import keras_bert_zoo, keras_bert_zoo.tools.run_finetuning as tool\n"
    "print(keras_bert_zoo.__file__)\n"
    "print(tool.__file__)\n"
    "import importlib.util as util\n"
    "find = util.find_spec\n"
    "util.find_spec = lambda name, *a: None if name == 'gensim' else find(name, *a)\n"
    "from keras_bert_zoo.checkpoints.installed import INSTALLED_CHECKPOINTS\n"
    "from keras_bert_zoo.runners import demo\n"
    "print(INSTALLED_CHECKPOINTS['all-MiniLM-L6-v2'].install)\n"
    "try:\n"
    "    demo.gensim_test_data_dir()\n"
    "except FileNotFoundError as error:\n"
    "    print(error)\n"
)


@pytest.fixture(scope="module")
def probe(installed):
    """The venv's python running `PROBE` in the work directory."""
    bin_dir, work, env = installed
    return _run([bin_dir / "python", "-c", PROBE], cwd=work, env=env)


@pytest.mark.slow
def test_the_package_comes_from_the_wheel(installed, probe):
    bin_dir, _, _ = installed
    assert probe.returncode == 0, probe.stderr[-3000:]
    for line in probe.stdout.splitlines()[:2]:
        assert str(bin_dir.parent) in line and str(REPO_ROOT) not in line, line


@pytest.mark.slow
def test_every_tool_answers_helpfull_as_a_console_script(installed):
    bin_dir, work, env = installed

    def helpfull(tool):
        script = bin_dir / f"keras-bert-zoo-{tool.replace('_', '-')}"
        return tool, _run([script, "--helpfull"], cwd=work, env=env)

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        answers = dict(pool.map(helpfull, TOOLS))
    assert set(answers) == set(TOOLS) and len(TOOLS) == 13
    for tool, answer in answers.items():
        # Help is an answer: status 0 (absl's own --helpfull ended with 1).
        assert answer.returncode == 0, (tool, answer.stderr[-3000:])
        assert "Traceback" not in answer.stdout + answer.stderr, (tool, answer.stderr[-3000:])
        # The tool's own documentation (its module docstring) and its flags.
        first_line = (REPO_ROOT / "tools" / f"{tool}.py").read_text().split("\n")[0].strip('"r')
        assert first_line in answer.stdout, (tool, answer.stdout[:500])
        # Named as installed: the console scripts and modules, not the clone's paths.
        source = (REPO_ROOT / "tools" / f"{tool}.py").read_text()
        if f"python tools/{tool}.py" in source:
            assert f"keras-bert-zoo-{tool.replace('_', '-')} " in answer.stdout, tool
        assert "python tools/" not in answer.stdout, (tool, answer.stdout[:3000])
        assert "keras_bert_zoo/runners/" not in answer.stdout, (tool, answer.stdout[:3000])
        assert "absl.testing" not in answer.stdout and "tensorflow." not in answer.stdout
    assert "all-MiniLM-L6-v2" in answers["run_finetuning"].stdout
    assert "keras_bert_zoo.runners.finetuning" in answers["run_finetuning"].stdout
    assert "--input_mode" in answers["run_pretraining"].stdout
    # python -m runs the same module.
    module = _run(
        [bin_dir / "python", "-m", "keras_bert_zoo.tools.list_presets", "--names_only"],
        cwd=work,
        env=env,
    )
    assert module.returncode == 0 and "bert_tiny_uncased" in module.stdout, module.stderr


@pytest.mark.slow
def test_a_console_script_checks_its_flags_before_tensorflow_and_starts_quietly(
    installed, probe, tmp_path
):
    bin_dir, work, env = installed
    # A `tensorflow` that fails to import: what answers before it was never needed.
    fake = tmp_path / "no_tensorflow"
    for package in ("tensorflow", "keras"):
        (fake / package).mkdir(parents=True)
        (fake / package / "__init__.py").write_text("raise ImportError('TensorFlow loaded')\n")
    fake_env = dict(env, PYTHONPATH=str(fake))
    commands = {
        "typo": [bin_dir / "keras-bert-zoo-run-finetuning", "--tsk=glue/mrpc"],
        "module typo": [
            bin_dir / "python",
            "-m",
            "keras_bert_zoo.tools.build_vocab",
            "--no_such_flag",
        ],
        "quiet": [bin_dir / "keras-bert-zoo-list-presets", "--names_only"],
    }
    envs = {"typo": fake_env, "module typo": fake_env, "quiet": env}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(_run, command, work, envs[name]) for name, command in commands.items()
        }
        done = {name: future.result() for name, future in futures.items()}
    typo, module_typo = done["typo"], done["module typo"]
    assert typo.returncode == 1 and typo.stderr == (
        "keras-bert-zoo-run-finetuning: error: Unknown command line flag 'tsk'\n"
    ), typo.stderr[-3000:]
    assert module_typo.returncode == 1 and module_typo.stderr == (
        "build_vocab: error: Unknown command line flag 'no_such_flag'\n"
    ), module_typo.stderr[-3000:]
    quiet = done["quiet"]
    assert quiet.returncode == 0 and "bert_tiny_uncased" in quiet.stdout, quiet.stderr[-3000:]
    for noise in NOISE + ("oneDNN custom operations", "cuda"):
        assert noise not in quiet.stderr, (noise, quiet.stderr[-3000:])
    assert probe.returncode == 0, probe.stderr[-3000:]
    install, missing = probe.stdout.splitlines()[2:]
    assert install == 'pip install "keras_bert_zoo[demo]"'
    assert missing.endswith('run `pip install "keras_bert_zoo[demo]"`'), missing


@pytest.mark.slow
def test_the_main_job_runs_from_the_installed_wheel(installed):
    bin_dir, work, env = installed
    output_dir = work / "demo"
    # The main job with two steps instead of ten epochs: the same code path (MiniLM,
    # the held-out evaluation, the export answering beside the Keras model).
    job = _run(
        [
            bin_dir / "keras-bert-zoo-run-finetuning",
            "--num_train_steps=2",
            f"--output_dir={output_dir}",
            "--progress=log",
        ],
        cwd=work,
        env=env,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    # Our lines only: the CPU kernels first, none of TensorFlow's C++ start-up lines.
    assert "CPU kernels" in job.stderr.splitlines()[0], job.stderr[:3000]
    for noise in NOISE:
        assert noise not in job.stdout + job.stderr, (noise, job.stderr[-3000:])
    assert "held-out accuracy:" in job.stdout
    assert "same labels as the in-memory Keras model: yes" in job.stdout
    assert (output_dir / "finetuned" / "model.keras").is_file()
