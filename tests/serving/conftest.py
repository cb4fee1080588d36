"""Fixtures of the serving tests: one export per task family, made once per session
(the models and texts are described in serving_helpers.py)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
from typing import Any

import pytest

from keras_bert_zoo import serving, tasks
from keras_bert_zoo.models import BertPretrainer
from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
from keras_bert_zoo.text import BertTokenizer

HERE = pathlib.Path(__file__).resolve().parent
_HELPERS = "kbz_tests_serving_helpers"


def load_helpers():
    if _HELPERS not in sys.modules:
        spec = importlib.util.spec_from_file_location(_HELPERS, HERE / "serving_helpers.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[_HELPERS] = module
        spec.loader.exec_module(module)
    return sys.modules[_HELPERS]


_h = load_helpers()
Export, randomize, tiny_encoder = _h.Export, _h.randomize, _h.tiny_encoder
VOCABULARY = _h.sentence_fixtures.VOCABULARY


@pytest.fixture(scope="session")
def helpers():
    return _h


@pytest.fixture(scope="module")
def export_tool(load_tool):
    """tools/export_saved_model.py, loaded as a module."""
    with load_tool("export_saved_model") as module:
        yield module


@pytest.fixture(scope="module")
def run_tool(load_tool):
    """tools/saved_model_run.py, loaded as a module."""
    with load_tool("saved_model_run") as module:
        yield module


@pytest.fixture(scope="session")
def minilm_tokenizer():
    return BertTokenizer(os.path.join(demo_model_dir(), "vocab.txt"), lowercase=True)


@pytest.fixture(scope="session")
def small_tokenizer():
    return BertTokenizer(VOCABULARY, lowercase=True)


@pytest.fixture(scope="session")
def export_base(tmp_path_factory):
    return str(tmp_path_factory.mktemp("exports"))


def _export(export_base, name, task, model, tokenizer, **kwargs) -> Export:
    # verify=False: the exporter's own check (reload, replay the warmup records against
    # the in-memory model) is what test_fresh_process.py asserts of every one of these
    # exports, in a fresh TensorFlow-only process; test_answers.py checks their answers
    # against the Python path. Skipping it here saves a reload and replay per export.
    preprocessor = task.make_preprocessor(tokenizer)
    exported = serving.export(
        serving.ModelSource(task, model, tokenizer, preprocessor=preprocessor),
        export_base,
        model_name=name,
        **{"verify": False, **kwargs},
    )
    return Export(name, task, model, tokenizer, preprocessor, exported)


@pytest.fixture(scope="session")
def sentence_pair_export(export_base, small_tokenizer):
    task = tasks.create_task("glue/mnli", max_seq_length=24)
    model = randomize(task.build_model(tiny_encoder(len(VOCABULARY))), 1)
    return _export(export_base, "mnli", task, model, small_tokenizer)


@pytest.fixture(scope="session")
def tensorflow_text_export(export_base, small_tokenizer):
    """A sentence-pair export whose tokenizer runs on tensorflow-text's kernels (the
    other exports hold core TensorFlow ops only, the default)."""
    task = tasks.create_task("glue/mnli", max_seq_length=24)
    model = randomize(task.build_model(tiny_encoder(len(VOCABULARY))), 11)
    return _export(
        export_base, "mnli_text_ops", task, model, small_tokenizer, tokenizer_ops="tensorflow_text"
    )


@pytest.fixture(scope="session")
def regression_export(export_base, small_tokenizer):
    task = tasks.create_task("glue/stsb", max_seq_length=24)
    model = randomize(task.build_model(tiny_encoder(len(VOCABULARY))), 2)
    return _export(export_base, "stsb", task, model, small_tokenizer)


@pytest.fixture(scope="session")
def squad_export(export_base, minilm_tokenizer):
    task = tasks.create_task(
        "squad_v2.0", max_seq_length=48, doc_stride=16, max_query_length=16, n_best_size=5
    )
    model = randomize(task.build_model(tiny_encoder(minilm_tokenizer.vocabulary_size())), 3)
    return _export(export_base, "squad", task, model, minilm_tokenizer)


@pytest.fixture(scope="session")
def masked_lm_export(export_base, minilm_tokenizer):
    servable = serving.MaskedLMServable(max_seq_length=32, top_k=3)
    model = randomize(BertPretrainer(tiny_encoder(minilm_tokenizer.vocabulary_size())), 4)
    return _export(export_base, "masked_lm", servable, model, minilm_tokenizer)


@pytest.fixture(scope="session")
def encoder_export(export_base, minilm_tokenizer):
    servable = serving.EncoderServable(max_seq_length=32)
    model = randomize(tiny_encoder(minilm_tokenizer.vocabulary_size()), 5)
    return _export(export_base, "encoder", servable, model, minilm_tokenizer)


@pytest.fixture(scope="session")
def tagging_export(export_base, minilm_tokenizer):
    # Windows of 16 pieces: longer sentences are windowed, not truncated.
    task = tasks.create_task("conll2003", max_seq_length=16, window_stride=6, tag_scheme="IOB2")
    model = randomize(task.build_model(tiny_encoder(minilm_tokenizer.vocabulary_size())), 6)
    return _export(export_base, "conll", task, model, minilm_tokenizer)


@pytest.fixture(scope="session")
def choice_export(export_base, small_tokenizer):
    task = tasks.create_task("multiple_choice", max_seq_length=20)
    task.load_state({"num_choices": 3})  # what a fine-tuned model's task.json restores
    model = randomize(task.build_model(tiny_encoder(len(VOCABULARY))), 9)
    return _export(export_base, "choice", task, model, small_tokenizer)


@pytest.fixture(scope="session")
def all_exports(
    sentence_pair_export,
    regression_export,
    squad_export,
    tagging_export,
    choice_export,
    masked_lm_export,
    encoder_export,
) -> list[Export]:
    """One export of every task family: sentence classification and regression, span
    labeling, token classification, multiple choice, masked LM, encoder."""
    return [
        sentence_pair_export,
        regression_export,
        squad_export,
        tagging_export,
        choice_export,
        masked_lm_export,
        encoder_export,
    ]


@pytest.fixture(scope="session")
def loaded():
    """`loaded(export)`: its SavedModel loaded once per session (tf.saved_model.load)."""
    import tensorflow as tf

    cache: dict[str, Any] = {}

    def load(export: Export):
        if export.path not in cache:
            cache[export.path] = tf.saved_model.load(export.path)
        return cache[export.path]

    return load


@pytest.fixture(scope="session")
def cpp_runner(tmp_path_factory):
    """The C++ loader program, compiled once per session against the tensorflow wheel."""
    from keras_bert_zoo.serving import native

    return native.compile_runner(str(tmp_path_factory.mktemp("native") / "saved_model_run"))
