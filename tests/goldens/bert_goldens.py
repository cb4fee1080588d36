"""BERT's golden files: today's BERT behaviour, recorded so that a refactor can prove it
changed nothing.

BERT is about to move behind a registry of encoder families (BERT, RoBERTa,
DistilBERT, ...), and BERT must stay bit for bit what it is. The goldens in `data/`
record, for a tiny BERT (`ENCODER_CONFIG` over `VOCABULARY`):

- `variables.json`: every model kind's variables (`"path dtype[shape]"`) in
  `model.weights` order (the order `.weights.h5` files and `randomize` rely on): the
  encoder, the pretrainer (masked LM + NSP), the sentence embedder (three head
  settings) and the model of every task `tasks.list_tasks()` registers.
- `checkpoints.json`: what `checkpoints.save_pretrained` writes for each of these
  models in google-research/bert's TF1 layout and in the Hugging Face layout: the
  files, each tensor's name, shape and dtype (not its values) and the config files.
- `outputs.json`: each model's outputs with weights drawn from a seeded numpy RNG
  (`randomize`) on fixed ids (`fixed_ids`: a padded batch with its mask), and the
  encoder's padding-free paths (`PaddingFreeEncoder`, `padding_free_inference`) on
  the same ids: per output its shape, dtype, sum, sum of absolute values and first
  8 values, rounded to 6 significant digits (`output_summary`). Compared to a
  relative 1e-5 (`differences`).
- `text.json`: `BertTokenizer`'s ids and offsets and `BertPreprocessor`'s packed ids
  for `SENTENCES`, `PAIRS` and `TRIPLES` (truncated both ways, padded both ways),
  over `VOCABULARY`: exact.
- `export_ops.json`: the multiset of op types of the `serving_default` signature's
  graph (its nodes and those of every function in its library) of three SavedModel
  exports: a sentence-pair classification task, the encoder, the sentence embedder.

`python tests/goldens/bert_goldens.py` recomputes them and prints each difference
(exit 1 if any); with `--write` it rewrites the files, only for an intended change.
tests/goldens/test_bert_goldens.py does the comparison in the test suite.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import pathlib
import sys
import tempfile
import zlib
from collections.abc import Iterator, Mapping

import numpy as np

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"
GOLDEN_FILES = (
    "variables.json",
    "checkpoints.json",
    "outputs.json",
    "text.json",
    "export_ops.json",
)
WRITE_COMMAND = "python tests/goldens/bert_goldens.py --write"

# Relative tolerance of the recorded floats (the seeded outputs); all else is exact.
RELATIVE_TOLERANCE = 1e-5
SIGNIFICANT_DIGITS = 6
FIRST_VALUES = 8

# 40 tokens: the special ones, whole words, continuation pieces, punctuation, an
# accented word and a CJK character, so that the tokenizer's cases are all reached.
VOCABULARY = (
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "quick",
    "brown",
    "fox",
    "jump",
    "##s",
    "##ed",
    "##ing",
    "over",
    "lazy",
    "dog",
    "a",
    "cat",
    "is",
    "on",
    "mat",
    "un",
    "##believ",
    "##able",
    "play",
    "run",
    "good",
    "bad",
    "movie",
    "it",
    "was",
    "very",
    ".",
    ",",
    "!",
    "?",
    "'",
    "cafe",
    "中",
    "he",
)
CLS_ID, SEP_ID = VOCABULARY.index("[CLS]"), VOCABULARY.index("[SEP]")
FIRST_WORD_ID = VOCABULARY.index("the")

ENCODER_CONFIG = {
    "vocab_size": len(VOCABULARY),
    "hidden_size": 16,
    "num_layers": 2,
    "num_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 64,
}

# The fixed ids: batch 3, length 10; the rows' real lengths (row 0 unpadded: the
# padding-free encoder reads the pooled output at position 0 of every row).
BATCH_LENGTHS = (10, 7, 4)
SEQUENCE_LENGTH = 10
MASKED_LM_POSITIONS = ((1, 4, 8), (2, 3, 5), (1, 2, 0))
MULTIPLE_CHOICES = 3
# The sentence-embedding task's model embeds groups of texts ([batch, texts, length]).
TEXTS_PER_GROUP = 2

# `create_task` keywords: the span tasks need a query shorter than the sequence.
TASK_OPTIONS = {
    "extractive_qa": {"max_seq_length": 48, "doc_stride": 16, "max_query_length": 16},
    "squad_v1.1": {"max_seq_length": 48, "doc_stride": 16, "max_query_length": 16},
    "squad_v2.0": {"max_seq_length": 48, "doc_stride": 16, "max_query_length": 16},
}
DEFAULT_TASK_OPTIONS = {"max_seq_length": 16}
# What a task otherwise reads from its training data (`Task.load_state`).
TASK_STATES = {
    "multiple_choice": {"num_choices": MULTIPLE_CHOICES},
    "text_classification": {"regression": False, "label_names": ["bad", "good", "neutral"]},
    "token_classification": {"tags": ["O", "B-ANIMAL", "I-ANIMAL"], "tag_scheme": "IOB2"},
}

# Sentence-embedder head settings beside the default (mean pooling, normalized).
SENTENCE_EMBEDDERS = {
    "sentence_embedder": {},
    "sentence_embedder/cls_projected": {
        "pooling": "cls",
        "embedding_dim": 8,
        "normalize": False,
    },
    "sentence_embedder/max": {"pooling": "max"},
}

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "the cat is on the mat",
    "It was unbelievable!",
    "A very good movie, very good.",
    "He was jumping, running and playing?",
    "THE QUICK BROWN FOX",
    "Café au lait",
    "中 中文",
    "",
    "   ",
    "dog's play",
    "supercalifragilistic",
    "the\tcat\nis  on\u00a0the mat",
    "bad bad bad bad bad bad bad bad bad bad bad bad bad bad",
    "un-believ-able",
    "jumped jumps jumping jump",
)
PAIRS = (
    ("The quick brown fox.", "The lazy dog."),
    ("It was a very good movie, it was very very good.", "bad"),
    ("cat", "the cat is on the mat and the dog is on the mat too"),
    ("", "the dog"),
    ("the fox jumps over the lazy dog again and again", "the cat jumps over the dog"),
    ("a good movie a good movie a good movie", "a bad movie a bad movie a bad movie"),
)
# Three segments: how the packer shares the length among more than two.
TRIPLES = (
    ("the quick brown fox", "jumps over", "the lazy dog"),
    ("a cat", "is on the mat on the mat on the mat", "it was very very good"),
    ("", "he", "the dog was running over the cat"),
)
TEXT_SEQUENCE_LENGTH = 12

# What the SavedModel exports are made of (`export_ops`).
EXPORT_TASK = "glue/mrpc"  # a sentence-pair classification task
EXPORT_SEQUENCE_LENGTH = 16
# Ops that call a function of the library by name: their type is that function's
# name, numbered by how many functions the process traced before.
LIBRARY_CALL = "<call of a library function>"


# === Models ===


def seed_of(name: str) -> int:
    """Each model's own seed, from its name (stable across processes and orders)."""
    return zlib.crc32(name.encode("utf-8"))


