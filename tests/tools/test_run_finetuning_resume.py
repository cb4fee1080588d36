"""Exact resume of `tools/run_finetuning.py` as a user runs it: the same command,
SIGKILLed twice at seeded random steps and rerun each time, ends with bitwise the
weights, optimizer state, dropout RNG state, evaluation history and predictions of
an uninterrupted run of that command. Dropout is on (the tiny encoder's default), so
the resumed runs must restore the seed generators as well as the optimizer and the
input position (`input_state="skip"`), across epoch boundaries (30 training rows,
batches of 4, 20 steps).
"""

import concurrent.futures
import json
import pathlib
import random
import re
import signal

import child_process
import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent


# The binary test's helpers (`_run`, `_write_reviews`, `_assert_whole`, its vocabulary),
# and tests/tasks/finetuning_test_helpers.py (`write_tiny_checkpoint`, TINY_ENCODER).
runner_test = child_process.import_by_path(
    "kbz_resume_test_run_finetuning", HERE / "test_run_finetuning.py"
)
import finetuning_test_helpers as helpers  # noqa: E402  (tests/tasks, put on the path by it)

STEPS = 20
CHECKPOINT_EVERY = 3  # not a divisor of EVAL_EVERY: resumes redo evaluations
EVAL_EVERY = 4
KILL_SEED = 2  # kills after steps 4 and 12 (CHECKPOINT_AND_EVAL_STEP)
FINAL_CHECKPOINT = f"checkpoints/ckpt-{STEPS:08d}"


# A step with both a checkpoint and an evaluation: a kill there used to land between the
# two, and the resumed run never redid that evaluation (Trainer saved the checkpoint
# first); the evaluation now comes first.
CHECKPOINT_AND_EVAL_STEP = 12


def _kill_steps():
    """Two distinct steps: a seeded random one, then a later one that is seeded random
    or the step with both a checkpoint and an evaluation, far enough after the first
    that the first rerun (resumed at a checkpoint at most a step or two past the first)
    still reaches it."""
    rng = random.Random(KILL_SEED)
    first = rng.randrange(CHECKPOINT_EVERY + 1, 8)
    second = rng.choice([CHECKPOINT_AND_EVAL_STEP, rng.randrange(first + 5, STEPS - 1)])
    return first, second


def _args(data_dir, checkpoint, output_dir):
    return [
        "--task=text_classification",
        "--mode=train_and_eval",
        f"--data_dir={data_dir}",
        "--train_file=reviews.tsv",
        "--heldout_fraction=0.25",
        f"--init_checkpoint={checkpoint}",
        f"--output_dir={output_dir}",
        "--max_seq_length=16",
        "--train_batch_size=4",
        f"--num_train_steps={STEPS}",
        "--learning_rate=5e-3",
        "--lr_schedule=constant",
        "--warmup_proportion=0",
        "--steps_per_loop=1",
        f"--checkpoint_every={CHECKPOINT_EVERY}",
        "--keep_checkpoints=2",
        f"--eval_every={EVAL_EVERY}",
        "--checkpoint_layouts=google",
        "--seed=7",
        "--progress=log",
    ]


def _resumed_step(output):
    found = re.findall(rf"Resuming at step (\d+) of {STEPS}", output)
    assert len(found) == 1, output[-3000:]
    return int(found[0])


def _checkpoint_state(output_dir):
    """Every variable of the final training checkpoint (model, dropout seed states,
    optimizer slots and iterations, global step) by checkpoint key, and its manifest."""
    import tensorflow as tf

    directory = output_dir / FINAL_CHECKPOINT
    reader = tf.train.load_checkpoint(str(directory / "state"))
    keys = sorted(k for k in reader.get_variable_to_shape_map() if "VARIABLE_VALUE" in k)
    metadata = json.loads((directory / "checkpoint.json").read_text(encoding="utf-8"))
    manifest = {k: metadata[k] for k in ("step", "model_variables", "optimizer_variables")}
    return {key: reader.get_tensor(key) for key in keys}, manifest


def _assert_same_weights(reference, resumed, what):
    assert [w.path for w in resumed] == [w.path for w in reference], what
    for old, new in zip(reference, resumed, strict=True):
        old, new = np.asarray(old.numpy()), np.asarray(new.numpy())
        assert old.dtype == new.dtype and old.shape == new.shape, (what, new)
        assert np.array_equal(old, new), f"{what}: {new.path} differs"


