"""The training plateau of issue 45: what bounds a plain `compile()` + `fit()` on a CPU.

Issue 45 measured, on a 2-core AVX2 CPU (oneDNN off there by default), bert_mini,
batch 32, length 128, full rows of random ids: our `BertClassifier` and keras-hub's
`BertTextClassifier` under `compile()` + `fit()`, each with and without `jit_compile`,
all at 15.6 seq/s, Hugging Face torch eager 20.4. This script reproduces the four
configurations with `TF_ENABLE_ONEDNN_OPTS=0` and `=1` (a child process each,
alternated: `_onednn_runs.py`) and finds where the step's time goes:

- the fp32 matrix products alone: every matmul of one training step (forward, and the
  two of each in the backward pass, at the step's own shapes) run as one `tf.function`,
  as a graph and under XLA, and numpy's (OpenBLAS) rate on a 2048^3 product: the
  floor the step cannot go below with each kernel library;
- the four `fit()` configurations, ours through the library's `Trainer` too, and
  (`--hf`) Hugging Face torch eager;
- (`--profile`) TensorFlow's profiler over a few graph steps: the share of the step's
  time in each op type (`MatMul`/`BatchMatMulV2`/`_MklMatMul`/`_MklBatchMatMulV2`...).

Usage:
    PYTHONPATH=. python benchmarks/plateau_check.py [--rounds 2] [--hf] [--profile]
        [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks import _onednn_runs  # noqa: E402
from benchmarks._timing import format_table  # noqa: E402

LEARNING_RATE = 1e-4


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bert_mini_uncased")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=12, help="timed fit() steps per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats")
    parser.add_argument("--rounds", type=int, default=2, help="alternated runs per setting")
    parser.add_argument("--hf", action="store_true", help="also Hugging Face torch eager")
    parser.add_argument("--profile", action="store_true", help="op-type shares of a step")
    parser.add_argument("--quick", action="store_true", help="smoke run: bert_tiny, 1 round")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.preset, args.batch_size, args.steps, args.repeats, args.rounds = (
            "bert_tiny_uncased",
            8,
            3,
            1,
            1,
        )
    return args


# === The matrix products of one training step ===


def step_matmul_shapes(config, batch_size, seq_len):
    """`(batch, m, k, n, repeats)` of every matmul of a training step of the encoder:
    each dense layer's forward `x @ w` and its two backward products (`dy @ w.T`,
    `x.T @ dy`), and the attention's products (batched over examples and heads: scores
    `q @ k.T`, context `p @ v`) with theirs."""
    tokens = batch_size * seq_len
    hidden, inner, layers = config.hidden_size, config.intermediate_size, config.num_layers
    head = hidden // config.num_heads
    heads = batch_size * config.num_heads
    shapes = []
    for k, n, count in ((hidden, hidden, 4), (hidden, inner, 1), (inner, hidden, 1)):
        shapes += [(1, tokens, k, n, count * layers), (1, tokens, n, k, count * layers)]
        shapes += [(1, k, tokens, n, count * layers)]
    for m, k, n in ((seq_len, head, seq_len), (seq_len, seq_len, head)):
        shapes += [(heads, m, k, n, layers), (heads, m, n, k, layers), (heads, k, m, n, layers)]
    return shapes


def matmul_flops(shapes):
    return sum(2 * batch * m * k * n * repeats for batch, m, k, n, repeats in shapes)


def step_matmuls(tf, shapes, jit_compile):
    """A callable returning the seconds of one step's matmuls: each distinct product
    timed on its own (a `tf.function`, as a graph or under XLA; best of 3 after a
    warm-up), times its count."""
    rng = np.random.default_rng(0)
    products = []
    for batch, m, k, n, repeats in shapes:
        a = tf.constant(rng.standard_normal((batch, m, k)).astype("float32"))
        b = tf.constant(rng.standard_normal((batch, k, n)).astype("float32"))
        product = tf.function(
            lambda a=a, b=b: tf.reduce_sum(tf.linalg.matmul(a, b)), jit_compile=jit_compile
        )
        product().numpy()
        products.append((product, repeats))

    def run():
        return sum(
            repeats * min(_seconds(lambda p=product: p().numpy()) for _ in range(3))
            for product, repeats in products
        )

    return run


def numpy_rate(size=2048, repeats=5):
    a = np.random.default_rng(0).standard_normal((size, size)).astype("float32")
    a @ a
    best = min(_seconds(lambda: a @ a) for _ in range(repeats))
    return 2 * size**3 / best


def _seconds(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# === The four fit() configurations ===


def full_rows(config, count, seq_len, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, config.vocab_size, (count, seq_len)).astype("int32")
    ids[:, 0], ids[:, seq_len // 2 - 1], ids[:, -1] = 101, 102, 102
    x = {
        "input_word_ids": ids,
        "input_mask": np.ones((count, seq_len), "int32"),
        "input_type_ids": (np.arange(seq_len)[None, :] >= seq_len // 2)
        .repeat(count, 0)
        .astype("int32"),
    }
    return x, rng.integers(0, 2, count).astype("int32")


class StepClock:
    """A Keras callback keeping the end time of every training batch (wall clock and
    this process's CPU time)."""

    def __init__(self):
        import keras

        class Callback(keras.callbacks.Callback):
            def on_train_batch_end(inner, batch, logs=None):  # noqa: N805
                self.times.append((time.perf_counter(), time.process_time()))

        self.times: list[tuple[float, float]] = []
        self.callback = Callback()


def fit_config(model, x, y, batch_size, jit_compile, hub=False):
    """`run(steps) -> (seconds, CPU seconds) per step`: `model.fit` on a repeated
    dataset, one epoch of `steps` steps, timed from the first step's end to the last's
    (the first step, with its tracing and compilation, is left out)."""
    import keras
    import tensorflow as tf

    model.compile(
        optimizer=keras.optimizers.AdamW(LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    if hub:
        x = {
            "token_ids": x["input_word_ids"],
            "segment_ids": x["input_type_ids"],
            "padding_mask": x["input_mask"],
        }
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).repeat()

    def run(steps):
        clock = StepClock()
        model.fit(
            dataset, epochs=1, steps_per_epoch=steps + 1, verbose=0, callbacks=[clock.callback]
        )
        (wall_0, cpu_0), (wall_1, cpu_1) = clock.times[0], clock.times[-1]
        return (wall_1 - wall_0) / steps, (cpu_1 - cpu_0) / steps

    run(2)  # tracing, XLA compilation
    return run


def our_classifier(config):
    from keras_bert_zoo.models import BertClassifier, BertEncoder

    return BertClassifier(BertEncoder.from_bert_config(config), num_classes=2)


def hub_classifier(config):
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
    )
    return keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)


