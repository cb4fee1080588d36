"""Training-step speed (issue 8): our `Trainer` beside keras-hub `fit` and Hugging Face torch.

Three sections, bert_mini (4 layers, hidden 256), batch 32, sequence length 128, random
weights, dropout 0.1 and AdamW everywhere, one process:

- `cls_full`: classification on full rows (128 real tokens each);
- `cls_real`: classification on real Wikipedia sentences (gensim's excerpt, tokenized
  with the MiniLM uncased vocabulary, `_wiki_sentences.py`), about a quarter of 128
  real tokens per row;
- `pretrain`: the pretraining step on full rows with 20 masked positions per row, plus
  next-sentence prediction for ours and HF (keras-hub's `BertMaskedLM` has no NSP head).

Configurations (each step = forward, backward, optimizer update):

- ours: `Trainer` (the library's one training loop), as a graph (`jit_compile=False`,
  TensorFlow's oneDNN kernels where TensorFlow enables oneDNN) and with XLA. The loss
  function a job passes it for `BertClassifier` and `BertPretrainer`
  (`runners.loss_and_weights.model_loss_fn`) computes the last encoder block only at
  the positions the heads read (`keras_bert_zoo.models.head_positions`); "whole last
  block" is the same `Trainer` with `loss_fn=default_loss_fn` (`model(x)`), to show what
  that saves. On cls_real packed sequences (`--packed_sequences`: several sentences per
  row, block-diagonal attention), length-bucketed batches (sorted by length within
  windows of 4 batches of a shuffled stream) trimmed to their longest row, and rows
  padded to 128; on cls_full also our model under Keras' own `fit` step
  (`train_on_batch`), to show what the `Trainer` loop costs.
- keras-hub: `BertTextClassifier` / `BertMaskedLM`, `train_on_batch` (the step `fit`
  runs), default compile and `jit_compile=True`.
- HF torch: `BertForSequenceClassification` / `BertForPreTraining`, `torch.optim.AdamW`,
  rows padded to 128 and (cls_real) to the batch's longest row, as
  `DataCollatorWithPadding` does.
- bfloat16 (`--bf16`, on by default where the CPU has native bf16 matmuls: avx512_bf16
  or AMX): each side's documented mixed precision: ours and keras-hub with the
  `mixed_bfloat16` dtype policy, HF with `torch.autocast("cpu", dtype=torch.bfloat16)`
  (what `transformers.Trainer(bf16=True)` does on a CPU). Ratios are printed like for
  like (float32 against float32, bfloat16 against bfloat16) and across precisions.

keras-hub's preprocessor always pads to its `sequence_length`; on cls_real it is also
run on batches trimmed to their longest row, so that every peer gets its best shot.

Every configuration first runs over all its batches untimed (tracing; one XLA
compilation per distinct shape), then `--repeats` rounds each call every configuration
for `--steps_per_call` steps, in rotating order; numbers are medians. FLOP counts are
the useful work (real tokens only; the masked-LM projection for the 20 masked positions
only): 3x the forward matmul FLOPs (forward + two backward matmuls), attention over each
example's own tokens. The fp32 peak is measured here with a large `tf.matmul`; bf16 is
measured too (this CPU may emulate it: see the ISA line).

Usage:

```
PYTHONPATH=. python benchmarks/train_step.py                 # ~35 min on 2 cores
PYTHONPATH=. python benchmarks/train_step.py --quick         # smoke run, ~3 min
PYTHONPATH=. python benchmarks/train_step.py --sections cls_real --peers hf
```
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SECTIONS = ("cls_full", "cls_real", "pretrain")
PEERS = ("keras_hub", "hf")
PREDICTIONS = 20
LEARNING_RATE = 1e-4


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--peers", default=",".join(PEERS), help="keras_hub,hf or none")
    parser.add_argument("--preset", default="bert_mini_uncased")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--num_batches", type=int, default=8, help="distinct batches cycled")
    parser.add_argument("--steps_per_call", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--real_kind", default="single", choices=("single", "pairs"))
    parser.add_argument(
        "--bf16",
        default="auto",
        choices=("auto", "on", "off"),
        help="add ours and the peers in bfloat16 mixed precision (auto: where the CPU has "
        "native bf16 matmuls, avx512_bf16 or AMX)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny and short")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.sections = [s for s in args.sections.split(",") if s]
    args.peers = [p for p in args.peers.split(",") if p and p != "none"]
    for name in args.sections:
        if name not in SECTIONS:
            parser.error(f"--sections: unknown {name!r}; choose from {SECTIONS}")
    for name in args.peers:
        if name not in PEERS:
            parser.error(f"--peers: unknown {name!r}; choose from {PEERS}")
    args.bf16 = native_bf16() if args.bf16 == "auto" else args.bf16 == "on"
    if args.quick:
        args.preset = "bert_tiny_uncased"
        args.batch_size, args.num_batches = 8, 3
        args.steps_per_call, args.repeats = 1, 2
    return args


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return []


def native_bf16():
    """Whether this CPU multiplies bfloat16 natively (else oneDNN converts to fp32)."""
    return bool({"avx512_bf16", "amx_bf16"} & set(cpu_flags()))


# === Data ===


def full_rows(args, config, rng, predictions=0):
    """Random ids, every position real: `[CLS] A [SEP] B [SEP]` halves."""
    count, length = args.batch_size * args.num_batches, args.seq_len
    ids = rng.integers(1000, config.vocab_size, (count, length)).astype("int32")
    ids[:, 0], ids[:, length // 2 - 1], ids[:, -1] = 101, 102, 102
    x = {
        "input_word_ids": ids,
        "input_mask": np.ones((count, length), "int32"),
        "input_type_ids": (np.arange(length)[None, :] >= length // 2)
        .repeat(count, 0)
        .astype("int32"),
    }
    y = {"labels": rng.integers(0, 2, count).astype("int32")}
    if predictions:
        positions = np.sort(
            np.stack(
                [rng.choice(np.arange(1, length - 1), predictions, replace=False) for _ in ids]
            ),
            axis=1,
        ).astype("int32")
        x["masked_lm_positions"] = positions
        y = {
            "masked_lm_ids": np.take_along_axis(ids, positions, axis=1),
            "masked_lm_weights": np.ones((count, predictions), "float32"),
            "next_sentence_labels": y["labels"],
        }
        ids[np.arange(count)[:, None], positions] = 103  # [MASK]
    return x, y


def real_rows(args, rng):
    from benchmarks._wiki_sentences import read_sentences, sentence_examples

    count = args.batch_size * args.num_batches
    articles = read_sentences(max_sentences=max(4 * count, 2000))
    features = sentence_examples(
        articles, args.real_kind, count, sequence_length=args.seq_len, seed=args.seed
    )
    x = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    return x, {"labels": rng.integers(0, 2, count).astype("int32")}


def batches_of(x, y, batch_size):
    count = len(next(iter(y.values())))
    return [
        (
            {k: v[i : i + batch_size] for k, v in x.items()},
            {k: v[i : i + batch_size] for k, v in y.items()},
        )
        for i in range(0, count, batch_size)
    ]


def trim(batch, multiple=1):
    """A batch cut to its longest row (rounded up to `multiple`)."""
    x, y = batch
    longest = int(x["input_mask"].sum(1).max())
    longest = min(-(-longest // multiple) * multiple, x["input_mask"].shape[1])
    return {k: (v[:, :longest] if k != "masked_lm_positions" else v) for k, v in x.items()}, y


def length_bucketed_batches(x, y, batch_size, seed, window_batches=4):
    """Batches of similar lengths, trimmed to their longest row (a multiple of 16).

    As a shuffled training stream buckets them: the examples are shuffled, then sorted
    by length within windows of `window_batches` batches and cut into batches (the
    whole set sorted at once would be bucketing's unreachable best case).
    """
    rng = np.random.default_rng(seed)
    count = len(x["input_mask"])
    order = rng.permutation(count)
    window = window_batches * batch_size
    for start in range(0, count, window):
        part = order[start : start + window]
        order[start : start + window] = part[
            np.argsort(x["input_mask"][part].sum(1), kind="stable")
        ]
    batches = batches_of(
        {k: v[order] for k, v in x.items()}, {k: v[order] for k, v in y.items()}, batch_size
    )
    rng.shuffle(batches)
    return [trim(b, multiple=16) for b in batches]


# === FLOPs ===


def train_flops(config, lengths, predictions=0, pooled=True):
    """Useful training FLOPs of one batch: 3x the forward matmuls on real tokens."""
    hidden, inner, layers = config.hidden_size, config.intermediate_size, config.num_layers
    lengths = np.asarray(lengths, np.float64)
    per_token_layer = 2 * (4 * hidden * hidden + 2 * hidden * inner)
    attention = 2 * 2 * hidden * np.sum(lengths**2)  # scores and context per example
    forward = layers * (per_token_layer * lengths.sum() + attention)
    if pooled:
        forward += len(lengths) * 2 * hidden * hidden
    forward += len(lengths) * predictions * (2 * hidden * hidden + 2 * hidden * config.vocab_size)
    return 3 * forward


def matmul_peak(tf, dtype, size=2048, repeats=5):
    a = tf.random.normal([size, size], dtype=tf.float32)
    a, b = tf.cast(a, dtype), tf.cast(tf.transpose(a), dtype)

    @tf.function
    def chain():
        return tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32))

    chain().numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        chain().numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


# === Ours ===


def ours(
    args,
    model,
    batches,
    work_dir,
    name,
    jit_compile=False,
    packed_sequences=False,
    **trainer_kwargs,
):
    import tensorflow as tf

    from keras_bert_zoo.runners.loss_and_weights import model_loss_fn, packing_transform
    from keras_bert_zoo.training import OptimizerConfig, Trainer, create_optimizer

    # What a job passes the Trainer: its model's loss function, packing with packed rows.
    trainer_kwargs.setdefault("loss_fn", model_loss_fn(model, packed=packed_sequences))
    if packed_sequences:
        trainer_kwargs["dataset_transform"] = packing_transform()

    model.compile(
        optimizer=create_optimizer(OptimizerConfig(learning_rate=LEARNING_RATE), 10**6),
        loss=None if "masked_lm_ids" in batches[0][1] else _scce(),
    )
    shapes = {tuple(b[0]["input_word_ids"].shape) for b in batches}
    if len(shapes) == 1:
        x = {k: np.concatenate([b[0][k] for b in batches]) for k in batches[0][0]}
        y = {k: np.concatenate([b[1][k] for b in batches]) for k in batches[0][1]}
        y = y["labels"] if "labels" in y else y

        def dataset_fn(_):
            return tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch_size).repeat()

    else:  # batches of different lengths (bucketed, trimmed)

        def dataset_fn(_):
            def gen():
                for bx, by in batches:
                    yield bx, by["labels"]

            spec = (
                {k: tf.TensorSpec([None, None], tf.int32) for k in batches[0][0]},
                tf.TensorSpec([None], tf.int32),
            )
            return tf.data.Dataset.from_generator(gen, output_signature=spec).cache().repeat()

    trainer = Trainer(
        model,
        model_dir=os.path.join(work_dir, name.replace(" ", "_")),
        jit_compile=jit_compile,
        steps_per_loop=len(batches),
        checkpoint_every=0,
        progress="none",
        **trainer_kwargs,
    )
    # Every batch once, untimed: tracing and one XLA compilation per distinct shape.
    trainer.train(dataset_fn, len(batches), input_state="skip")
    optimizer = trainer.optimizer
    steps = tf.constant(args.steps_per_call, tf.int32)

    def run():
        # The loop `Trainer.train` runs between its host-side logging, called directly
        # so that each timed call is `steps_per_call` steps. `train` sets this hook
        # around its loop (the loop all-reduces gradients itself).
        optimizer._all_reduce_sum_gradients = list  # noqa: SLF001
        try:
            return trainer._train_loop(steps)[0].numpy()  # noqa: SLF001
        finally:
            del optimizer._all_reduce_sum_gradients  # noqa: SLF001

    return run


def keras_fit_step(args, model, batches):
    """Our model under Keras' own compiled train step (what `fit` runs), default compile."""
    import keras

    pretraining = "masked_lm_ids" in batches[0][1]
    model.compile(
        optimizer=keras.optimizers.AdamW(LEARNING_RATE),
        loss=None if pretraining else _scce(),
    )
    feeds = [(x, y if pretraining else y["labels"]) for x, y in batches]
    return _cycling(feeds, lambda f: model.train_on_batch(*f), args.steps_per_call)


def _scce():
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def our_classifier(config, dtype=None):
    from keras_bert_zoo.models import BertClassifier, BertEncoder

    return BertClassifier(BertEncoder.from_bert_config(config, dtype=dtype), num_classes=2)


def our_pretrainer(config, dtype=None):
    from keras_bert_zoo.models import BertEncoder, BertPretrainer

    return BertPretrainer(BertEncoder.from_bert_config(config, dtype=dtype))


# === keras-hub ===


def keras_hub_backbone(config, dtype=None):
    import keras_hub

    return keras_hub.models.BertBackbone(
        dtype=dtype,
        vocabulary_size=config.vocab_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
    )


def keras_hub_step(args, config, batches, jit_compile, masked_lm=False, dtype=None):
    """keras-hub's task model under its `fit` step; `dtype="mixed_bfloat16"` is its
    documented mixed precision (the backbone's dtype policy, which the task's head
    layers take from it)."""
    import keras
    import keras_hub

    backbone = keras_hub_backbone(config, dtype)
    if masked_lm:
        model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    else:
        model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    model.compile(
        optimizer=keras.optimizers.AdamW(LEARNING_RATE),
        loss=_scce(),
        jit_compile=jit_compile,
    )
    feeds = []
    for x, y in batches:
        hub_x = {
            "token_ids": x["input_word_ids"],
            "segment_ids": x["input_type_ids"],
            "padding_mask": x["input_mask"],
        }
        if masked_lm:
            hub_x["mask_positions"] = x["masked_lm_positions"]
            feeds.append((hub_x, y["masked_lm_ids"], y["masked_lm_weights"]))
        else:
            feeds.append((hub_x, y["labels"], None))
    return _cycling(feeds, lambda f: model.train_on_batch(*f), args.steps_per_call)


# === Hugging Face ===


def hf_config(config):
    import transformers

    return transformers.BertConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
        hidden_act="gelu_new",  # the tanh GELU, like ours and keras-hub's
        hidden_dropout_prob=config.hidden_dropout,
        attention_probs_dropout_prob=config.attention_dropout,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        num_labels=2,
    )


