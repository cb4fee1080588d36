"""Every export kind x every format x every quantization that format offers (issue 61),
the grid generated from the registries: a format, kind or quantization added to them is
in it without a change here.

A cell is one exporter of `serving.registry`, one kind it exports, one value of each of
its quantization options (`quantize`, `precision`: the choices that change the weights;
`auto` picks one of the others) and, for LiteRT, ids in or raw text in. Each cell is
first asked of a source that fails if loaded: what the combination does not support is
refused there, in one line. Every other cell is exported from a tiny model of its kind
(built once for the module) and reloaded by its runtime (TensorFlow, the LiteRT
interpreter, ONNX Runtime through `serving.load_portable_model`), and answers raw text
as the float Keras model does (`eager_answers`), within the cell's tolerance.

The models: one per model class an exporter meets, for the classes differ in where the
word embeddings live (what int8 quantizes: `formats/int8_rows.py`) and in what the
served function returns. A fine-tuned sentence classifier stands for the task models
(`encoder` attribute; the other task families' float answers in every format are
test_litert.py's, test_onnx_export.py's and test_export.py's, with their int8 and
bfloat16 cases), the sentence-embedding task's trained model for the functional ones
(the int8 crash of issue 61), the bare encoder, the masked LM (its tied output
embeddings) and the sentence embedder (kind `sentence_embedding`). The TF Hub style
pair (`hub_pair`) has no quantization and is exported from a checkpoint
(test_hub_pair.py); the grid checks it still has none.
"""

from __future__ import annotations

import dataclasses
import itertools
import pathlib

import child_process
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import serving, tasks
from keras_bert_zoo.models import BertSentenceEmbedder
from keras_bert_zoo.serving import registry
from keras_bert_zoo.serving.servables import SentenceEmbeddingServable
from keras_bert_zoo.utils.errors import UserError

HERE = pathlib.Path(__file__).resolve().parent
ph = child_process.import_by_path("kbz_portable_test_helpers", HERE / "portable_test_helpers.py")

# Options whose choices change the exported weights' number format.
QUANTIZATION_OPTIONS = ("quantize", "precision")
# The graph's input: ids (with the tokenizer outside, in the sidecar) or raw text.
INPUT_OPTIONS = ("raw_text",)
# How close a cell's float outputs stay to the float model's: the largest absolute
# difference (float) or the smallest cosine per row (reduced number formats).
TOLERANCE = {
    None: ("atol", 1e-5),
    "none": ("atol", 1e-5),
    "float32": ("atol", 1e-5),
    "float16": ("cosine", 0.999),
    "bfloat16": ("cosine", 0.99),
    "dynamic_int8": ("cosine", 0.99),
}

# kind -> the models of that kind (module fixture `models`).
MODELS = {
    "task": ("sentence_classification", "sentence_embedding_task"),
    "encoder": ("encoder",),
    "masked_lm": ("masked_lm",),
    "sentence_embedding": ("sentence_embedder",),
}


class _Loaded(Exception):
    """The export read its source: the cell was not refused up front."""


@dataclasses.dataclass(frozen=True)
class _NotToBeLoaded(serving.ModelSource):
    def load(self, kind=None):
        raise _Loaded


def _choices(option) -> tuple:
    if option.name in INPUT_OPTIONS:
        return (False, True)
    return tuple(choice for choice in option.choices if choice != "auto")


def grid() -> list[tuple[str, str, dict]]:
    """`(exporter name, kind, options)` of every cell."""
    cells = []
    for exporter in registry.exporters():
        varied = [o for o in exporter.options if o.name in QUANTIZATION_OPTIONS + INPUT_OPTIONS]
        for kind in exporter.kinds:
            for values in itertools.product(*(_choices(o) for o in varied)):
                options = dict(zip([o.name for o in varied], values, strict=True))
                cells.append((exporter.name, kind, options))
    return cells


def _cell_id(cell) -> str:
    name, kind, options = cell
    return "-".join([name, kind, *(f"{k}={v}" for k, v in options.items())])


GRID = [cell for cell in grid() if cell[1] in MODELS]


