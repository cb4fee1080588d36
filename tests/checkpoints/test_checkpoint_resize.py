"""`checkpoints.resize`: weights copied into a pretrainer with a longer position table.

Moved here from tests/pretraining/test_run_pretraining.py with the functions; the
models are tiny and random (L=2, H=32, 64 positions), written in the Google and
Hugging Face layouts and read back with `from_pretrained`. Reference: the learned
arrays themselves, compared row by row.
"""

import numpy as np
import pytest

from keras_bert_zoo.checkpoints import from_pretrained, save_pretrained
from keras_bert_zoo.checkpoints.resize import copy_pretraining_weights, extend_position_embeddings
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.models import BertEncoder, BertPretrainer

SEQ = 64
TINY = BertConfig.from_google_dict(
    {
        "vocab_size": 40,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": SEQ,
        "type_vocab_size": 2,
    }
)


def _pretrainer(config=TINY):
    return BertPretrainer(BertEncoder.from_bert_config(config))


def test_extend_position_embeddings_keeps_and_tiles_the_learned_rows():
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    extended = extend_position_embeddings(table, 8)
    assert extended.shape == (8, 4)
    np.testing.assert_array_equal(extended[:3], table)
    np.testing.assert_array_equal(extended[3:6], table)
    np.testing.assert_array_equal(extended[6:], table[:2])
    np.testing.assert_array_equal(extend_position_embeddings(table, 2), table[:2])


def test_an_export_initializes_a_longer_model(tmp_path):
    trained = _pretrainer()
    directory = save_pretrained(trained, tmp_path / "google", format="google")
    source = from_pretrained(directory, model="pretrainer")
    target = _pretrainer(TINY.replace(max_position_embeddings=150))
    copy_pretraining_weights(source, target)
    learned = trained.encoder.embeddings.position_embeddings.numpy()
    table = target.encoder.embeddings.position_embeddings.numpy()
    np.testing.assert_array_equal(table, np.concatenate([learned, learned, learned[:22]]))
    for old, new in zip(trained.weights, target.weights, strict=True):
        if new is not target.encoder.embeddings.position_embeddings:
            np.testing.assert_array_equal(old.numpy(), new.numpy(), err_msg=new.path)
    # Anything else that differs is another architecture, refused by name, and nothing
    # of the refused copy is assigned.
    narrower = _pretrainer(TINY.replace(intermediate_size=48))
    before = [v.numpy().copy() for v in narrower.weights]
    with pytest.raises(ValueError, match="intermediate|kernel"):
        copy_pretraining_weights(source, narrower)
    for old, new in zip(before, narrower.weights, strict=True):
        np.testing.assert_array_equal(old, new.numpy())


def test_an_encoder_only_checkpoint_initializes_the_encoder(tmp_path):
    trained = _pretrainer()
    directory = save_pretrained(trained.encoder, tmp_path / "bert", format="huggingface")
    target = _pretrainer()
    heads_before = [v.numpy().copy() for v in target.next_sentence_head.weights]
    copy_pretraining_weights(from_pretrained(directory, model="encoder"), target)
    for old, new in zip(trained.encoder.weights, target.encoder.weights, strict=True):
        np.testing.assert_array_equal(old.numpy(), new.numpy(), err_msg=new.path)
    # No head in the checkpoint: the heads keep their fresh initialization.
    for before, after in zip(heads_before, target.next_sentence_head.weights, strict=True):
        np.testing.assert_array_equal(before, after.numpy())
