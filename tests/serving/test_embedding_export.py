"""Exports of a sentence embedding model (issue 46): raw text -> `embedding`.

A tiny random `BertSentenceEmbedder` over a vocabulary written here is exported once as
a SavedModel (with query and document prompts), once cut to 8 components, and as
LiteRT (ids in and raw text in) and ONNX. Each answer is checked against a numpy
restatement of the model's math on the encoder's token outputs (mean over the real
tokens, L2 norm; the Matryoshka cut and its renormalisation), not against the serving
code; the tools print and refuse what they should.
"""

from __future__ import annotations

import json
import os

import child_process
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import serving
from keras_bert_zoo.checkpoints import save_pretrained
from keras_bert_zoo.models import BertEncoder, BertSentenceEmbedder
from keras_bert_zoo.serving.servables import SentenceEmbeddingServable
from keras_bert_zoo.tasks.sentence_embedding.serving import (
    TruncateDimError,
    embedding_serving_outputs,
    prompted_signatures,
)
from keras_bert_zoo.text import BertPreprocessor, BertTokenizer
from keras_bert_zoo.utils.errors import UserError

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + (
    "the a cat dog sat on mat ran far away query passage : . film good bad river bank money water"
).split()
TEXTS = [
    "the cat sat on the mat",
    "a dog ran far away",
    "",
    "good film",
    "the river bank . the money bank .",
    "Unknown wörds ünd 中文",
]
QUERY_PROMPT, DOCUMENT_PROMPT = "query : ", "passage : "
MAX_SEQ_LENGTH = 16
WIDTH = 16
TRUNCATE_DIM = 8


def _tiny_encoder(seed: int) -> BertEncoder:
    encoder = BertEncoder(
        vocab_size=len(VOCABULARY),
        hidden_size=WIDTH,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    rng = np.random.default_rng(seed)
    for variable in encoder.weights:
        variable.assign((0.3 * rng.standard_normal(tuple(variable.shape))).astype("float32"))
    return encoder


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCABULARY, lowercase=True)


@pytest.fixture(scope="module")
def embedder():
    return BertSentenceEmbedder(_tiny_encoder(seed=7))


@pytest.fixture(scope="module")
def servable():
    return SentenceEmbeddingServable(
        MAX_SEQ_LENGTH, query_prompt=QUERY_PROMPT, document_prompt=DOCUMENT_PROMPT
    )