def test_the_grid_reaches_every_format_kind_and_quantization():
    cells = grid()
    kinds = {kind for _, kind, _ in cells}
    assert set(MODELS) | {"hub_encoder_pair"} == kinds == set(serving.sources.KINDS)
    assert {name for name, _, _ in cells} == {e.name for e in registry.exporters()}
    # The pair exports a checkpoint as it is (test_hub_pair.py): no quantization to cross.
    pair = registry.exporter_for("hub_pair")
    assert not [o for o in pair.options if o.name in QUANTIZATION_OPTIONS]
    quantizations = {v for _, _, options in cells for k, v in options.items() if k != "raw_text"}
    assert quantizations == {"float32", "bfloat16", "none", "dynamic_int8", "float16"}
    assert quantizations <= set(TOLERANCE)


@pytest.fixture(scope="module")
def models(helpers, minilm_tokenizer):
    """`{name: (servable, model)}`: one tiny model per model class (see the module)."""
    vocab_size = minilm_tokenizer.vocabulary_size()
    built = {
        name: ph.family_model(name, helpers, vocab_size)
        for name in ("sentence_classification", "encoder", "masked_lm")
    }
    encoder = ph.tiny_encoder(vocab_size)
    task = tasks.create_task("sentence_embedding", max_seq_length=16)
    built["sentence_embedding_task"] = (task, helpers.randomize(task.build_model(encoder), 11))
    built["sentence_embedder"] = (
        SentenceEmbeddingServable(16),
        helpers.randomize(BertSentenceEmbedder(encoder), 12),
    )
    return built


def _texts(servable) -> dict[str, list[str]]:
    return ph.text_request(servable)


def _served(exported, exporter_name, texts) -> dict[str, np.ndarray]:
    if exporter_name == "saved_model":
        signature = tf.saved_model.load(exported.path).signatures["serving_default"]
        outputs = signature(**{field: tf.constant(rows) for field, rows in texts.items()})
        return {key: value.numpy() for key, value in outputs.items()}
    return dict(serving.load_portable_model(exported.path)(**texts))


def _assert_close(expected, got, tolerance):
    measure, bound = tolerance
    assert sorted(expected) == sorted(got)
    for key in expected:
        want, have = np.asarray(expected[key]), np.asarray(got[key])
        assert want.shape == have.shape, (key, want.shape, have.shape)
        if want.dtype.kind != "f":
            if measure == "atol":
                assert want.tolist() == have.tolist(), key
            continue  # labels and tokens of a reduced format may flip at a boundary
        if measure == "atol":
            np.testing.assert_allclose(have, want, atol=bound, rtol=0, err_msg=key)
        else:
            want, have = want.reshape(want.shape[0], -1), have.reshape(have.shape[0], -1)
            # A row of zeros (a masked LM's sentence without [MASK]) stays zeros.
            empty = ~want.any(axis=1)
            assert not have[empty].any(), key
            cosines = ph.cosines(want[~empty], have[~empty])
            assert cosines.min() >= bound, (key, cosines)


@pytest.mark.slow
@pytest.mark.parametrize("cell", GRID, ids=_cell_id)
def test_each_cell_answers_as_the_float_model_or_is_refused_before_loading(
    cell, models, minilm_tokenizer, tmp_path
):
    exporter_name, kind, options = cell
    for name in MODELS[kind]:
        servable, model = models[name]
        refused = None
        try:
            serving.export(
                _NotToBeLoaded(servable, model, minilm_tokenizer),
                str(tmp_path / "refused"),
                format=exporter_name,
                kind=kind,
                verify=False,
                **options,
            )
        except _Loaded:
            pass
        except UserError as error:  # OptionError included
            refused = str(error)
        if refused is not None:
            assert refused and "\n" not in refused, refused
            assert not (tmp_path / "refused").exists()
            continue
        exported = serving.export(
            serving.ModelSource(servable, model, minilm_tokenizer),
            str(tmp_path / name),
            format=exporter_name,
            kind=kind,
            verify=False,  # reloaded and compared here
            **options,
        )
        texts = _texts(servable)
        expected = ph.eager_answers(servable, model, minilm_tokenizer, texts)
        quantization = options.get("quantize", options.get("precision"))
        _assert_close(expected, _served(exported, exporter_name, texts), TOLERANCE[quantization])