def randomize(model, seed: int, scale: float = 0.3):
    """Sets every weight from a seeded numpy RNG, in `model.weights` order (as
    tests/serving/serving_helpers.py does; a copy of it, so that a change to the
    serving helpers cannot move the goldens): layer-norm scales near 1, the rest
    0.3-scaled normal draws, so that outputs depend on every weight."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "seed_generator" in variable.path:
            continue
        shape = tuple(variable.shape)
        if "gamma" in variable.path:
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            value = scale * rng.standard_normal(shape)
        variable.assign(value.astype(variable.dtype))
    return model


def tiny_encoder():
    from keras_bert_zoo.models import BertEncoder

    return BertEncoder(**ENCODER_CONFIG)


def build_task(name: str):
    from keras_bert_zoo import tasks

    task = tasks.create_task(name, **TASK_OPTIONS.get(name, DEFAULT_TASK_OPTIONS))
    if name in TASK_STATES:
        task.load_state(TASK_STATES[name])
    return task


def build_models() -> dict[str, tuple[object, object]]:
    """`{kind: (task or None, model)}`: every model kind, each with a fresh encoder and
    its weights randomized from its own seed (`seed_of`)."""
    from keras_bert_zoo import tasks
    from keras_bert_zoo.models import BertPretrainer, BertSentenceEmbedder

    models = {
        "encoder": (None, tiny_encoder()),
        "pretrainer": (None, BertPretrainer(tiny_encoder())),
    }
    for name, arguments in SENTENCE_EMBEDDERS.items():
        models[name] = (None, BertSentenceEmbedder(tiny_encoder(), **arguments))
    for name in tasks.list_tasks():
        task = build_task(name)
        models[f"task/{name}"] = (task, task.build_model(tiny_encoder()))
    for name, (_, model) in models.items():
        randomize(model, seed_of(name))
    return models


def fixed_ids(middle: tuple[int, ...] = (), masked_lm_positions: bool = False) -> dict:
    """The inputs every model runs on: `[batch, *middle, length]` int32 ids of a padded
    batch (`BATCH_LENGTHS`, each further group member one token shorter, two at the
    least), [CLS] first and [SEP] last, type ids 1 for the second half of the real
    tokens."""
    shape = (len(BATCH_LENGTHS), *middle, SEQUENCE_LENGTH)
    word_ids = np.zeros(shape, np.int32)
    mask = np.zeros(shape, np.int32)
    type_ids = np.zeros(shape, np.int32)
    words = len(VOCABULARY) - FIRST_WORD_ID
    for index in np.ndindex(*shape[:-1]):
        length = max(2, BATCH_LENGTHS[index[0]] - sum(index[1:]))
        row = [FIRST_WORD_ID + (7 * sum(index) + 5 * t) % words for t in range(length)]
        row[0], row[-1] = CLS_ID, SEP_ID
        word_ids[index][:length] = row
        mask[index][:length] = 1
        type_ids[index][length // 2 : length] = 1
    ids = {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}
    if masked_lm_positions:
        ids["masked_lm_positions"] = np.array(MASKED_LM_POSITIONS, np.int32)
    return ids


def model_ids(model) -> dict:
    """`fixed_ids` shaped for `model`'s inputs (choices or text groups in the middle)."""
    inputs = model.input
    middle = tuple(inputs["input_word_ids"].shape[1:-1])
    if middle == (None,):  # the text-group embedder takes any number of texts
        middle = (TEXTS_PER_GROUP,)
    return fixed_ids(middle, masked_lm_positions="masked_lm_positions" in inputs)


