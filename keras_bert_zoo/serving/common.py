"""What every export format shares.

* The options most formats take: `OUTPUT_DIR`, `OVERWRITE`, `VERIFY`, `TOKENIZER_OPS`,
  `TRUNCATE_DIM` (what `Servable.serving_model` cuts an embedding model's vectors to).
* The warmup texts: `DEFAULT_WARMUP_TEXTS`, the batch every export is checked on (and
  a SavedModel's warmup requests, unless others are given).
* `serving_preprocessor`: the preprocessor an export runs (padding to the longest
  input of a request).
* `reference_run`: the task's serving function run eagerly on the Keras model through
  a `RecordingModel`, which keeps the ids the model got: the answers and ids an
  export must reproduce. `output_problems` compares.
* `publish_directory`: an export written under a temporary name and renamed into place
  once complete and verified, so it appears whole or not at all; an existing one is
  never touched unless asked.
* The description (`export.json`): the served task's fields, and a SavedModel's
  `assets.extra/` manifests (`write_export_manifests`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.serving import ops, signatures
from keras_bert_zoo.serving.exporter import Option
from keras_bert_zoo.serving.layout import DESCRIPTION_FILE
from keras_bert_zoo.text.tokenizer import DEFAULT_EXPORT_TOKENIZER_OPS, TOKENIZER_OPS
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically
from keras_bert_zoo.utils.errors import UserError

FORMAT_VERSION = 1

OUTPUT_DIR = Option(
    "output_dir", None, "hub_encoder_pair, --format=litert|onnx: the output directory."
)
OVERWRITE = Option(
    "overwrite", False, "Replace an existing export (a version directory, --output_dir).", type=bool
)
VERIFY = Option(
    "verify",
    True,
    "Load the export back and compare its answers with the in-memory model's before publishing it.",
    type=bool,
    flag=False,
)
TOKENIZER_OPS = Option(
    "tokenizer_ops",
    DEFAULT_EXPORT_TOKENIZER_OPS,
    "Ops of the exported tokenizer: core (core TensorFlow only, so the export loads "
    "where tensorflow-text is not installed) or tensorflow_text (its WordPiece kernels). "
    "Both give the same tokens.",
    choices=TOKENIZER_OPS,
)

TRUNCATE_DIM = Option(
    "truncate_dim",
    None,
    "Embedding models: keep the vectors' first N components, normalised again when the "
    "model normalises (a Matryoshka model's cut; default: all).",
    type=int,
)

# === Warmup texts ===

# Rows of the default warmup batch; field j of row i takes text (i + j) % len. They
# cover the paths a server meets early: plain ASCII, accents and CJK (the tokenizer's
# exact path), an empty string, a mask token, and a text over any sequence length
# (truncation, SQuAD windows).
DEFAULT_WARMUP_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Café naïve résumé: 中文 and emoji 🙂 in one sentence.",
    "",
    "Paris is the capital of [MASK].",
    " ".join(["A long text that goes on and on, well past the sequence length."] * 40),
)


def default_warmup_inputs(text_fields: Sequence[str], rows: int | None = None) -> dict:
    """`{field: [texts]}` of the default warmup batch (`DEFAULT_WARMUP_TEXTS`)."""
    rows = len(DEFAULT_WARMUP_TEXTS) if rows is None else rows
    texts = DEFAULT_WARMUP_TEXTS
    return {
        field: [texts[(row + column) % len(texts)] for row in range(rows)]
        for column, field in enumerate(text_fields)
    }


def check_warmup_inputs(text_fields, inputs: Mapping[str, Sequence]) -> dict[str, list]:
    """`inputs` as `{field: list}` when they hold exactly `text_fields`, each the same,
    non-zero number of texts; else a `UserError`."""
    missing = [field for field in text_fields if field not in inputs]
    extra = sorted(set(inputs) - set(text_fields))
    if missing or extra:
        raise UserError(
            f"warmup_inputs must have exactly the text fields {list(text_fields)} "
            f"(missing {missing}, unexpected {extra})"
        )
    lengths = {field: len(inputs[field]) for field in text_fields}
    if len(set(lengths.values())) != 1 or not next(iter(lengths.values())):
        raise UserError(
            f"warmup_inputs: every field needs the same, non-zero number of texts ({lengths})"
        )
    return {field: list(inputs[field]) for field in text_fields}


def warmup_inputs_from_rows(text_fields, rows, source: str = "warmup rows") -> dict:
    """`{field: [texts]}` from rows of texts in `text_fields` order (a TSV's lines)."""
    fields = tuple(text_fields)
    columns: dict[str, list] = {field: [] for field in fields}
    for number, row in enumerate(rows, start=1):
        if len(row) != len(fields):
            raise UserError(
                f"{source}, row {number}: {len(row)} texts for the fields {list(fields)}"
            )
        for field, text in zip(fields, row, strict=True):
            columns[field].append(text)
    return columns


def read_warmup_file(path: str, text_fields) -> dict:
    """`{field: [texts]}` of a UTF-8 TSV, one text field a column in `text_fields` order."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip("\n")]
    if not rows:
        raise UserError(f"--warmup_file={path}: no rows")
    return warmup_inputs_from_rows(text_fields, rows, path)


# === The reference: what the Keras model answers ===


def serving_preprocessor(preprocessor):
    """The preprocessor the export runs: a fixed-length `BertPreprocessor` becomes one
    padding to the longest input of each request (same answers, and a short request
    no longer pays for `max_seq_length` positions); any other layer as given."""
    from keras_bert_zoo.text.preprocessor import BertPreprocessor

    if type(preprocessor) is BertPreprocessor and preprocessor.packer.pad_to == "fixed":
        return BertPreprocessor(
            preprocessor.tokenizer,
            sequence_length=preprocessor.sequence_length,
            truncate=preprocessor.packer.truncate,
            pad_to="longest",
        )
    return preprocessor


class RecordingModel:
    """Stands in for the model in an eager call of the task's serving function and
    keeps the inputs each call of the model got (the ids a `serve_ids` request sends)."""

    def __init__(self, model):
        self._model = model
        self.calls: list[dict[str, np.ndarray]] = []

    def __call__(self, inputs, *args, **kwargs):
        self.calls.append({key: np.asarray(value) for key, value in dict(inputs).items()})
        return self._model(inputs, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


def string_array(values) -> np.ndarray:
    """Texts (str or bytes) as a numpy array of UTF-8 bytes."""
    return np.array(
        [value.encode("utf-8") if isinstance(value, str) else bytes(value) for value in values],
        dtype=object,
    )


def numpy_outputs(outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {key: np.asarray(value) for key, value in outputs.items()}


@dataclasses.dataclass(frozen=True)
class ReferenceRun:
    """The Keras model's answers to a batch of texts, and the ids behind them.

    Attributes:
        texts: `{field: [batch] bytes}`, the texts.
        answers: `{answer: array}`, what the task's serving function answered.
        ids: `{model input: array}` of the model's first call, or None when the serving
            function never called it.
        outputs: `{output: array}`, the model's flat outputs on `ids`
            (`signatures.flatten_outputs`), or None.
    """

    texts: dict[str, np.ndarray]
    answers: dict[str, np.ndarray]
    ids: dict[str, np.ndarray] | None
    outputs: dict[str, np.ndarray] | None


def reference_run(
    task, model, preprocessor, texts: Mapping[str, Sequence] | None = None
) -> ReferenceRun:
    """The task's serving function run eagerly on `model` over `texts` (default the
    warmup batch `DEFAULT_WARMUP_TEXTS`), through `serving_preprocessor(preprocessor)`
    and with invalid UTF-8 replaced, as an export runs it.

    Args:
        task: the `tasks.servable.Servable`.
        model: its Keras model.
        preprocessor: the task's preprocessor (`task.make_preprocessor(tokenizer)`).
        texts: `{field: [texts]}` in the task's text fields.
    """
    fields = tuple(task.text_fields)
    texts = texts or default_warmup_inputs(fields)
    feed = {field: string_array(texts[field]) for field in fields}
    recorder = RecordingModel(model)
    answer = signatures.replace_invalid_utf8(
        task.serving_outputs(recorder, serving_preprocessor(preprocessor))
    )
    answers = numpy_outputs(
        signatures._check_outputs(
            answer(**{field: tf.constant(value) for field, value in feed.items()}),
            "serving_outputs",
        )
    )
    if not recorder.calls:
        return ReferenceRun(feed, answers, None, None)
    ids = {name: recorder.calls[0][name] for name in signatures.model_input_specs(model)}
    outputs = numpy_outputs(signatures.flatten_outputs(model(ids, training=False)))
    return ReferenceRun(feed, answers, ids, outputs)


def output_problems(
    expected: Mapping[str, np.ndarray],
    got: Mapping[str, np.ndarray],
    what: str | None = None,
    *,
    atol: float = 1e-5,
    close: bool = True,
    finite: bool = False,
) -> list[str]:
    """What differs between `got` and `expected` (`{name: array}`), one line each.

    Args:
        what: a prefix naming the outputs (`serving_default`), or None.
        atol: float. Floats must agree to `atol` plus 1e-4 relative (NaN equals NaN).
        close: bool. Compare the values; False: shapes (and `finite`) only.
        finite: bool. Every value of `got` must be finite.
    """

    def label(key):
        return f"{what}/{key}" if what else key

    if sorted(expected) != sorted(got):
        where = f"{what}: " if what else ""
        return [f"{where}outputs {sorted(got)} where {sorted(expected)} were expected"]
    problems = []
    for key in expected:
        want, have = np.asarray(expected[key]), np.asarray(got[key])
        if want.shape != have.shape:
            problems.append(f"{label(key)}: shape {have.shape}, expected {want.shape}")
        elif finite and not np.all(np.isfinite(have)):
            problems.append(f"{label(key)}: not finite")
        elif not close:
            continue
        elif want.dtype.kind in "fc":
            if not np.allclose(want, have, rtol=1e-4, atol=atol, equal_nan=True):
                difference = float(np.max(np.abs(want.astype(np.float64) - have)))
                problems.append(f"{label(key)}: differs by up to {difference:.3g}")
        elif not np.array_equal(want, have):
            problems.append(f"{label(key)}: {have.tolist()!r:.200} != {want.tolist()!r:.200}")
    return problems


class ExportVerificationError(RuntimeError):
    """The reloaded export did not answer as the in-memory model did."""


# === Publishing ===


def check_new_output(path: str, overwrite: bool) -> str:
    """The absolute `path`, refused (`FileExistsError`) when it exists, unless `overwrite`."""
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path) and not overwrite:
        raise FileExistsError(
            f"{path} already exists: an export is never overwritten unless asked "
            "(overwrite=True, --overwrite)"
        )
    return path


@contextlib.contextmanager
def publish_directory(path: str, *, overwrite: bool = False, replace: bool = True) -> Iterator[str]:
    """Yields a temporary directory beside `path` (its name starts with a dot, which TF
    Serving's version scan skips); when the block ends without an error, its content
    appears at `path` in one rename. A failed block leaves `path` as it was.

    Args:
        path: str. The export directory.
        overwrite: bool. Replace an existing `path` (else `FileExistsError`).
        replace: bool. With `overwrite`: True, the existing directory goes as a whole
            (moved aside right before the rename, then deleted); False, the files
            written replace theirs and the others stay.
    """
    path = check_new_output(path, overwrite)
    name = os.path.basename(path)
    aside = None
    with atomic_directory(path, merge=overwrite) as temp_dir:
        yield temp_dir
        if replace and overwrite and os.path.lexists(path):
            aside = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=f".{name}.replaced-")
            os.rename(path, os.path.join(aside, name))
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


# === The description ===


def label_names(task) -> list[str] | None:
    """`task.label_names` as a description lists them (None for none)."""
    names = task.label_names
    return list(names) if names else None


def task_fields(task, tokenizer) -> dict[str, Any]:
    """What an export's description says of the task it serves: its text fields, its
    description (what `tasks.task_from_description` rebuilds it from) and its label
    names."""
    return {
        "text_fields": list(task.text_fields),
        "task": task.description(tokenizer),
        "label_names": label_names(task),
    }


def write_export_manifests(saved_model_dir: str, description: dict[str, Any]) -> dict[str, Any]:
    """Writes a saved SavedModel's `assets.extra/custom_ops.json` (the ops outside core
    TensorFlow it needs, `ops.py`) and `assets.extra/export.json` (`description`, to
    which it adds each signature's inputs and outputs and the TensorFlow and
    tensorflow-text versions it was written with; `description` is updated in place).

    Args:
        saved_model_dir: str. The directory `tf.saved_model.save` wrote.
        description: dict, what export.json records of the export (JSON values).

    Returns:
        The op manifest (custom_ops.json's content).
    """
    manifest = ops.write_op_manifest(saved_model_dir)
    description["signatures"] = signatures.signature_schema(saved_model_dir)
    description["tensorflow_version"] = manifest["tensorflow_version"]
    description["tensorflow_text_version"] = manifest["tensorflow_text_version"]
    write_json_atomically(
        os.path.join(saved_model_dir, ops.EXTRA_DIRECTORY, DESCRIPTION_FILE), description
    )
    return manifest