def hf_step(args, config, batches, pretraining=False, bf16=False):
    """HF torch training step; `bf16=True` runs the forward pass under
    `torch.autocast("cpu", dtype=torch.bfloat16)`, what `transformers.Trainer(bf16=True)`
    does on a CPU."""
    import contextlib

    import torch
    import transformers

    torch.manual_seed(args.seed)
    if pretraining:
        model = transformers.BertForPreTraining(hf_config(config))
    else:
        model = transformers.BertForSequenceClassification(hf_config(config))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    feeds = []
    for x, y in batches:
        feed = {
            "input_ids": torch.tensor(x["input_word_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(x["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(x["input_type_ids"], dtype=torch.long),
        }
        if pretraining:
            labels = np.full(x["input_word_ids"].shape, -100, np.int64)
            np.put_along_axis(labels, x["masked_lm_positions"], y["masked_lm_ids"], axis=1)
            feed["labels"] = torch.from_numpy(labels)
            feed["next_sentence_label"] = torch.from_numpy(y["next_sentence_labels"]).long()
        else:
            feed["labels"] = torch.from_numpy(y["labels"]).long()
        feeds.append(feed)

    def step(feed):
        optimizer.zero_grad(set_to_none=True)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with autocast:
            loss = model(**feed).loss
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return _cycling(feeds, step, args.steps_per_call)


def _cycling(feeds, step, steps_per_call):
    position = [0]

    def run_steps(count):
        for _ in range(count):
            step(feeds[position[0] % len(feeds)])
            position[0] += 1

    run_steps(len(feeds))  # untimed: tracing and compilation for every shape
    return lambda: run_steps(steps_per_call)


# === Running a section ===


def measure(args, configs, flops, batch_size):
    """configs: name -> callable of `steps_per_call` steps; flops: name -> per batch."""
    from benchmarks._timing import format_table, time_round_robin

    timings = time_round_robin(configs, warmup=1, repeats=args.repeats)
    rows, speeds = [], {}
    for name, timing in timings.items():
        per_step = timing.median / args.steps_per_call
        speeds[name] = batch_size / per_step
        achieved = flops[name] / per_step
        rows.append(
            [
                name,
                f"{speeds[name]:.{1 if speeds[name] >= 10 else 2}f}",  # bert_base: ~1.5
                f"{timing.spread:.0%}",
                f"{achieved / 1e9:.1f}",
                f"{achieved / PEAK['float32']:.0%}",
                f"{achieved / PEAK['bfloat16']:.0%}" if is_bf16(name) else "-",
            ]
        )
    header = ["configuration", "seq/s", "spread", "useful GFLOP/s", "of fp32 peak", "of bf16 peak"]
    print(format_table(header, rows), flush=True)
    return speeds


def is_bf16(name):
    return "bf16" in name


def ratios(speeds, targets):
    """Ours-best against each peer's best, with the issue's targets: like for like in
    float32, like for like in bfloat16 (when measured), and across precisions."""
    groups = [("float32", lambda name: not is_bf16(name))]
    if any(is_bf16(name) for name in speeds):
        groups += [("bfloat16", is_bf16), ("either precision", lambda name: True)]
    for label, keep in groups:
        subset = {k: v for k, v in speeds.items() if keep(k)}
        ours_best = max((v, k) for k, v in subset.items() if k.startswith("ours"))
        print(f"{label}: ours-best {ours_best[1]} ({ours_best[0]:.1f} seq/s)")
        for peer, target in targets.items():
            candidates = [(v, k) for k, v in subset.items() if k.startswith(peer)]
            if not candidates:
                continue
            best = max(candidates)
            ratio = ours_best[0] / best[0]
            verdict = "met" if ratio >= target else "NOT met"
            print(
                f"  ours-best / {best[1]} ({best[0]:.1f} seq/s) = {ratio:.2f}x "
                f"(target >= {target}x: {verdict})"
            )


PEAK = {}
BF16 = "mixed_bfloat16"


def default_loss_fn():
    """The `Trainer` loss function that runs the whole model (`model(x)`), every
    position of the last block included: what the head-positions default saves."""
    from keras_bert_zoo.training import default_loss_fn

    return default_loss_fn


def section_cls_full(args, config, rng, work_dir):
    x, y = full_rows(args, config, rng)
    batches = batches_of(x, y, args.batch_size)
    lengths = x["input_mask"][: args.batch_size].sum(1)
    configs = {
        "ours Trainer": ours(args, our_classifier(config), batches, work_dir, "full"),
        "ours Trainer XLA": ours(
            args, our_classifier(config), batches, work_dir, "full_xla", jit_compile=True
        ),
        "ours Trainer, whole last block": ours(
            args,
            our_classifier(config),
            batches,
            work_dir,
            "full_whole",
            loss_fn=default_loss_fn(),
        ),
        "ours BertClassifier, Keras fit step, default compile": keras_fit_step(
            args, our_classifier(config), batches
        ),
    }
    if args.bf16:
        configs["ours Trainer mixed_bf16"] = ours(
            args, our_classifier(config, BF16), batches, work_dir, "full_bf16"
        )
    if "keras_hub" in args.peers:
        configs["keras-hub fit step, default compile"] = keras_hub_step(
            args, config, batches, False
        )
        configs["keras-hub fit step, jit_compile"] = keras_hub_step(args, config, batches, True)
        if args.bf16:
            configs["keras-hub fit step, default compile, mixed_bf16"] = keras_hub_step(
                args, config, batches, False, dtype=BF16
            )
            configs["keras-hub fit step, jit_compile, mixed_bf16"] = keras_hub_step(
                args, config, batches, True, dtype=BF16
            )
    if "hf" in args.peers:
        configs["HF torch"] = hf_step(args, config, batches)
        if args.bf16:
            configs["HF torch, autocast bf16"] = hf_step(args, config, batches, bf16=True)
    flops = dict.fromkeys(configs, train_flops(config, lengths))
    speeds = measure(args, configs, flops, args.batch_size)
    ratios(speeds, {"keras-hub": 1.15, "HF": 1.0})


def section_cls_real(args, config, rng, work_dir):
    x, y = real_rows(args, rng)
    lengths = x["input_mask"].sum(1)
    print(
        f"{len(lengths)} Wikipedia {args.real_kind} examples: {lengths.mean():.1f} real tokens "
        f"of {args.seq_len} on average (median {np.median(lengths):.0f}, max {lengths.max()}); "
        f"{lengths.sum() / lengths.size / args.seq_len:.0%} of a padded batch is real",
        flush=True,
    )
    batches = batches_of(x, y, args.batch_size)
    flops_per_batch = train_flops(config, lengths) / args.num_batches
    configs = {
        "ours Trainer packed_sequences": ours(
            args, our_classifier(config), batches, work_dir, "packed", packed_sequences=True
        ),
        "ours Trainer XLA packed_sequences": ours(
            args,
            our_classifier(config),
            batches,
            work_dir,
            "packed_xla",
            jit_compile=True,
            packed_sequences=True,
        ),
        "ours Trainer length-bucketed batches": ours(
            args,
            our_classifier(config),
            length_bucketed_batches(x, y, args.batch_size, args.seed),
            work_dir,
            "bucketed",
        ),
        "ours Trainer padded to 128": ours(
            args, our_classifier(config), batches, work_dir, "padded"
        ),
    }
    if args.bf16:
        configs["ours Trainer packed_sequences, mixed_bf16"] = ours(
            args,
            our_classifier(config, BF16),
            batches,
            work_dir,
            "packed_bf16",
            packed_sequences=True,
        )
    if "keras_hub" in args.peers:
        trimmed = [trim(b) for b in batches]
        configs["keras-hub fit step, default compile, s128"] = keras_hub_step(
            args, config, batches, False
        )
        configs["keras-hub fit step, jit_compile, s128"] = keras_hub_step(
            args, config, batches, True
        )
        configs["keras-hub fit step, default compile, trimmed to longest"] = keras_hub_step(
            args, config, trimmed, False
        )
        if args.bf16:
            configs["keras-hub fit step, default compile, trimmed to longest, mixed_bf16"] = (
                keras_hub_step(args, config, trimmed, False, dtype=BF16)
            )
    if "hf" in args.peers:
        configs["HF torch, padded to the batch's longest"] = hf_step(
            args, config, [trim(b) for b in batches]
        )
        configs["HF torch, padded to 128"] = hf_step(args, config, batches)
        if args.bf16:
            configs["HF torch, padded to the batch's longest, autocast bf16"] = hf_step(
                args, config, [trim(b) for b in batches], bf16=True
            )
    flops = dict.fromkeys(configs, flops_per_batch)
    speeds = measure(args, configs, flops, args.batch_size)
    ratios(speeds, {"keras-hub": 1.5, "HF": 1.5})


def section_pretrain(args, config, rng, work_dir):
    x, y = full_rows(args, config, rng, predictions=PREDICTIONS)
    batches = batches_of(x, y, args.batch_size)
    lengths = x["input_mask"][: args.batch_size].sum(1)
    configs = {
        "ours Trainer BertPretrainer": ours(
            args, our_pretrainer(config), batches, work_dir, "pretrain"
        ),
        "ours Trainer XLA BertPretrainer": ours(
            args, our_pretrainer(config), batches, work_dir, "pretrain_xla", jit_compile=True
        ),
        "ours Trainer BertPretrainer, whole last block": ours(
            args,
            our_pretrainer(config),
            batches,
            work_dir,
            "pretrain_whole",
            loss_fn=default_loss_fn(),
        ),
    }
    if args.bf16:
        configs["ours Trainer BertPretrainer mixed_bf16"] = ours(
            args, our_pretrainer(config, BF16), batches, work_dir, "pretrain_bf16"
        )
        configs["ours Trainer XLA BertPretrainer mixed_bf16"] = ours(
            args,
            our_pretrainer(config, BF16),
            batches,
            work_dir,
            "pretrain_xla_bf16",
            jit_compile=True,
        )
    if "keras_hub" in args.peers:
        for jit_compile, mode in ((False, "default compile"), (True, "jit_compile")):
            configs[f"keras-hub BertMaskedLM fit step, {mode}"] = keras_hub_step(
                args, config, batches, jit_compile, masked_lm=True
            )
            if args.bf16:
                configs[f"keras-hub BertMaskedLM fit step, {mode}, mixed_bf16"] = keras_hub_step(
                    args, config, batches, jit_compile, masked_lm=True, dtype=BF16
                )
    if "hf" in args.peers:
        configs["HF torch BertForPreTraining"] = hf_step(args, config, batches, pretraining=True)
        if args.bf16:
            configs["HF torch BertForPreTraining, autocast bf16"] = hf_step(
                args, config, batches, pretraining=True, bf16=True
            )
    flops = dict.fromkeys(configs, train_flops(config, lengths, predictions=PREDICTIONS))
    speeds = measure(args, configs, flops, args.batch_size)
    ratios(speeds, {"keras-hub": 1.5, "HF": 3.0})


def describe_environment(args):
    import keras
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port

    print(
        f"python {platform.python_version()}, tensorflow {tf.__version__}, keras "
        f"{keras.__version__}; oneDNN {'ON' if _pywrap_util_port.IsMklEnabled() else 'OFF'} "
        f"(TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')})"
    )
    if "keras_hub" in args.peers:
        import keras_hub

        print(f"keras-hub {keras_hub.__version__}")
    if "hf" in args.peers:
        import torch
        import transformers

        print(
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"transformers {transformers.__version__}"
        )
    flags = cpu_flags()
    isa = [
        f
        for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")
        if f in flags
    ]
    print(f"CPUs visible: {os.cpu_count()}; CPU ISA: {' '.join(isa)}")
    if not native_bf16():
        print("  no avx512_bf16/AMX: bf16 matmuls are emulated (converted to fp32) here")
    print(f"bfloat16 configurations (--bf16 {'on' if args.bf16 else 'off'}): ours, keras-hub, HF")
    print(
        f"timing: median of {args.repeats} interleaved calls of {args.steps_per_call} step(s) "
        f"each, after one untimed pass over the {args.num_batches} batches of every configuration"
    )


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf

    from keras_bert_zoo.config import BertConfig

    describe_environment(args)
    PEAK["float32"] = matmul_peak(tf, tf.float32)
    PEAK["bfloat16"] = matmul_peak(tf, tf.bfloat16)
    print(
        f"measured matmul peak (2048^3 tf.matmul, best of 5): fp32 {PEAK['float32'] / 1e9:.1f} "
        f"GFLOP/s, bf16 {PEAK['bfloat16'] / 1e9:.1f} GFLOP/s",
        flush=True,
    )
    config = BertConfig.from_preset(args.preset)
    print(
        f"model: {args.preset} (L={config.num_layers}, H={config.hidden_size}), batch "
        f"{args.batch_size}, seq_len {args.seq_len}",
        flush=True,
    )
    rng = np.random.default_rng(args.seed)
    sections = {
        "cls_full": section_cls_full,
        "cls_real": section_cls_real,
        "pretrain": section_pretrain,
    }
    with tempfile.TemporaryDirectory() as work_dir:
        for name in args.sections:
            print(f"\n## {name}", flush=True)
            sections[name](args, config, rng, work_dir)
    # A busy moment at the start understates the peak (and overstates the fractions);
    # measured again at the end, the higher one is the peak.
    again = matmul_peak(tf, tf.float32)
    print(
        f"\nfp32 matmul peak measured again at the end: {again / 1e9:.1f} GFLOP/s"
        + (
            f"; the fractions above used {PEAK['float32'] / 1e9:.1f}: against this one, "
            f"multiply them by {PEAK['float32'] / again:.2f}"
            if again > PEAK["float32"]
            else ""
        )
    )


if __name__ == "__main__":
    main()
