"""Ctrl-C and preemption of `tools/run_finetuning.py` as a user meets them: SIGINT, then
SIGTERM, each at a seeded random step, stop the run with one line ("stopped at step N
of M; the same command resumes") and the signal's exit status, after saving a
checkpoint at the step reached (the default `--checkpoint_every=1000` would have saved
none); each rerun says where it resumes, and the last one ends with bitwise the state
of an uninterrupted run. Two workers on 127.0.0.1 both SIGTERMed stop at the same step
and resume to the uninterrupted two-worker run's weights.

The reference is an uninterrupted run of the same command (the test of exact resume
after SIGKILL, tests/tools/test_run_finetuning_resume.py, shows that reference is the
right one).
"""

import concurrent.futures
import pathlib
import random
import re
import signal
import subprocess
import sys
import threading

import child_process
import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
BINARY = REPO_ROOT / "tools" / "run_finetuning.py"
TIMEOUT = 240


resume_test = child_process.import_by_path(
    "kbz_interrupt_test_resume", HERE / "test_run_finetuning_resume.py"
)
runner_test = resume_test.runner_test

STEPS = 20
SIGNAL_SEED = 5
# The two workers' runs: enough steps for a SIGTERM after step 6 and the resume after it.
CLUSTER_STEPS = 12


def _signal_steps():
    rng = random.Random(SIGNAL_SEED)
    first = rng.randrange(2, 8)
    return first, rng.randrange(first + 4, STEPS - 3)


def _args(data_dir, checkpoint, output_dir, **extra):
    args = resume_test._args(data_dir, checkpoint, output_dir)
    # Only the default step-based checkpoints (none before step 1000) and no time-based
    # one: what the interrupted runs resume from is the checkpoint the signal saved. No
    # checkpoint layout exported at the end (what the runs leave is the resume test's).
    dropped = ("--checkpoint_every=", "--keep_checkpoints=", "--checkpoint_layouts=")
    args = [a for a in args if not a.startswith(dropped)]
    args += ["--checkpoint_every_seconds=0", "--keep_checkpoints=3"]
    return args + [f"--{name}={value}" for name, value in extra.items()]


def _start(command, env):
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )


def _drain(process, lines):
    thread = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    thread.start()
    return thread


def _run_signalled(commands, envs, after_step=None, signal_number=None):
    """Runs the commands together (a cluster, or one command); once the first logged
    `after_step`, sends `signal_number` to every process. Returns `(codes, outputs)`."""
    processes = [_start(command, env) for command, env in zip(commands, envs, strict=True)]
    outputs = [[] for _ in processes]
    drains = [_drain(p, out) for p, out in zip(processes[1:], outputs[1:], strict=True)]
    try:
        for line in processes[0].stdout:
            outputs[0].append(line)
            if after_step is not None and re.search(rf"\bstep {after_step}/", line):
                for process in processes:
                    process.send_signal(signal_number)
                after_step = None
        for process in processes:
            process.wait(timeout=TIMEOUT)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    for drain in drains:
        drain.join(timeout=10)
    return [p.returncode for p in processes], ["".join(out) for out in outputs]


def _stopped_step(output, signal_name, steps=STEPS):
    found = re.findall(
        rf"run_finetuning: stopped at step (\d+) of {steps} \({signal_name}\); the same "
        r"command resumes",
        output,
    )
    assert len(found) == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    return int(found[0])