# === Goldens ===


def tensor_type(dtype, shape) -> str:
    """`"float32[40,16]"`: one string, so that a golden file holds one line per tensor."""
    return f"{dtype}[{','.join(str(int(d)) for d in shape)}]"


def model_variables(models) -> dict:
    """`{kind: ["path float32[64,16]", ...]}` in `model.weights` order."""
    return {
        kind: [f"{v.path} {tensor_type(v.dtype, v.shape)}" for v in model.weights]
        for kind, (_, model) in models.items()
    }


def _google_checkpoint(directory: str) -> dict:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(os.path.join(directory, "bert_model.ckpt"))
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    return {name: tensor_type(dtypes[name].name, shapes[name]) for name in shapes}


def _huggingface_checkpoint(directory: str) -> dict:
    from safetensors import safe_open

    tensors = {}
    with safe_open(os.path.join(directory, "model.safetensors"), framework="np") as f:
        for name in f.keys():
            tensor = f.get_slice(name)
            tensors[name] = tensor_type(tensor.get_dtype(), tensor.get_shape())
        metadata = f.metadata()
    return {"tensors": tensors, "metadata": metadata}


def _written_checkpoint(model, directory: str, layout: str) -> dict:
    from keras_bert_zoo.checkpoints import save_pretrained

    try:
        save_pretrained(model, directory, format=layout)
    except Exception as error:  # a refusal is behaviour to keep too
        # Without the temporary directory's name, which changes from run to run.
        message = str(error).replace(directory, "<directory>")
        return {"error": f"{type(error).__name__}: {message}"}
    files = sorted(os.listdir(directory))
    configs = {}
    for name in files:
        if name.endswith(".json"):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                configs[name] = json.load(f)
    if layout == "google":
        written = {"tensors": _google_checkpoint(directory)}
    else:
        written = _huggingface_checkpoint(directory)
    return {"files": files, "configs": configs, **written}


