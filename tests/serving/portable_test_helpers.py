"""Helpers of tests/serving/test_litert.py and test_onnx_export.py (imported by path).

One tiny random model per task family (hidden 16, one layer; serving_helpers.py) under
the real uncased MiniLM vocabulary, random ids to feed them, the real MiniLM encoder
with a sentiment head fitted on real movie-review sentences, and what the tests compare
with: the Keras model itself, never the export code.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re

import numpy as np
import tensorflow as tf

from keras_bert_zoo import serving, tasks
from keras_bert_zoo.models import BertPretrainer
from keras_bert_zoo.serving import signatures
from keras_bert_zoo.serving.common import serving_preprocessor
from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

HERE = pathlib.Path(__file__).resolve().parent
FAMILIES = (
    "sentence_classification",
    "sentence_regression",
    "span",
    "tagging",
    "multiple_choice",
    "masked_lm",
    "encoder",
)
REAL_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of [MASK], and Berlin is the capital of Germany.",
    "It is a gripping, funny and unexpectedly moving film about growing up.",
]


def minilm_tokenizer() -> BertTokenizer:
    return BertTokenizer(os.path.join(demo_model_dir(), "vocab.txt"), lowercase=True)


def tiny_encoder(vocab_size: int):
    """A one-block, 16-wide `BertEncoder`, its GELU the exact (erf) one, as MiniLM's
    and Hugging Face's BERTs'."""
    from keras_bert_zoo.models import BertEncoder

    return BertEncoder(
        vocab_size=vocab_size,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        hidden_act="gelu",
    )


def family_model(family: str, helpers, vocab_size: int):
    """`(task, model)` of one family: a tiny random model (`tiny_encoder`) with
    decisive weights."""
    encoder = tiny_encoder(vocab_size)
    if family == "sentence_classification":
        task = tasks.create_task("glue/mnli", max_seq_length=24)
    elif family == "sentence_regression":
        task = tasks.create_task("glue/stsb", max_seq_length=24)
    elif family == "span":
        task = tasks.create_task(
            "squad_v2.0", max_seq_length=48, doc_stride=16, max_query_length=16, n_best_size=5
        )
    elif family == "tagging":
        task = tasks.create_task("conll2003", max_seq_length=16, window_stride=6, tag_scheme="IOB2")
    elif family == "multiple_choice":
        task = tasks.create_task("multiple_choice", max_seq_length=20)
        task.load_state({"num_choices": 3})
    elif family == "masked_lm":
        return serving.MaskedLMServable(max_seq_length=32, top_k=3), helpers.randomize(
            BertPretrainer(encoder), 4
        )
    elif family == "encoder":
        return serving.EncoderServable(max_seq_length=32), helpers.randomize(encoder, 5)
    else:
        raise ValueError(family)
    return task, helpers.randomize(task.build_model(encoder), FAMILIES.index(family) + 1)


def random_ids(model, vocab_size: int, seed: int = 0, batch: int = 3, length: int = 11):
    """Random `serve_ids` inputs: word ids, a mask with padding at the end of all rows
    but the first, type ids 0 then 1, masked LM positions inside the real tokens."""
    rng = np.random.default_rng(seed)
    specs = signatures.model_input_specs(model)
    middle = tuple(int(d) for d in specs["input_word_ids"].shape[1:-1])  # choices
    shape = (batch, *middle, length)
    lengths = rng.integers(3, length + 1, size=(batch, *middle))
    lengths.flat[0] = length
    positions = np.arange(length)
    mask = (positions < lengths[..., None]).astype(np.int32)
    ids = {
        "input_word_ids": (rng.integers(5, vocab_size, size=shape) * mask).astype(np.int32),
        "input_mask": mask,
        "input_type_ids": ((positions >= length // 2) * mask).astype(np.int32),
    }
    if "masked_lm_positions" in specs:
        ids["masked_lm_positions"] = rng.integers(0, 3, size=(batch, 4)).astype(np.int32)
    return ids


def keras_outputs(model, ids) -> dict[str, np.ndarray]:
    flat = signatures.flatten_outputs(model(ids, training=False))
    return {key: np.asarray(value) for key, value in flat.items()}


def serve_ids_output_names(model) -> list[str]:
    """The outputs of the SavedModel's `serve_ids` for `model`."""
    return sorted(signatures.ids_signature(model).get_concrete_function().structured_outputs)


def eager_answers(task, model, tokenizer, texts) -> dict[str, np.ndarray]:
    """The task's answers from the Keras model (its serving function run eagerly, as the
    SavedModel exporter checks its own export against)."""
    preprocessor = serving_preprocessor(task.make_preprocessor(tokenizer))
    answer = task.serving_outputs(model, preprocessor)
    outputs = answer(**{field: tf.constant(list(texts[field])) for field in task.text_fields})
    return {key: np.asarray(value) for key, value in outputs.items()}


def text_request(task) -> dict[str, list[str]]:
    fields = task.text_fields
    return {
        field: [REAL_SENTENCES[(row + column) % 3] for row in range(3)]
        for column, field in enumerate(fields)
    }


def assert_same_answers(expected, got, atol=1e-5):
    assert sorted(expected) == sorted(got)
    for key in expected:
        want, have = np.asarray(expected[key]), np.asarray(got[key])
        assert want.shape == have.shape, (key, want.shape, have.shape)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(have, want, atol=atol, rtol=0, err_msg=key)
        else:
            assert want.tolist() == have.tolist(), key


