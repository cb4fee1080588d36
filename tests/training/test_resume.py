"""Exact resume: a tiny BERT pretraining run killed with SIGKILL and rerun ends bitwise
equal to an uninterrupted run (CPU, fixed seed, dropout on, shuffled input with its own
RNG, whose iterator state is part of each checkpoint)."""

import random
import signal

import numpy as np
import pytest

STEPS = 9


def _args(model_dir, out):
    return [
        "--model=pretrainer",
        "--preset=small",
        f"--steps={STEPS}",
        "--steps_per_loop=1",
        "--checkpoint_every=2",
        "--keep_checkpoints=2",
        "--dropout=0.1",
        f"--model_dir={model_dir}",
        f"--out={out}",
    ]


@pytest.mark.slow
def test_sigkill_twice_then_resume_is_bitwise_equal(tmp_path, run_training, load_training_result):
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    # Checkpoints every 2 steps. "step k" is logged after step k ran: killing at k >= 3
    # leaves ckpt-2 at least, and the second kill comes after the second run wrote one.
    first_kill = rng.randint(3, 5)
    second_kill = rng.randint(first_kill + 2, STEPS - 1)
    context = f"(kills after steps {first_kill} and {second_kill}, random seed {seed})"

    code, output = run_training(_args(tmp_path / "reference", tmp_path / "reference.npz"))
    assert code == 0, output[-3000:]
    reference_losses, reference_weights, _ = load_training_result(tmp_path / "reference.npz")
    assert len(reference_losses) == STEPS and np.all(np.isfinite(reference_losses))

    args = _args(tmp_path / "killed", tmp_path / "killed.npz")
    code, output = run_training(args, kill_after_step=first_kill)
    assert code == -signal.SIGKILL, context + output[-3000:]
    code, output = run_training(args, kill_after_step=second_kill)
    assert code == -signal.SIGKILL, context + output[-3000:]
    assert "Restored checkpoint" in output, context + output[-3000:]
    code, output = run_training(args)
    assert code == 0, context + output[-3000:]
    assert "Restored checkpoint" in output, context + output[-3000:]
    losses, weights, restored = load_training_result(tmp_path / "killed.npz")
    kept = sorted(p.name for p in (tmp_path / "killed" / "checkpoints").iterdir())
    assert kept == [f"ckpt-{STEPS - 1:08d}", f"ckpt-{STEPS:08d}"], kept  # the last 2

    assert 2 <= restored < STEPS, context
    # The rerun repeats the steps after its checkpoint with exactly the same losses.
    np.testing.assert_array_equal(losses, reference_losses[restored:], err_msg=context)
    assert len(weights) == len(reference_weights)
    for index, (got, want) in enumerate(zip(weights, reference_weights, strict=True)):
        assert got.dtype == want.dtype and np.array_equal(got, want), (
            f"variable {index} differs after resuming {context}: "
            f"max |diff| {np.max(np.abs(got.astype(np.float64) - want))}"
        )
    # The dropout seed states are among the variables compared, and they moved.
    assert any(w.dtype == np.int64 and w.shape == (2,) and w[1] > 0 for w in weights)