def checkpoint_names(models, work_dir: str) -> dict:
    """`{kind: {layout: what save_pretrained wrote}}`: files, configs, and each
    tensor's name, shape and dtype, for both layouts the package writes."""
    goldens = {}
    for index, (kind, (_, model)) in enumerate(models.items()):
        goldens[kind] = {
            layout: _written_checkpoint(model, os.path.join(work_dir, f"{index}_{layout}"), layout)
            for layout in ("google", "huggingface")
        }
    return goldens


def _rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def output_summary(value) -> dict:
    """One output's shape, dtype, sum, sum of absolute values and first values."""
    array = np.asarray(value)
    wide = array.astype(np.float64)
    return {
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        "sum": _rounded(wide.sum()),
        "abs_sum": _rounded(np.abs(wide).sum()),
        "first_values": [_rounded(v) for v in wide.reshape(-1)[:FIRST_VALUES]],
    }


def _flat_outputs(outputs) -> dict:
    """A model's outputs as `{name: tensor}` (lists as `name_0`, `name_1`, ...)."""
    if not isinstance(outputs, Mapping):
        return {"output": outputs}
    flat = {}
    for name, value in outputs.items():
        if isinstance(value, list | tuple):
            flat.update({f"{name}_{index}": item for index, item in enumerate(value)})
        else:
            flat[name] = value
    return flat


def _summaries(outputs) -> dict:
    return {name: output_summary(value) for name, value in _flat_outputs(outputs).items()}


def seeded_outputs(models) -> dict:
    """`{kind: {output: output_summary}}` of every model on `fixed_ids`, and of the
    encoder's two padding-free paths."""
    from keras_bert_zoo.models import PaddingFreeEncoder
    from keras_bert_zoo.models.padding_free import padding_free_inference

    goldens = {}
    for kind, (_, model) in models.items():
        goldens[kind] = _summaries(model(model_ids(model), training=False))
    encoder = models["encoder"][1]
    ids = fixed_ids()
    # Its defaults: XLA on the real tokens, token counts in buckets of 64.
    goldens["encoder/padding_free"] = _summaries(PaddingFreeEncoder(encoder)(ids))
    # The route exports trace: a TensorFlow graph, no buckets.
    with padding_free_inference(encoder):
        goldens["encoder/padding_free_inference"] = _summaries(encoder(ids, training=False))
    return goldens


def _packed(outputs) -> dict:
    return {name: np.asarray(value).tolist() for name, value in sorted(outputs.items())}