@pytest.mark.slow
def test_sigint_then_sigterm_stop_with_a_checkpoint_and_resume_bitwise(tmp_path):
    from keras_bert_zoo.tasks import load_finetuned

    data_dir, checkpoint = resume_test._files(tmp_path)
    reference_dir, resumed_dir = tmp_path / "uninterrupted", tmp_path / "resumed"
    environment = [runner_test._environment()]
    command = [sys.executable, str(BINARY)]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    uninterrupted = pool.submit(
        _run_signalled, [command + _args(data_dir, checkpoint, reference_dir)], environment
    )
    pool.shutdown(wait=False)

    first, second = _signal_steps()
    args = command + _args(data_dir, checkpoint, resumed_dir)
    codes, (output,) = _run_signalled([args], environment, first, signal.SIGINT)
    assert codes == [128 + signal.SIGINT], output[-3000:]
    assert f"Starting at step 0 of {STEPS}" in output
    stopped_first = _stopped_step(output, "SIGINT")
    assert first <= stopped_first < STEPS
    runner_test._assert_whole(resumed_dir)
    assert (resumed_dir / "checkpoints" / f"ckpt-{stopped_first:08d}").is_dir()

    codes, (output,) = _run_signalled([args], environment, second, signal.SIGTERM)
    assert codes == [128 + signal.SIGTERM], output[-3000:]
    assert resume_test._resumed_step(output) == stopped_first
    stopped_second = _stopped_step(output, "SIGTERM")
    assert second <= stopped_second < STEPS

    codes, (output,) = _run_signalled([args], environment)
    assert codes == [0], output[-3000:]
    assert resume_test._resumed_step(output) == stopped_second

    codes, (reference_output,) = uninterrupted.result()
    assert codes == [0], reference_output[-3000:]
    reference_state, reference_manifest = resume_test._checkpoint_state(reference_dir)
    resumed_state, resumed_manifest = resume_test._checkpoint_state(resumed_dir)
    assert resumed_manifest == reference_manifest
    for key, value in reference_state.items():
        assert np.array_equal(value, resumed_state[key]), f"checkpoint {key} differs"
    reference_model = load_finetuned(str(reference_dir / "finetuned")).model
    resumed_model = load_finetuned(str(resumed_dir / "finetuned")).model
    resume_test._assert_same_weights(reference_model.weights, resumed_model.weights, "finetuned/")
    # Every periodic evaluation is there once, a stop at an evaluation step included.
    for name in ("eval_results.json", "best/metrics.json", "predictions/predictions_dev.jsonl"):
        assert (resumed_dir / name).read_bytes() == (reference_dir / name).read_bytes(), name


@pytest.mark.slow
def test_two_workers_sigtermed_together_stop_at_one_step_and_resume(tmp_path):
    from keras_bert_zoo.tasks import load_finetuned

    data_dir, checkpoint = resume_test._files(tmp_path)
    command = [sys.executable, str(BINARY)]
    strategy = {
        "distribution_strategy": "multi_worker_mirrored",
        "steps_per_loop": 2,
        "num_train_steps": CLUSTER_STEPS,
    }

    def cluster_args(output_dir):
        return command + _args(data_dir, checkpoint, output_dir, **strategy)

    codes, outputs = _run_signalled(
        [cluster_args(tmp_path / "uninterrupted")] * 2, child_process.worker_environments(2)
    )
    assert codes == [0, 0], "\n=====\n".join(o[-3000:] for o in outputs)

    args = cluster_args(tmp_path / "resumed")
    codes, outputs = _run_signalled(
        [args] * 2, child_process.worker_environments(2), 6, signal.SIGTERM
    )
    assert codes == [128 + signal.SIGTERM] * 2, "\n=====\n".join(o[-3000:] for o in outputs)
    stopped = [_stopped_step(output, "SIGTERM", CLUSTER_STEPS) for output in outputs]
    assert stopped[0] == stopped[1] and 6 <= stopped[0] < CLUSTER_STEPS, stopped
    codes, outputs = _run_signalled([args] * 2, child_process.worker_environments(2))
    assert codes == [0, 0], "\n=====\n".join(o[-3000:] for o in outputs)
    resumed = re.findall(rf"Resuming at step (\d+) of {CLUSTER_STEPS}", outputs[0])
    assert resumed == [str(stopped[0])], outputs[0][-3000:]

    reference = load_finetuned(str(tmp_path / "uninterrupted" / "finetuned")).model
    resumed = load_finetuned(str(tmp_path / "resumed" / "finetuned")).model
    resume_test._assert_same_weights(reference.weights, resumed.weights, "finetuned/")
