"""The main job (tools/extract_features.py) on the real MiniLM BERT the demo extra ships."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from keras_bert_zoo.tasks import feature_extraction

sys.path.insert(0, str(Path(__file__).resolve().parent))
import finetuning_test_helpers as helpers  # noqa: E402


@pytest.fixture(scope="module")
def extractor():
    return feature_extraction.FeatureExtractor.from_pretrained(
        feature_extraction.demo_model_dir(), sequence_length=32
    )


@pytest.mark.slow
def test_paraphrases_score_higher_than_unrelated_sentences(extractor):
    sentences = [
        "A man is playing a guitar on stage.",
        "Someone performs music with a guitar in front of an audience.",
        "The stock market fell sharply after the announcement.",
    ]
    features = extractor(sentences, layers=(-1, 0))
    similarity = feature_extraction.cosine_similarity_matrix(features["sentence_embeddings"])
    assert similarity[0, 1] > 0.5
    assert similarity[0, 2] < 0.2 and similarity[1, 2] < 0.2
    assert features["layer_-1"].shape == (3, 32, 384)
    assert features["layer_0"].shape == (3, 32, 384)
    # [CLS] first, [SEP] (id 102 in the uncased vocab) closes the real tokens.
    lengths = features["input_mask"].sum(axis=1)
    assert (features["input_word_ids"][:, 0] == 101).all()
    assert all(features["input_word_ids"][i, n - 1] == 102 for i, n in enumerate(lengths))


def test_mean_pool_ignores_padding():
    sequence_output = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    input_mask = np.array([[1, 1, 0]])
    np.testing.assert_allclose(feature_extraction.mean_pool(sequence_output, input_mask), [[2, 3]])


@pytest.mark.slow
def test_bad_layer_index_names_the_flag(extractor):
    # Three sentences, as the other tests of this extractor: the same traced step.
    with pytest.raises(ValueError, match="layers"):
        extractor(["hello", "a b", "c"], layers=(6,))


@pytest.mark.slow
def test_tool_writes_jsonl_features(tmp_path, load_tool):
    """The tool's `main`, run in this process as `cli.run` runs it."""
    input_file = tmp_path / "sentences.txt"
    input_file.write_text("Hello world.\n\nThe quick brown fox.\n", encoding="utf-8")
    output_file = tmp_path / "features.jsonl"
    with load_tool("extract_features") as tool:
        status, _, stderr = helpers.run_tool_as_user(
            tool,
            "extract_features",
            f"--input_file={input_file}",
            f"--output_file={output_file}",
            "--layers=-1,-2",
            "--max_seq_length=16",
        )
    assert status == 0, stderr[-2000:]
    lines = [json.loads(line) for line in output_file.read_text().splitlines()]
    assert [line["linex_index"] for line in lines] == [0, 1]
    tokens = [feature["token"] for feature in lines[0]["features"]]
    assert tokens == ["[CLS]", "hello", "world", ".", "[SEP]"]
    first = lines[0]["features"][0]["layers"]
    assert [layer["index"] for layer in first] == [-1, -2]
    assert len(first[0]["values"]) == 384
    assert not list(tmp_path.glob(".*"))  # no temporary file left


def test_padding_free_features_equal_the_padded_encoder_on_real_weights(extractor):
    """Real MiniLM weights, real sentences mostly padding: the real tokens' features and
    the pooled output equal those of the padded encoder's own predict()."""
    sentences = [
        "Hello world.",
        "A considerably longer sentence, with a clause or two in it.",
        "Short one.",  # three sentences, as the other tests of this extractor
    ]
    features = extractor(sentences, layers=(-1, 2))
    inputs = {
        "input_word_ids": features["input_word_ids"],
        "input_mask": features["input_mask"],
        "input_type_ids": np.zeros_like(features["input_mask"]),
    }
    padded = extractor.encoder.predict(inputs, verbose=0)
    real = features["input_mask"].astype(bool)
    assert real.mean() < 0.6  # the case the padding-free path is for
    for key, layer in (("layer_-1", -1), ("layer_2", 2)):
        want = np.asarray(padded["encoder_outputs"][layer])[real]
        np.testing.assert_allclose(features[key][real], want, atol=1e-4)
        assert np.all(features[key][~real] == 0)
    np.testing.assert_allclose(features["pooled_output"], padded["pooled_output"], atol=1e-4)