def text_ids() -> dict:
    """The tokenizer's ids and offsets of `SENTENCES`, and the preprocessor's packing
    of `SENTENCES`, `PAIRS` and `TRIPLES` in each truncation and padding mode."""
    import tensorflow as tf

    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

    tokenizer = BertTokenizer(list(VOCABULARY), lowercase=True)
    sentences = tf.constant(list(SENTENCES))
    ids, starts, ends = tokenizer.tokenize_with_offsets(sentences)
    goldens = {
        "sentences": list(SENTENCES),
        "pairs": [list(pair) for pair in PAIRS],
        "triples": [list(triple) for triple in TRIPLES],
        "tokenizer": {
            "ids": tokenizer(sentences).to_list(),
            "offsets_ids": ids.to_list(),
            "offsets_starts": starts.to_list(),
            "offsets_ends": ends.to_list(),
        },
    }
    pairs = tuple(tf.constant(list(segment)) for segment in zip(*PAIRS, strict=True))
    triples = tuple(tf.constant(list(segment)) for segment in zip(*TRIPLES, strict=True))
    for truncate in ("longest_first", "round_robin"):
        for pad_to in ("fixed", "longest"):
            preprocessor = BertPreprocessor(
                tokenizer, sequence_length=TEXT_SEQUENCE_LENGTH, truncate=truncate, pad_to=pad_to
            )
            goldens[f"preprocessor/{truncate}/{pad_to}"] = {
                "sentences": _packed(preprocessor(sentences)),
                "pairs": _packed(preprocessor(pairs)),
                "triples": _packed(preprocessor(triples)),
            }
    return goldens


def _op_multiset(graph_def) -> dict[str, int]:
    library = {function.signature.name for function in graph_def.library.function}
    ops = [node.op for node in graph_def.node]
    for function in graph_def.library.function:
        ops.extend(node.op for node in function.node_def)
    return dict(collections.Counter(LIBRARY_CALL if op in library else op for op in ops))


def export_ops(models, work_dir: str) -> dict:
    """`{kind: {op type: count}}` of the `serving_default` graph of a SavedModel export
    of a sentence-pair classifier, the encoder and the sentence embedder."""
    import tensorflow as tf

    from keras_bert_zoo import serving
    from keras_bert_zoo.serving.servables import SentenceEmbeddingServable
    from keras_bert_zoo.text import BertTokenizer

    tokenizer = BertTokenizer(list(VOCABULARY), lowercase=True)
    sources = {
        f"task/{EXPORT_TASK}": models[f"task/{EXPORT_TASK}"],
        "encoder": (serving.EncoderServable(EXPORT_SEQUENCE_LENGTH), models["encoder"][1]),
        "sentence_embedder": (
            SentenceEmbeddingServable(EXPORT_SEQUENCE_LENGTH),
            models["sentence_embedder"][1],
        ),
    }
    goldens = {}
    for index, (kind, (servable, model)) in enumerate(sources.items()):
        exported = serving.export(
            serving.ModelSource(servable, model, tokenizer),
            os.path.join(work_dir, f"export_{index}"),
            model_name="bert_goldens",
            verify=False,  # the exporter's reload check: no part of the graph
        )
        signature = tf.saved_model.load(exported.path).signatures["serving_default"]
        goldens[kind] = _op_multiset(signature.graph.as_graph_def())
    return goldens


def compute_goldens() -> dict[str, dict]:
    """`{golden file name: content}` of every golden, computed now."""
    with float32_policy(), tempfile.TemporaryDirectory(prefix="bert_goldens_") as work_dir:
        models = build_models()
        computed = {
            "variables.json": model_variables(models),
            "checkpoints.json": checkpoint_names(models, work_dir),
            "outputs.json": seeded_outputs(models),
            "text.json": text_ids(),
            "export_ops.json": export_ops(models, work_dir),
        }
    return {name: computed[name] for name in GOLDEN_FILES}


@contextlib.contextmanager
def float32_policy():
    """The goldens are float32 BERT's, whatever global dtype policy an earlier test of
    the same process left."""
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


# === Files and comparison ===


def golden_path(name: str) -> pathlib.Path:
    return DATA_DIR / name


