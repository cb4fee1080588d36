"""Encoder forward throughput: ours beside keras-hub and Hugging Face, in one run.

Acceptance (issue 2): our `BertEncoder` is at least as fast as the fastest peer
configuration on the same machine, at bert_base batch 8 / seq 128 and bert_mini
batch 32 / seq 128.

For each shape, in one process, with the same random int32 inputs (ids with realistic
padding: every row has a random length between seq/2 and seq, `[CLS] A [SEP] B [SEP]`,
segment ids 1 on B, mask 0 on padding) and random weights, inference mode (dropout off)
everywhere:

- ours, `keras_bert_zoo.models.BertEncoder.untrained(preset)`:
  eager call; default `compile()` + `predict_on_batch` (Keras resolves `jit_compile="auto"`
  to off on a CPU-only machine); `compile(jit_compile=True)` + `predict_on_batch`;
  `tf.function(model.__call__, jit_compile=True)`; and `PaddingFreeEncoder(model)`, the
  same layers and weights run on the real tokens only (XLA), which gives the same
  outputs at real tokens and zeros at padded positions.
- keras-hub `keras_hub.models.BertBackbone`, built from the preset's sizes (no
  download), the same four modes.
- Hugging Face torch `transformers.BertModel(BertConfig(...))` (`hidden_act="gelu_new"`,
  the tanh GELU both Keras models use), `eval()` + `torch.inference_mode()`, with
  `attn_implementation="sdpa"` and `"eager"`.
- `--reviews`: instead, the CPU serving workload of issue 26 (`_minilm_reviews.py`): the
  real MiniLM on 64 real sentences, ours in float32 and `mixed_bfloat16` (graph, XLA,
  padding-free) beside Hugging Face torch float32, `torch.autocast(bfloat16)` (also
  under `torch.compile`) and ONNX Runtime's int8 MiniLM, with each one's cosine to
  Hugging Face float32.
- optionally (`--bf16`) ours under the `mixed_bfloat16` policy (default predict and XLA)
  as a sanity point; it is not counted as "ours best" (different numerics).

Timed calls of all configurations of a shape are interleaved (round robin) after every
configuration was warmed up, and each number is the median of `--repeats` calls. Prints a
table of sequences/s per model and mode, and the ratios ours-best / each peer
configuration and ours-best / fastest peer.

`TF_ENABLE_ONEDNN_OPTS` has to be set before TensorFlow is imported: `--onednn 0|1` sets
it, `--onednn default` (the default) leaves the environment alone. The run prints what was
set and whether TensorFlow reports oneDNN on.

Usage:
    python benchmarks/encoder_throughput.py [--shapes bert_base:8:128,bert_mini:32:128]
        [--repeats 7] [--warmup 2] [--onednn default|0|1] [--bf16] [--quick]
        [--peers ours,keras_hub,hf]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._timing import format_table, seq_per_s, time_round_robin  # noqa: E402

DEFAULT_SHAPES = "bert_base:8:128,bert_mini:32:128"
QUICK_SHAPES = "bert_mini:32:128"
PEERS = ("ours", "keras_hub", "hf")
CLS_ID, SEP_ID, FIRST_WORD_ID = 101, 102, 1000


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--shapes",
        default=None,
        help=f"comma-separated preset:batch:seq_len (default {DEFAULT_SHAPES}; "
        f"--quick: {QUICK_SHAPES})",
    )
    p.add_argument("--repeats", type=int, default=None, help="timed calls (default 7)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first (default 2)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: bert_mini only unless --shapes, 2 repeats, 1 warm-up",
    )
    p.add_argument(
        "--onednn",
        choices=("default", "0", "1"),
        default="default",
        help="TF_ENABLE_ONEDNN_OPTS to set before importing TensorFlow",
    )
    p.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"comma-separated subset of {','.join(PEERS)}",
    )
    p.add_argument(
        "--reviews",
        action="store_true",
        help="instead of the shapes: the real MiniLM on 64 real review sentences beside HF "
        "torch float32 / autocast bfloat16 / torch.compile and ONNX Runtime int8 "
        "(benchmarks/_minilm_reviews.py)",
    )
    p.add_argument(
        "--bf16",
        action="store_true",
        help="also time ours under mixed_bfloat16 (not counted as ours-best)",
    )
    p.add_argument("--no_hf_eager", action="store_true", help="skip HF eager attention")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.shapes is None:
        args.shapes = QUICK_SHAPES if args.quick else DEFAULT_SHAPES
    if args.repeats is None:
        args.repeats = 2 if args.quick else 7
    if args.warmup is None:
        args.warmup = 1 if args.quick else 2
    args.peers = [peer.strip() for peer in args.peers.split(",") if peer.strip()]
    unknown = set(args.peers) - set(PEERS)
    if unknown or "ours" not in args.peers:
        p.error(f"--peers must include ours and only name {PEERS}")
    shapes = []
    for spec in args.shapes.split(","):
        try:
            preset, batch, seq_len = spec.strip().split(":")
            shapes.append((preset, int(batch), int(seq_len)))
        except ValueError:
            p.error(f"bad shape {spec!r}, expected preset:batch:seq_len")
    args.shapes = shapes
    return args


def make_inputs(batch_size, seq_len, vocab_size, seed):
    """Random `[CLS] A [SEP] B [SEP] pad...` rows, lengths uniform in [seq/2, seq]."""
    import numpy as np

    rng = np.random.default_rng(seed)
    word_ids = np.zeros((batch_size, seq_len), np.int32)
    mask = np.zeros((batch_size, seq_len), np.int32)
    type_ids = np.zeros((batch_size, seq_len), np.int32)
    lengths = rng.integers(max(seq_len // 2, 5), seq_len + 1, size=batch_size)
    lengths[0] = seq_len  # at least one full row, as a padded batch always has
    for row, length in enumerate(lengths):
        word_ids[row, :length] = rng.integers(FIRST_WORD_ID, vocab_size, size=length)
        first_sep = int(rng.integers(2, length - 2))
        word_ids[row, 0] = CLS_ID
        word_ids[row, first_sep] = SEP_ID
        word_ids[row, length - 1] = SEP_ID
        mask[row, :length] = 1
        type_ids[row, first_sep + 1 : length] = 1
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


def keras_modes(model, inputs, tf, output_key):
    """The four Keras execution modes of one model, as zero-argument callables.

    Each returns only after the outputs are computed (numpy conversion).
    """
    tensors = {key: tf.constant(value) for key, value in inputs.items()}

    def eager():
        return model(tensors, training=False)[output_key].numpy()

    xla_call = tf.function(lambda x: model(x, training=False), jit_compile=True)

    def tf_function_xla():
        return xla_call(tensors)[output_key].numpy()

    # One model, two compiled predict functions: Keras builds the predict function once
    # per compile() with the jit decision baked in, so both are made up front and
    # swapped in before each predict_on_batch.
    # (make_predict_function stores the function; it does not always return it.)
    model.compile(jit_compile="auto")
    model.make_predict_function(force=True)
    predict_default = model.predict_function
    model.compile(jit_compile=True)
    model.make_predict_function(force=True)
    predict_xla = model.predict_function
    if predict_default is None or predict_xla is None or predict_default is predict_xla:
        raise RuntimeError("could not capture the two Keras predict functions")

    def predict_on_batch(function):
        def run():
            model.predict_function = function
            return model.predict_on_batch(inputs)[output_key]

        return run

    return {
        "eager call": eager,
        "compile() + predict_on_batch": predict_on_batch(predict_default),
        "compile(jit_compile=True) + predict_on_batch": predict_on_batch(predict_xla),
        "tf.function(jit_compile=True)": tf_function_xla,
    }


def build_ours(config, inputs, tf, dtype=None):
    from keras_bert_zoo.models import BertEncoder, PaddingFreeEncoder

    model = BertEncoder.from_bert_config(config, dtype=dtype)
    model(inputs, training=False)
    modes = keras_modes(model, inputs, tf, "sequence_output")
    padding_free = PaddingFreeEncoder(model)
    tensors = {key: tf.constant(value) for key, value in inputs.items()}
    modes["PaddingFreeEncoder (XLA)"] = lambda: padding_free(tensors)["sequence_output"].numpy()
    return model, modes


def build_keras_hub(config, inputs, tf):
    import keras_hub

    if config.hidden_act != "gelu_approximate":
        raise ValueError("keras-hub's BertBackbone always uses the tanh GELU")
    model = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
    )
    hub_inputs = {
        "token_ids": inputs["input_word_ids"],
        "segment_ids": inputs["input_type_ids"],
        "padding_mask": inputs["input_mask"],
    }
    model(hub_inputs, training=False)
    return model, keras_modes(model, hub_inputs, tf, "sequence_output")


def build_hf(config, inputs, attention):
    import torch
    import transformers

    hf_act = {"gelu_approximate": "gelu_new", "gelu": "gelu"}.get(
        config.hidden_act, config.hidden_act
    )
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
        hidden_act=hf_act,
        hidden_dropout_prob=config.hidden_dropout,
        attention_probs_dropout_prob=config.attention_dropout,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        layer_norm_eps=config.layer_norm_epsilon,
        initializer_range=config.initializer_range,
        attn_implementation=attention,
    )
    model = transformers.BertModel(hf_config).eval()
    tensors = {
        "input_ids": torch.from_numpy(inputs["input_word_ids"]).long(),
        "attention_mask": torch.from_numpy(inputs["input_mask"]).long(),
        "token_type_ids": torch.from_numpy(inputs["input_type_ids"]).long(),
    }

    def run():
        with torch.inference_mode():
            return model(**tensors).last_hidden_state

    return model, run


def count_params(model):
    if hasattr(model, "count_params"):
        return model.count_params()
    return sum(p.numel() for p in model.parameters())


def describe_environment(args, onednn_set):
    import keras
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port

    lines = [
        f"python {platform.python_version()}, tensorflow {tf.__version__}, "
        f"keras {keras.__version__} ({keras.backend.backend()})",
        f"TF_ENABLE_ONEDNN_OPTS: {onednn_set}; TensorFlow reports oneDNN "
        f"{'ON' if _pywrap_util_port.IsMklEnabled() else 'OFF'}",
        f"CPUs visible: {os.cpu_count()}, TF intra/inter op threads: "
        f"{tf.config.threading.get_intra_op_parallelism_threads()}/"
        f"{tf.config.threading.get_inter_op_parallelism_threads()} (0 = default)",
        f"timing: median of {args.repeats} interleaved calls after {args.warmup} warm-up "
        f"call(s) per configuration",
    ]
    if "keras_hub" in args.peers and not args.reviews:
        try:
            import keras_hub
        except ImportError:
            lines.append("keras-hub: not installed")
        else:
            lines.append(f"keras-hub {keras_hub.__version__}")
    if "hf" in args.peers:
        import torch
        import transformers

        lines.append(
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"transformers {transformers.__version__}"
        )
    try:
        with open("/proc/cpuinfo") as f:
            flags = next(line for line in f if line.startswith("flags")).split()
        isa = [
            f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16") if f in flags
        ]
        lines.append(f"CPU ISA: {' '.join(isa)}")
    except (OSError, StopIteration):
        pass
    return lines


def benchmark_shape(args, preset, batch_size, seq_len, tf):
    from keras_bert_zoo.config import BertConfig

    config = BertConfig.from_preset(preset)
    inputs = make_inputs(batch_size, seq_len, config.vocab_size, args.seed)
    shape = f"{preset} b{batch_size} s{seq_len}"
    real = inputs["input_mask"].sum() / inputs["input_mask"].size
    print(f"\n=== {shape}: {real:.0%} of positions are real tokens ===", flush=True)

    configs = {}  # (model, mode) -> callable
    params = {}
    keep_alive = []
    start = time.perf_counter()
    model, modes = build_ours(config, inputs, tf)
    keep_alive.append(model)
    params["ours"] = count_params(model)
    configs.update({("ours", mode): fn for mode, fn in modes.items()})
    if args.bf16:
        model, modes = build_ours(config, inputs, tf, dtype="mixed_bfloat16")
        keep_alive.append(model)
        for mode in ("compile() + predict_on_batch", "tf.function(jit_compile=True)"):
            configs[("ours mixed_bfloat16", mode)] = modes[mode]
    if "keras_hub" in args.peers:
        model, modes = build_keras_hub(config, inputs, tf)
        keep_alive.append(model)
        params["keras-hub BertBackbone"] = count_params(model)
        configs.update({("keras-hub BertBackbone", mode): fn for mode, fn in modes.items()})
    if "hf" in args.peers:
        attentions = ["sdpa"] if args.no_hf_eager else ["sdpa", "eager"]
        for attention in attentions:
            model, fn = build_hf(config, inputs, attention)
            keep_alive.append(model)
            params["HF torch BertModel"] = count_params(model)
            configs[("HF torch BertModel", f"inference_mode, {attention} attention")] = fn
    print(
        f"built {len(keep_alive)} models in {time.perf_counter() - start:.1f}s; parameters: "
        + ", ".join(f"{name} {count:,}" for name, count in params.items()),
        flush=True,
    )

    def on_warmed(key, seconds):
        first = f"{seconds[0]:.2f}s" if seconds else "-"
        print(f"  warmed up {key[0]}, {key[1]}: first call {first}", flush=True)

    timings = time_round_robin(configs, args.warmup, args.repeats, on_warmed=on_warmed)
    del keep_alive, configs
    gc.collect()

    rows = []
    for (name, mode), timing in timings.items():
        rows.append(
            dict(
                model=name,
                mode=mode,
                shape=shape,
                seq_s=seq_per_s(batch_size, timing.median),
                best_seq_s=seq_per_s(batch_size, timing.best),
                spread=timing.spread,
                cpu_s=timing.cpu_median,
            )
        )
    return rows


def report(rows):
    shapes = list(dict.fromkeys(row["shape"] for row in rows))
    print(
        "\n## Sequences per second (median wall time; best call; spread = (max-min)/median;"
        " CPU s = median process CPU seconds per call, all threads)\n"
    )
    print(
        format_table(
            ["model", "mode", "shape", "seq/s", "best seq/s", "spread", "CPU s/call"],
            [
                [
                    r["model"],
                    r["mode"],
                    r["shape"],
                    f"{r['seq_s']:.2f}",
                    f"{r['best_seq_s']:.2f}",
                    f"{r['spread']:.0%}",
                    f"{r['cpu_s']:.3f}",
                ]
                for r in rows
            ],
        )
    )
    print("\n## Ours-best / peer (> 1: ours faster)\n")
    ratio_rows = []
    verdicts = []
    for shape in shapes:
        shape_rows = [r for r in rows if r["shape"] == shape]
        ours = [r for r in shape_rows if r["model"] == "ours"]
        peers = [r for r in shape_rows if not r["model"].startswith("ours")]
        best = max(ours, key=lambda r: r["seq_s"])
        for peer in sorted(peers, key=lambda r: -r["seq_s"]):
            ratio_rows.append(
                [
                    shape,
                    f"ours, {best['mode']}",
                    f"{peer['model']}, {peer['mode']}",
                    f"{best['seq_s'] / peer['seq_s']:.2f}",
                ]
            )
        if peers:
            fastest = max(peers, key=lambda r: r["seq_s"])
            ratio = best["seq_s"] / fastest["seq_s"]
            verdicts.append(
                f"{shape}: ours-best ({best['mode']}, {best['seq_s']:.2f} seq/s) / fastest "
                f"peer ({fastest['model']}, {fastest['mode']}, {fastest['seq_s']:.2f} seq/s)"
                f" = {ratio:.2f} -> {'MET' if ratio >= 1.0 else 'NOT MET'}"
            )
            # The same comparison on the fastest single call and on CPU seconds per call,
            # which a loaded machine disturbs less than the median wall time.
            best_call = max(r["best_seq_s"] for r in ours) / max(r["best_seq_s"] for r in peers)
            cpu = min(r["cpu_s"] for r in peers) / min(r["cpu_s"] for r in ours)
            verdicts.append(
                f"    cross-checks: on each configuration's fastest call {best_call:.2f}; "
                f"on CPU seconds per call (fewest peer / fewest ours) {cpu:.2f}"
            )
    if ratio_rows:
        print(format_table(["shape", "ours best", "peer", "ratio"], ratio_rows))
    print("\n## Target: ours-best >= fastest peer configuration\n")
    for line in verdicts:
        print(line)


def main(argv=None):
    args = parse_args(argv)
    # Must happen before TensorFlow is imported anywhere in this process.
    if args.onednn != "default":
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = args.onednn
    onednn_set = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset (TensorFlow's default)")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import tensorflow as tf

    print("# Encoder forward throughput")
    for line in describe_environment(args, onednn_set):
        print(line)
    if args.reviews:
        from benchmarks import _minilm_reviews

        rows = _minilm_reviews.run_workload(repeats=args.repeats)
        _minilm_reviews.report(rows)
        return
    rows = []
    for preset, batch_size, seq_len in args.shapes:
        rows.extend(benchmark_shape(args, preset, batch_size, seq_len, tf))
    report(rows)


if __name__ == "__main__":
    main()