def numpy_vectors(embedder, tokenizer, texts, *, normalize=True, cut=None) -> np.ndarray:
    """The vectors restated in numpy from the encoder's token outputs: mean over the
    real tokens, then the first `cut` components, then the L2 norm."""
    inputs = BertPreprocessor(tokenizer, sequence_length=MAX_SEQ_LENGTH)(tf.constant(texts))
    tokens = embedder.encoder(inputs, training=False)["sequence_output"].numpy()
    mask = inputs["input_mask"].numpy()[:, :, None].astype(np.float64)
    vectors = (tokens * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
    vectors = vectors[:, :cut]
    if normalize:
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors


def _source(servable, embedder, tokenizer):
    return serving.ModelSource(servable, embedder, tokenizer)


@pytest.fixture(scope="module")
def export_base(tmp_path_factory):
    return tmp_path_factory.mktemp("embedding_exports")


@pytest.fixture(scope="module")
def exported(export_base, servable, embedder, tokenizer):
    # verify=False: the tests check the answers against numpy themselves; the exporter's
    # own reload check runs in the bfloat16 export and through the export tool below.
    return serving.export(
        _source(servable, embedder, tokenizer),
        str(export_base),
        model_name="embedder",
        verify=False,
    )


@pytest.fixture(scope="module")
def loaded(exported):
    return tf.saved_model.load(exported.path)


def _answer(loaded, signature, texts):
    return loaded.signatures[signature](sentence=tf.constant(texts))["embedding"].numpy()


@pytest.mark.slow
def test_the_export_answers_the_models_vectors(exported, loaded, embedder, tokenizer):
    assert set(exported.signatures) == {"serving_default", "serve_ids", "query", "document"}
    got = _answer(loaded, "serving_default", TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), WIDTH)
    np.testing.assert_allclose(got, numpy_vectors(embedder, tokenizer, TEXTS), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # The prompts are recorded, with what the model does.
    task = exported.description["task"]
    assert (task["query_prompt"], task["document_prompt"]) == (QUERY_PROMPT, DOCUMENT_PROMPT)
    assert exported.description["signatures"]["serve_ids"]["outputs"] == {
        "embedding": {"dtype": "float32", "shape": [-1, WIDTH]}
    }


@pytest.mark.slow
def test_serve_ids_answers_the_embedding_of_the_ids(loaded, embedder, tokenizer):
    inputs = BertPreprocessor(tokenizer, sequence_length=MAX_SEQ_LENGTH)(tf.constant(TEXTS))
    got = loaded.signatures["serve_ids"](**inputs)
    assert list(got) == ["embedding"]
    np.testing.assert_allclose(
        got["embedding"].numpy(), numpy_vectors(embedder, tokenizer, TEXTS), atol=1e-5
    )


@pytest.mark.slow
def test_query_and_document_embed_the_prompted_text(loaded, embedder, tokenizer):
    for signature, prompt in (("query", QUERY_PROMPT), ("document", DOCUMENT_PROMPT)):
        prompted = [prompt + text for text in TEXTS]
        got = _answer(loaded, signature, TEXTS)
        np.testing.assert_allclose(got, _answer(loaded, "serving_default", prompted), atol=1e-6)
        np.testing.assert_allclose(got, numpy_vectors(embedder, tokenizer, prompted), atol=1e-5)
    # The prompts change the vectors (else the test above could not fail).
    assert np.abs(_answer(loaded, "query", TEXTS) - _answer(loaded, "document", TEXTS)).max() > 1e-3


@pytest.mark.slow
def test_a_bfloat16_export_keeps_the_prompted_signatures(
    export_base, servable, embedder, tokenizer, loaded
):
    exported = serving.export(
        _source(servable, embedder, tokenizer),
        str(export_base),
        model_name="embedder_bf16",
        precision="bfloat16",
    )
    bfloat16 = tf.saved_model.load(exported.path)
    for signature in ("serving_default", "query", "document"):
        got = _answer(bfloat16, signature, TEXTS)
        assert got.dtype == np.float32
        # bfloat16 keeps 8 bits of mantissa: the unit vectors agree to a few 1e-3.
        np.testing.assert_allclose(got, _answer(loaded, signature, TEXTS), atol=3e-2)


def test_no_prompt_no_prompted_signature(embedder, tokenizer):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=MAX_SEQ_LENGTH)
    assert prompted_signatures(embedder, preprocessor) == {}
    only_query = prompted_signatures(embedder, preprocessor, query_prompt=QUERY_PROMPT)
    assert list(only_query) == ["query"]
    assert SentenceEmbeddingServable(MAX_SEQ_LENGTH).extra_signatures(embedder, preprocessor) == {}


@pytest.fixture(scope="module")
def truncated(export_base, servable, embedder, tokenizer):
    exported = serving.export(
        _source(servable, embedder, tokenizer),
        str(export_base),
        model_name="embedder_cut",
        truncate_dim=TRUNCATE_DIM,
        verify=False,  # checked against numpy below
    )
    return exported, tf.saved_model.load(exported.path)


@pytest.mark.slow
def test_truncate_dim_cuts_and_renormalises(truncated, embedder, tokenizer):
    exported, loaded = truncated
    assert exported.description["truncate_dim"] == TRUNCATE_DIM
    want = numpy_vectors(embedder, tokenizer, TEXTS, cut=TRUNCATE_DIM)
    for signature in ("serving_default", "query"):
        got = _answer(loaded, signature, TEXTS)
        assert got.shape == (len(TEXTS), TRUNCATE_DIM)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(_answer(loaded, "serving_default", TEXTS), want, atol=1e-5)
    inputs = BertPreprocessor(tokenizer, sequence_length=MAX_SEQ_LENGTH)(tf.constant(TEXTS))
    ids_answer = loaded.signatures["serve_ids"](**inputs)["embedding"].numpy()
    np.testing.assert_allclose(ids_answer, want, atol=1e-5)
    # Cut after the norm would differ: the full vectors' prefix is not of norm 1.
    full_prefix = numpy_vectors(embedder, tokenizer, TEXTS)[:, :TRUNCATE_DIM]
    assert np.abs(np.linalg.norm(full_prefix, axis=1) - 1).max() > 1e-2