def analyzer_ops(model_path: str) -> list[str]:
    """The op names TFLite's own ModelAnalyzer lists for a `.tflite` file."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        tf.lite.experimental.Analyzer.analyze(model_path=model_path)
    return re.findall(r"Op#\d+ (\S+?)\(", output.getvalue())


def cosines(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two `[rows, width]` arrays."""
    expected, got = np.asarray(expected, np.float64), np.asarray(got, np.float64)
    return (
        (expected * got).sum(-1) / np.linalg.norm(expected, axis=-1) / np.linalg.norm(got, axis=-1)
    )


def review_sentences() -> tuple[list[str], np.ndarray]:
    """The 200 labelled movie-review sentences gensim ships (pang_lee_polarity.cor)."""
    import gensim

    path = pathlib.Path(gensim.__file__).parent / "test" / "test_data" / "pang_lee_polarity.cor"
    rows = [line.split(" ", 1) for line in path.read_text("latin-1").splitlines() if line.strip()]
    return [text.strip() for _, text in rows], np.array(
        [label.endswith("pos") for label, _ in rows]
    )


def mean_pooled(sequence: np.ndarray, mask: np.ndarray) -> np.ndarray:
    mask = mask[..., None].astype(np.float64)
    return (np.asarray(sequence, np.float64) * mask).sum(1) / mask.sum(1)


class MiniLMReviews:
    """The real all-MiniLM-L6-v2 encoder, its pooled and sequence outputs on the 200
    review sentences (length 64), and a sentiment head: logistic regression on the
    mean-pooled sequence outputs (the sentence embedding the model is trained to give;
    its [CLS] pooler is untrained, and a head on it sits at chance on this data) of
    the even sentences. The odd ones are the dev set."""

    def __init__(self, tokenizer=None):
        from sklearn.linear_model import LogisticRegression

        from keras_bert_zoo import from_pretrained

        self.tokenizer = tokenizer or minilm_tokenizer()
        self.encoder = from_pretrained(demo_model_dir())
        texts, labels = review_sentences()
        preprocessor = BertPreprocessor(self.tokenizer, sequence_length=64, pad_to="longest")
        self.ids = {key: value.numpy() for key, value in preprocessor(tf.constant(texts)).items()}
        outputs = self.encoder(self.ids, training=False)
        self.pooled = outputs["pooled_output"].numpy()
        self.sequence = outputs["sequence_output"].numpy()
        self.embeddings = mean_pooled(self.sequence, self.ids["input_mask"])
        self.head = LogisticRegression(max_iter=2000).fit(self.embeddings[0::2], labels[0::2])
        self.dev = slice(1, None, 2)

    def labels(self, sequence: np.ndarray) -> np.ndarray:
        """The head's labels of the dev sentences from a `[200, length, H]` output."""
        return self.head.predict(mean_pooled(sequence, self.ids["input_mask"])[self.dev])

    def compare(self, got: dict[str, np.ndarray]) -> dict[str, float]:
        """Cosines of `got`'s outputs to the Keras model's (pooled per sentence; sequence
        per sentence over its real tokens) and the dev-set label agreement."""
        mask = self.ids["input_mask"].astype(bool)
        sequence = [
            cosines(
                self.sequence[i][mask[i]].ravel()[None],
                got["sequence_output"][i][mask[i]].ravel()[None],
            )[0]
            for i in range(len(mask))
        ]
        pooled = cosines(self.pooled, got["pooled_output"])
        agree = self.labels(self.sequence) == self.labels(got["sequence_output"])
        float_probability = self.head.predict_proba(
            mean_pooled(self.sequence, self.ids["input_mask"])[self.dev]
        )[:, 1]
        confident = np.abs(float_probability - 0.5) >= 0.1
        return {
            "pooled_min": float(pooled.min()),
            "pooled_mean": float(pooled.mean()),
            "sequence_min": float(np.min(sequence)),
            "sequence_mean": float(np.mean(sequence)),
            "label_agreement": float(np.mean(agree)),
            # The head is a logistic regression on 100 sentences: some dev sentences sit
            # at its boundary, where any rounding may flip them.
            "confident_agreement": float(np.mean(agree[confident])),
        }

    def assert_int8_keeps_the_answers(self, what: str, size_bytes: int, got) -> dict[str, float]:
        """The bars of an int8 export of this encoder (LiteRT and ONNX alike): under 0.3
        of the float32 weights' bytes, outputs close to float (`compare`), 97% of the
        dev labels and every one the float head is sure of (p at least 0.1 from
        0.5). Returns the measures (also printed)."""
        float_bytes = 4 * self.encoder.count_params()
        assert size_bytes <= 0.3 * float_bytes, (size_bytes, float_bytes)
        measured = self.compare(got)
        print(f"{what} dynamic int8 MiniLM ({size_bytes} bytes): {measured}")
        assert measured["pooled_mean"] >= 0.998 and measured["sequence_mean"] >= 0.998, measured
        assert measured["pooled_min"] >= 0.995 and measured["sequence_min"] >= 0.995, measured
        assert measured["label_agreement"] >= 0.97, measured
        assert measured["confident_agreement"] == 1.0, measured
        return measured