def trainer_config(config, x, y, batch_size, work_dir, jit_compile):
    """Our `Trainer` (the jobs' loop) on the same rows: `run(steps) -> seconds per step`."""
    import keras
    import tensorflow as tf

    from keras_bert_zoo.runners.loss_and_weights import model_loss_fn
    from keras_bert_zoo.training import OptimizerConfig, Trainer, create_optimizer

    model = our_classifier(config)
    model.compile(
        optimizer=create_optimizer(OptimizerConfig(learning_rate=LEARNING_RATE), 10**6),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    trainer = Trainer(
        model,
        model_dir=os.path.join(work_dir, f"trainer_{jit_compile}"),
        loss_fn=model_loss_fn(model),
        jit_compile=jit_compile,
        steps_per_loop=1,
        checkpoint_every=0,
        progress="none",
    )

    def dataset_fn(_):
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).repeat()

    trainer.train(dataset_fn, 2, input_state="skip")
    optimizer = trainer.optimizer

    def run(steps):
        optimizer._all_reduce_sum_gradients = list  # noqa: SLF001 (as Trainer.train sets it)
        try:
            trainer._train_loop(tf.constant(1, tf.int32))[0].numpy()  # noqa: SLF001
            start, cpu = time.perf_counter(), time.process_time()
            trainer._train_loop(tf.constant(steps, tf.int32))[0].numpy()  # noqa: SLF001
            return (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps
        finally:
            del optimizer._all_reduce_sum_gradients  # noqa: SLF001

    return run


def hf_config(config, x, y, batch_size):
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(
        transformers.BertConfig(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            num_hidden_layers=config.num_layers,
            num_attention_heads=config.num_heads,
            intermediate_size=config.intermediate_size,
            hidden_act="gelu_new",
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            num_labels=2,
            attn_implementation="eager",
        )
    ).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    feed = {
        "input_ids": torch.tensor(x["input_word_ids"][:batch_size], dtype=torch.long),
        "attention_mask": torch.tensor(x["input_mask"][:batch_size], dtype=torch.long),
        "token_type_ids": torch.tensor(x["input_type_ids"][:batch_size], dtype=torch.long),
        "labels": torch.tensor(y[:batch_size], dtype=torch.long),
    }

    def step():
        optimizer.zero_grad(set_to_none=True)
        model(**feed).loss.backward()
        optimizer.step()

    step()

    def run(steps):
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        return (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps

    return run


# === Profile ===


def op_type_shares(tf, run_steps, log_dir):
    """`{op type: share of the device's self time}` over `run_steps()`, from
    TensorFlow's profiler (its framework op statistics)."""
    import json

    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

    tf.profiler.experimental.start(log_dir)
    run_steps()
    tf.profiler.experimental.stop()
    paths = []
    for root, _, files in os.walk(log_dir):
        paths += [os.path.join(root, f) for f in files if f.endswith(".xplane.pb")]
    data, _ = _pywrap_profiler_plugin.xspace_to_tools_data(paths, "framework_op_stats", {})
    table = json.loads(data)
    if isinstance(table, list):  # [device table, host table]: the host runs the ops here
        table = table[-1]
    columns = [column["id"] for column in table["cols"]]
    shares: dict[str, float] = {}
    for row in table["rows"]:
        cells = dict(zip(columns, (cell.get("v") for cell in row["c"]), strict=False))
        if cells.get("host_or_device") not in (None, "Host", "Device"):
            continue
        kind = str(cells.get("type"))
        shares[kind] = shares.get(kind, 0.0) + float(cells.get("total_self_time") or 0.0)
    total = sum(shares.values()) or 1.0
    return {kind: value / total for kind, value in shares.items()}


def child(args):
    import keras
    import tensorflow as tf

    from keras_bert_zoo.config import BertConfig

    keras.utils.set_random_seed(0)
    config = BertConfig.from_preset(args.preset)
    print(
        f"tensorflow {tf.__version__}, keras {keras.__version__}; oneDNN "
        f"{_onednn_runs.onednn_reported()}",
        flush=True,
    )
    results = {}

    # The floor: the step's matmuls alone.
    shapes = step_matmul_shapes(config, args.batch_size, args.seq_len)
    flops = matmul_flops(shapes)
    matmuls = {
        "step's matmuls, graph": step_matmuls(tf, shapes, jit_compile=False),
        "step's matmuls, XLA": step_matmuls(tf, shapes, jit_compile=True),
    }
    seconds = {name: statistics.median(run() for _ in range(3)) for name, run in matmuls.items()}
    for name, value in seconds.items():
        results[f"{name} (GFLOP/s)"] = flops / value / 1e9
        results[f"{name} (s per step)"] = value
    results["numpy 2048^3 (GFLOP/s)"] = numpy_rate() / 1e9
    print(
        f"  one step's matmuls: {flops / 1e9:.1f} GFLOP; "
        + ", ".join(f"{name} {results[name]:.1f}" for name in results if "GFLOP" in name),
        flush=True,
    )

    x, y = full_rows(config, args.batch_size * 4, args.seq_len)
    with tempfile.TemporaryDirectory() as work_dir:
        runs = {
            "ours fit()": fit_config(our_classifier(config), x, y, args.batch_size, False),
            "ours fit(), jit_compile": fit_config(
                our_classifier(config), x, y, args.batch_size, True
            ),
            "keras-hub fit()": fit_config(
                hub_classifier(config), x, y, args.batch_size, False, hub=True
            ),
            "keras-hub fit(), jit_compile": fit_config(
                hub_classifier(config), x, y, args.batch_size, True, hub=True
            ),
            "ours Trainer": trainer_config(config, x, y, args.batch_size, work_dir, False),
            "ours Trainer, XLA": trainer_config(config, x, y, args.batch_size, work_dir, True),
        }
        if args.hf:
            runs["HF torch eager"] = hf_config(config, x, y, args.batch_size)
        per_step = {name: [] for name in runs}
        for repeat in range(args.repeats):
            names = list(runs)
            shift = repeat % len(names)
            for name in names[shift:] + names[:shift]:
                per_step[name].append(runs[name](args.steps))
        for name, timings in per_step.items():
            wall = [seconds for seconds, _ in timings]
            cpu = [seconds for _, seconds in timings]
            speed = args.batch_size / statistics.median(wall)
            results[f"{name} (seq/s)"] = speed
            results[f"{name} (seq/s, best)"] = args.batch_size / min(wall)
            results[f"{name} (seq per CPU-second)"] = args.batch_size / statistics.median(cpu)
            print(
                f"  {name}: {speed:.2f} seq/s (best {args.batch_size / min(wall):.2f}), "
                f"{args.batch_size / statistics.median(cpu):.2f} seq per CPU-second",
                flush=True,
            )
        step_floor = seconds["step's matmuls, graph"]
        ours = statistics.median(seconds for seconds, _ in per_step["ours fit()"])
        results["matmuls' share of ours fit() (graph rate)"] = step_floor / ours
        if args.profile:
            fit_run = runs["ours fit()"]
            shares = op_type_shares(
                tf, lambda: fit_run(args.steps), os.path.join(work_dir, "profile")
            )
            top = sorted(shares.items(), key=lambda item: -item[1])[:8]
            print(
                "  profile of ours fit(), self time by op type: "
                + ", ".join(f"{kind} {share:.0%}" for kind, share in top)
            )
            matmul_share = sum(
                share for kind, share in shares.items() if "MatMul" in kind or "Einsum" in kind
            )
            results["profiled matmul share of ours fit()"] = matmul_share
    _onednn_runs.report(results)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        child(args)
        return
    print(_onednn_runs.cpu_description())
    print(
        f"{args.preset}, batch {args.batch_size}, length {args.seq_len}, full rows; fit() "
        f"timed over {args.steps} steps x {args.repeats} interleaved repeats"
    )
    passed = (
        [
            f"--preset={args.preset}",
            f"--batch_size={args.batch_size}",
            f"--seq_len={args.seq_len}",
            f"--steps={args.steps}",
            f"--repeats={args.repeats}",
        ]
        + (["--hf"] if args.hf else [])
        + (["--profile"] if args.profile else [])
    )
    figures = _onednn_runs.alternate(os.path.abspath(__file__), passed, args.rounds)
    print("\nmedian (each round)")
    print(
        format_table(
            ["measure", "TF_ENABLE_ONEDNN_OPTS=0", "TF_ENABLE_ONEDNN_OPTS=1"],
            _onednn_runs.summary_rows(figures),
        )
    )


if __name__ == "__main__":
    main()