def test_truncate_dim_of_a_model_that_does_not_normalise(tokenizer):
    model = BertSentenceEmbedder(_tiny_encoder(seed=3), normalize=False)
    preprocessor = BertPreprocessor(tokenizer, sequence_length=MAX_SEQ_LENGTH)
    answer = embedding_serving_outputs(model, preprocessor, truncate_dim=5)
    got = answer(sentence=tf.constant(TEXTS))["embedding"].numpy()
    want = numpy_vectors(model, tokenizer, TEXTS, normalize=False, cut=5)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_truncate_dim_refusals_are_one_line(servable, embedder, tokenizer, tmp_path):
    with pytest.raises(TruncateDimError) as above:
        serving.export(
            _source(servable, embedder, tokenizer),
            str(tmp_path),
            model_name="too_wide",
            truncate_dim=WIDTH + 1,
        )
    assert str(above.value) == (
        f"truncate_dim={WIDTH + 1}: the model's vectors have {WIDTH} components; give 1 to {WIDTH}"
    )
    encoder = serving.EncoderServable(MAX_SEQ_LENGTH)
    with pytest.raises(UserError) as no_vectors:
        serving.export(
            serving.ModelSource(encoder, embedder.encoder, tokenizer),
            str(tmp_path),
            format="onnx",
            truncate_dim=4,
        )
    assert str(no_vectors.value) == "truncate_dim=4: encoder answers no embedding vectors"
    assert os.listdir(tmp_path) == []  # nothing written


# === LiteRT and ONNX ===


@pytest.mark.slow
@pytest.mark.parametrize(
    "format_, options",
    [("litert", {}), ("litert", {"raw_text": True}), ("onnx", {"truncate_dim": TRUNCATE_DIM})],
    ids=["litert_ids", "litert_raw_text", "onnx_truncated"],
)
def test_litert_and_onnx_answer_as_the_saved_model(
    format_, options, tmp_path, servable, embedder, tokenizer, loaded, truncated
):
    portable = serving.export(
        _source(servable, embedder, tokenizer), str(tmp_path / format_), format=format_, **options
    )
    reference = truncated[1] if "truncate_dim" in options else loaded
    got = serving.load_portable_model(portable.path)(sentence=TEXTS)["embedding"]
    np.testing.assert_allclose(got, _answer(reference, "serving_default", TEXTS), atol=1e-5)
    assert portable.sidecar["task"]["query_prompt"] == QUERY_PROMPT


# === The tools ===


def _printed_cosines(printed: str, rows: int) -> np.ndarray:
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("cosines between")) + 2
    return np.array([[float(v) for v in line.split()[1:]] for line in lines[start : start + rows]])


@pytest.mark.slow
def test_run_tool_prints_norms_and_cosines(exported, run_tool, helpers, capsys):
    inputs = [f"--input=sentence={text}" for text in TEXTS[:4]]
    helpers.run_tool_main(run_tool, f"--saved_model={exported.path}", *inputs, "--output=json")
    vectors = np.array(
        [json.loads(line)["embedding"] for line in capsys.readouterr().out.splitlines()]
    )
    assert vectors.shape == (4, WIDTH)
    helpers.run_tool_main(run_tool, f"--saved_model={exported.path}", *inputs)
    printed = capsys.readouterr().out
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(_printed_cosines(printed, 4), unit @ unit.T, atol=1e-6)
    norms = [float(line.split()[2]) for line in printed.splitlines() if "embedding norm:" in line]
    np.testing.assert_allclose(norms, np.linalg.norm(vectors, axis=1), atol=1e-6)
    # The query signature through --signature.
    helpers.run_tool_main(
        run_tool, f"--saved_model={exported.path}", *inputs, "--signature=query", "--output=json"
    )
    queried = [json.loads(line)["embedding"] for line in capsys.readouterr().out.splitlines()]
    assert np.abs(np.array(queried) - vectors).max() > 1e-3


