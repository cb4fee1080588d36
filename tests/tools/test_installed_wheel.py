"""The tools after `pip install` of a wheel, outside the repository: the wheel built from
this checkout installs every tool as a console script (`keras-bert-zoo-<tool>`) and as
`python -m keras_bert_zoo.tools.<tool>`; each answers `--helpfull`, and the main job
runs from there.

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
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return venv / "bin", work, env


def test_the_package_comes_from_the_wheel(installed):
    bin_dir, work, env = installed
    found = _run(
        [
            bin_dir / "python",
            "-c",
            "import keras_bert_zoo, keras_bert_zoo.tools.run_finetuning as tool; "
            "print(keras_bert_zoo.__file__); print(tool.__file__)",
        ],
        cwd=work,
        env=env,
    )
    assert found.returncode == 0, found.stderr[-3000:]
    for line in found.stdout.splitlines():
        assert str(bin_dir.parent) in line and str(REPO_ROOT) not in line, line


def test_every_tool_answers_helpfull_as_a_console_script(installed):
    bin_dir, work, env = installed

    def helpfull(tool):
        script = bin_dir / f"keras-bert-zoo-{tool.replace('_', '-')}"
        return tool, _run([script, "--helpfull"], cwd=work, env=env)

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        answers = dict(pool.map(helpfull, TOOLS))
    assert set(answers) == set(TOOLS) and len(TOOLS) == 10
    for tool, answer in answers.items():
        # absl ends --help and --helpfull with status 1, as `python tools/<tool>.py` does.
        assert answer.returncode == 1, (tool, answer.stderr[-3000:])
        assert "Traceback" not in answer.stdout + answer.stderr, (tool, answer.stderr[-3000:])
        # The tool's own documentation (its module docstring) and its flags.
        first_line = (REPO_ROOT / "tools" / f"{tool}.py").read_text().split("\n")[0].strip('"r')
        assert first_line in answer.stdout, (tool, answer.stdout[:500])
    assert "all-MiniLM-L6-v2" in answers["run_finetuning"].stdout
    assert "--input_mode" in answers["run_pretraining"].stdout
    # python -m runs the same module.
    module = _run(
        [bin_dir / "python", "-m", "keras_bert_zoo.tools.list_presets", "--names_only"],
        cwd=work,
        env=env,
    )
    assert module.returncode == 0 and "bert_tiny_uncased" in module.stdout, module.stderr


def test_the_main_job_runs_from_the_installed_wheel(installed):
    bin_dir, work, env = installed
    output_dir = work / "demo"
    # The main job with one epoch instead of ten: the same code path, a sixth of the time.
    job = _run(
        [
            bin_dir / "keras-bert-zoo-run-finetuning",
            "--num_train_epochs=1",
            f"--output_dir={output_dir}",
            "--progress=log",
        ],
        cwd=work,
        env=env,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert "held-out accuracy:" in job.stdout
    assert "same labels as the in-memory Keras model: yes" in job.stdout
    assert (output_dir / "finetuned" / "model.keras").is_file()
