"""What a user sees on a terminal: a fine-tuning run and an export through the tools, with
the environment a user has (no TF_CPP_MIN_LOG_LEVEL of ours), print our own lines (the
CPU kernels chosen first, then phases, progress, results) and none of TensorFlow's
noise: no CUDA probing on a CPU machine, no multi-kilobyte load report, no
signature-serialization warnings. With `--verbosity=1` TensorFlow's Python logs come
back. (The console scripts' start: tests/tools/test_installed_wheel.py.)"""

import pathlib
import subprocess
import sys

import child_process
import pytest
from test_run_finetuning import FILLERS, KEYWORDS, SPECIALS, _write_reviews

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
NOISE = (
    "cuInit",
    "cuda_platform",
    "signature_serialization",
    "unsupported characters",
    "LoadReport(",
    "Sharding callback",
    "absl::InitializeLog",
)


def _tool(name, *args, verbosity=None):
    env = child_process.environment()
    env.pop("TF_CPP_MIN_LOG_LEVEL")  # the user's environment: the tool's own default
    extra = [] if verbosity is None else [f"--verbosity={verbosity}"]
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / f"{name}.py"), *args, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import finetuning_test_helpers as helpers

    root = tmp_path_factory.mktemp("quiet")
    (root / "data").mkdir()
    _write_reviews(root / "data" / "reviews.tsv")
    vocabulary = SPECIALS + FILLERS + list(KEYWORDS.values()) + ["."]
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", vocabulary)
    trained = _tool(
        "run_finetuning",
        "--task=text_classification",
        f"--data_dir={root / 'data'}",
        "--train_file=reviews.tsv",
        "--heldout_fraction=0.25",
        f"--init_checkpoint={checkpoint}",
        f"--output_dir={root / 'run'}",
        "--max_seq_length=16",
        "--num_train_steps=4",
        "--train_batch_size=4",
        "--progress=log",
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    return root, trained


@pytest.mark.slow
def test_training_and_export_print_our_lines_only(run):
    root, trained = run
    exported = _tool(
        "export_saved_model",
        f"--finetuned_dir={root / 'run' / 'finetuned'}",
        f"--export_base={root / 'exports'}",
        "--model_name=reviews",
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    for output in (trained, exported):
        text = output.stdout + output.stderr
        for noise in NOISE:
            assert noise not in text, (noise, text[-3000:])
        # No line a terminal has to wrap many times over.
        assert max(len(line) for line in text.splitlines()) < 400, text[-3000:]
    # The first lines say which CPU kernels run, and why (issue 45).
    assert "CPU kernels" in trained.stderr.splitlines()[0], trained.stderr[:2000]
    assert "CPU kernels" in exported.stderr.splitlines()[0], exported.stderr[:2000]
    for phase in ("Reading text_classification", "Building the model", "Starting at step 0"):
        assert phase in trained.stderr, phase
    assert "Evaluating on dev (10 examples)" in trained.stderr
    assert "tensors loaded; new heads (random weights): classification_head" in trained.stderr
    assert trained.stdout.rstrip().endswith(f"tensorboard --logdir {root / 'run'}")


@pytest.mark.slow
def test_verbosity_brings_tensorflows_logs_back(run):
    root, _ = run
    shown = _tool(
        "export_saved_model",
        f"--finetuned_dir={root / 'run' / 'finetuned'}",
        f"--export_base={root / 'verbose'}",
        "--model_name=reviews",
        verbosity=1,
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "tensorflow" in shown.stderr.lower()