@pytest.fixture(scope="module")
def plain_checkpoint(tmp_path_factory):
    """A tiny plain BERT checkpoint (no sentence-transformers files) with its vocab."""
    root = tmp_path_factory.mktemp("plain_bert")
    vocab_file = root / "vocab.txt"
    vocab_file.write_text("".join(f"{token}\n" for token in VOCABULARY), encoding="utf-8")
    encoder = _tiny_encoder(seed=11)
    return save_pretrained(encoder, str(root / "checkpoint"), vocab_file=str(vocab_file)), encoder


@pytest.mark.slow
def test_export_tool_exports_a_pretrained_embedding_model(
    plain_checkpoint, tmp_path, export_tool, helpers, capsys
):
    checkpoint, encoder = plain_checkpoint
    helpers.run_tool_main(
        export_tool,
        f"--pretrained_dir={checkpoint}",
        "--kind=sentence_embedding",
        f"--export_base={tmp_path}",
        "--model_name=plain",
        f"--max_seq_length={MAX_SEQ_LENGTH}",
        "--truncate_dim=6",
        f"--query_prompt={QUERY_PROMPT}",
    )
    printed = capsys.readouterr().out
    assert "signature query" in printed and "signature document" not in printed
    assert f"prompts: query: {QUERY_PROMPT!r}\n" in printed
    assert "embedding cut to its first 6 components" in printed
    loaded = tf.saved_model.load(str(tmp_path / "plain" / "1"))
    tokenizer = BertTokenizer(os.path.join(checkpoint, "vocab.txt"))
    # No sentence-transformers files: mean pooling, normalised.
    want = numpy_vectors(BertSentenceEmbedder(encoder), tokenizer, TEXTS, cut=6)
    np.testing.assert_allclose(_answer(loaded, "serving_default", TEXTS), want, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--kind=encoder", "--export_base={tmp}", "--model_name=e", "--truncate_dim=4"],
            "truncate_dim=4: encoder answers no embedding vectors",
        ),
        (
            ["--kind=sentence_embedding", "--export_base={tmp}", "--model_name=e"]
            + [f"--truncate_dim={WIDTH * 2}"],
            f"truncate_dim={WIDTH * 2}: the model's vectors have {WIDTH} components; "
            f"give 1 to {WIDTH}",
        ),
        (
            ["--kind=hub_encoder_pair", "--output_dir={tmp}/hub", "--truncate_dim=4"],
            "--truncate_dim: SavedModel / LiteRT / ONNX options, not for TF Hub style pair exports",
        ),
    ],
    ids=["no_vectors", "too_wide", "hub_pair"],
)
def test_export_tool_refuses_truncate_dim_in_one_line(
    plain_checkpoint, tmp_path, args, message, export_tool, helpers
):
    """Each refusal (an option check, the exporter's own, a flag for another format) as
    the tool ends for a user, in this process (`cli.run`'s parsing and wrapper); the
    tool run as a user runs it, in a fresh process, in the hub_pair case."""
    checkpoint, _ = plain_checkpoint
    arguments = [f"--pretrained_dir={checkpoint}", *[arg.format(tmp=tmp_path) for arg in args]]
    if "--kind=hub_encoder_pair" in arguments:
        completed = child_process.run_tool("tools/export_saved_model.py", *arguments)
        status, stdout, stderr = completed.returncode, completed.stdout, completed.stderr
    else:
        status, stdout, stderr = helpers.run_tool_as_user(
            export_tool, "export_saved_model", *arguments
        )
    assert status == 1 and stdout == "", (status, stdout, stderr)
    assert stderr.splitlines()[-1] == f"export_saved_model: error: {message}"
    assert os.listdir(tmp_path) == []