def _files(tmp_path):
    """`(data_dir, checkpoint)`: the reviews and a tiny google-layout checkpoint."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    runner_test._write_reviews(data_dir / "reviews.tsv")
    vocabulary = (
        runner_test.SPECIALS + runner_test.FILLERS + list(runner_test.KEYWORDS.values()) + ["."]
    )
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "bert", vocabulary, layout="google")
    return data_dir, checkpoint


@pytest.mark.slow
def test_twice_killed_run_ends_bitwise_as_the_uninterrupted_run(tmp_path):
    from keras_bert_zoo.tasks import load_finetuned

    data_dir, checkpoint = _files(tmp_path)
    reference_dir, resumed_dir = tmp_path / "uninterrupted", tmp_path / "resumed"

    # The uninterrupted run beside the killed ones (process start-up dominates both).
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    uninterrupted = pool.submit(runner_test._run, _args(data_dir, checkpoint, reference_dir))
    pool.shutdown(wait=False)

    first, second = _kill_steps()
    assert CHECKPOINT_EVERY < first < second < STEPS
    args = _args(data_dir, checkpoint, resumed_dir)
    code, output = runner_test._run(args, kill_after_step=first)
    assert code == -signal.SIGKILL, output[-3000:]
    assert "Resuming" not in output
    # A kill leaves only whole files (and dot-named temporaries).
    runner_test._assert_whole(resumed_dir)
    assert (resumed_dir / "checkpoints").is_dir()
    code, output = runner_test._run(args, kill_after_step=second)
    assert code == -signal.SIGKILL, output[-3000:]
    runner_test._assert_whole(resumed_dir)
    assert (resumed_dir / "best").is_dir()  # evaluated at step 8 at least
    resumed_first = _resumed_step(output)
    assert 0 < resumed_first < second, output[-3000:]
    code, output = runner_test._run(args)
    assert code == 0, output[-3000:]
    resumed_second = _resumed_step(output)
    assert resumed_first < resumed_second < STEPS, output[-3000:]

    code, output = uninterrupted.result()
    assert code == 0, output[-3000:]
    assert "Resuming" not in output

    # The whole training state of the final checkpoint, bitwise.
    reference_state, reference_manifest = _checkpoint_state(reference_dir)
    resumed_state, resumed_manifest = _checkpoint_state(resumed_dir)
    assert resumed_manifest == reference_manifest
    assert list(resumed_state) == list(reference_state)
    assert any("seed_generator_state" in str(v) for v in reference_manifest["model_variables"])
    for key, value in reference_state.items():
        assert value.dtype == resumed_state[key].dtype, key
        assert np.array_equal(value, resumed_state[key]), f"checkpoint {key} differs"

    # The fine-tuned model the run leaves, bitwise, every weight in the same order.
    reference_model = load_finetuned(str(reference_dir / "finetuned")).model
    resumed_model = load_finetuned(str(resumed_dir / "finetuned")).model
    _assert_same_weights(reference_model.weights, resumed_model.weights, "finetuned/")

    # The final metrics, every periodic evaluation and the best export's record, exactly.
    results = json.loads((resumed_dir / "eval_results.json").read_text(encoding="utf-8"))
    reference = json.loads((reference_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert results["step"] == STEPS and results["model"] == "final"
    assert [e["step"] for e in results["history"]] == list(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY))
    assert results == reference
    for name in ("best/metrics.json", "predictions/predictions_dev.jsonl"):
        assert (resumed_dir / name).read_bytes() == (reference_dir / name).read_bytes(), name
    # What the finished run leaves: whole files, a quarter of each label held out and
    # predicted, the exports, no temporaries.
    assert f"eval_results.json (step {STEPS}):" in output
    runner_test._assert_whole(resumed_dir)
    records = (resumed_dir / "predictions" / "predictions_dev.jsonl").read_text().splitlines()
    assert len(records) == 10
    for name in ("finetuned", "export_google"):
        assert (resumed_dir / name / "task.json").is_file(), name
    leftovers = list(resumed_dir.rglob(".*"))
    assert not leftovers, leftovers