def dumps(content) -> str:
    return json.dumps(content, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def read_golden(name: str):
    with open(golden_path(name), encoding="utf-8") as f:
        return json.load(f)


def write_golden(name: str, content) -> None:
    """Writes a temporary file beside the golden, then renames it into place."""
    path = golden_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Beside the golden (one file system, so the rename is atomic); `open` gives it the
    # umask's mode, as the repository's other files.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(dumps(content))
    os.replace(temporary, path)


MISSING = "<missing>"
SUMMARY_KEYS = frozenset(("shape", "dtype", "sum", "abs_sum", "first_values"))


def _is_summary(value) -> bool:
    return isinstance(value, dict) and set(value) == SUMMARY_KEYS


def _close(expected: float, actual: float, scale: float) -> bool:
    """Within `RELATIVE_TOLERANCE` of the value, or of `scale` (the output's typical
    magnitude): a sum or a value near zero has a rounding error of the size of the
    terms, not of itself."""
    tolerance = RELATIVE_TOLERANCE * max(abs(expected), abs(actual), scale)
    return abs(expected - actual) <= tolerance


def _summary_differences(expected, actual, path) -> Iterator[tuple[str, object, object]]:
    for key in ("shape", "dtype"):
        if expected[key] != actual[key]:
            yield f"{path}[{key!r}]", expected[key], actual[key]
    if expected["shape"] != actual["shape"]:
        return
    size = max(1, math.prod(expected["shape"]))
    mean_abs = expected["abs_sum"] / size
    for key, scale in (("abs_sum", 0.0), ("sum", expected["abs_sum"])):
        if not _close(expected[key], actual[key], scale):
            yield f"{path}[{key!r}]", expected[key], actual[key]
    path = f"{path}['first_values']"
    wanted, got = expected["first_values"], actual["first_values"]
    if len(wanted) != len(got):
        yield path, wanted, got
        return
    for index, (want, have) in enumerate(zip(wanted, got, strict=True)):
        if not _close(want, have, mean_abs):
            yield f"{path}[{index}]", want, have


def differences(expected, actual, path: str = "") -> Iterator[tuple[str, object, object]]:
    """`(key path, expected, actual)` of each difference: the output summaries' floats
    to a relative `RELATIVE_TOLERANCE` (`_summary_differences`), all else exactly."""
    if _is_summary(expected) and _is_summary(actual):
        yield from _summary_differences(expected, actual, path)
    elif isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            yield from differences(
                expected.get(key, MISSING), actual.get(key, MISSING), f"{path}[{key!r}]"
            )
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path} (length {len(expected)} -> {len(actual)})", expected, actual
        else:
            for index, (want, have) in enumerate(zip(expected, actual, strict=True)):
                yield from differences(want, have, f"{path}[{index}]")
    elif type(expected) is not type(actual) or expected != actual:
        yield path, expected, actual


def _shown(value, limit: int = 300) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def describe_differences(name: str, expected, actual, limit: int = 20) -> str:
    """The differences of golden `name`, one line each, and how to rewrite it; ""
    when there are none."""
    found = list(differences(expected, actual))
    if not found:
        return ""
    path = golden_path(name)
    lines = [f"{path}: {len(found)} difference(s) from the golden BERT behaviour"]
    for key_path, want, have in found[:limit]:
        lines.append(f"  {key_path or '(root)'}: golden {_shown(want)}, now {_shown(have)}")
    if len(found) > limit:
        lines.append(f"  ... and {len(found) - limit} more")
    lines.append(
        f"Only if this change is intended, rewrite the goldens with `{WRITE_COMMAND}` "
        "and commit them with the change."
    )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write", action="store_true", help="rewrite the golden files (intended changes only)"
    )
    args = parser.parse_args(argv)
    goldens = compute_goldens()
    if args.write:
        for name, content in goldens.items():
            write_golden(name, content)
            print(f"wrote {golden_path(name)}")
        return 0
    failed = False
    for name, content in goldens.items():
        if not golden_path(name).is_file():
            print(f"{golden_path(name)}: missing; write it with `{WRITE_COMMAND}`")
            failed = True
            continue
        report = describe_differences(name, read_golden(name), content)
        print(report or f"{golden_path(name)}: same")
        failed = failed or bool(report)
    return 1 if failed else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
