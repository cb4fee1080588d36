"""Dynamic masking pipelines: same batches as static records, the algorithm's checks,
seeds, new masks each epoch, sharding, and training BertPretrainer on both sources
(and on records written by the port of the original)."""

import numpy as np
import pytest
import tensorflow as tf
from pretraining_synthetic import VOCAB, synthetic_documents, unmasked_ids, write_corpus

from keras_bert_zoo.data import pretraining as data_pretraining
from keras_bert_zoo.pretraining import dynamic

SEQ, PRED, BATCH = 64, 10, 16
CLS, SEP, MASK = VOCAB.index("[CLS]"), VOCAB.index("[SEP]"), VOCAB.index("[MASK]")


def dataset(corpus_file, vocab_file, **kwargs):
    settings = dict(
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        seed=3,
        lines_per_block=256,
        shuffle_buffer=200,
    )
    settings.update(kwargs)
    return dynamic.dynamic_pretraining_dataset(corpus_file, vocab_file, BATCH, **settings)


def take(ds, count):
    batches = list(ds.take(count).as_numpy_iterator())
    x = {k: np.concatenate([b[0][k] for b in batches]) for k in batches[0][0]}
    y = {k: np.concatenate([b[1][k] for b in batches]) for k in batches[0][1]}
    return {**x, **y}


def check_algorithm(features, whole_word=False):
    """The checks of the static records, on dynamic batches."""
    ids = features["input_word_ids"].copy()
    real = features["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], real.shape)
    ids[rows[real], features["masked_lm_positions"][real]] = features["masked_lm_ids"][real]
    for row in range(len(ids)):
        length = int(features["input_mask"][row].sum())
        seps = np.flatnonzero(ids[row, :length] == SEP)
        assert ids[row, 0] == CLS and len(seps) == 2 and seps[1] == length - 1
        count = int(real[row].sum())
        positions = set(features["masked_lm_positions"][row, :count].tolist())
        if whole_word:
            assert count <= min(PRED, max(1, round(length * 0.15)))
        else:
            assert count == min(PRED, max(1, round(length * 0.15)), length - 3)
        assert not positions & {0, int(seps[0]), int(seps[1])}
    return ids


@pytest.mark.slow
def test_batches_match_static_records(corpus_file, vocab_file, tmp_path):
    ds = dataset(corpus_file, vocab_file)
    path = str(tmp_path / "r.tfrecord")
    data_pretraining.write_pretraining_examples(
        path,
        [
            {
                "input_ids": [CLS, 5, SEP, 6, SEP],
                "segment_ids": [0, 0, 0, 1, 1],
                "masked_lm_positions": [1],
                "masked_lm_ids": [5],
            }
        ]
        * BATCH,
        SEQ,
        PRED,
    )
    static = data_pretraining.pretraining_dataset(
        path,
        BATCH,
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        split_labels=True,
        drop_remainder=True,
    )
    assert ds.element_spec == static.element_spec
    assert (
        dynamic.remasked_pretraining_dataset(
            path, vocab_file, BATCH, max_seq_length=SEQ, max_predictions_per_seq=PRED
        ).element_spec
        == static.element_spec
    )


def test_algorithm_checks_and_nsp_balance(corpus_file, vocab_file):
    features = take(dataset(corpus_file, vocab_file), 40)
    check_algorithm(features)
    assert 0.45 < features["next_sentence_labels"].mean() < 0.7
    masked = features["input_word_ids"][
        np.arange(len(features["input_word_ids"]))[:, None], features["masked_lm_positions"]
    ]
    real = features["masked_lm_weights"] > 0
    assert abs(np.mean(masked[real] == MASK) - 0.8) < 0.03


@pytest.mark.slow
def test_whole_word_masking(corpus_file, vocab_file):
    features = take(dataset(corpus_file, vocab_file, do_whole_word_mask=True), 20)
    ids = check_algorithm(features, whole_word=True)
    continuation = np.array([t.startswith("##") for t in VOCAB])
    for row in range(len(ids)):
        chosen = set(
            features["masked_lm_positions"][row][features["masked_lm_weights"][row] > 0].tolist()
        )
        for p in chosen:
            end = p + 1
            while continuation[ids[row, end]]:
                assert end in chosen
                end += 1


@pytest.mark.slow
def test_seeded_and_new_masks_every_epoch(corpus_file, vocab_file):
    # A finite dataset iterated twice (Keras fit re-iterates each epoch): new pairs and
    # masks the second time; a new dataset with the same seed repeats the sequence.
    finite = dataset(corpus_file, vocab_file, repeat=False)
    epoch_1, epoch_2 = take(finite, 10), take(finite, 10)
    assert not np.array_equal(epoch_1["masked_lm_positions"], epoch_2["masked_lm_positions"])
    fresh = dataset(corpus_file, vocab_file, repeat=False)
    again_1, again_2 = take(fresh, 10), take(fresh, 10)
    assert all(np.array_equal(epoch_1[k], again_1[k]) for k in epoch_1)
    assert all(np.array_equal(epoch_2[k], again_2[k]) for k in epoch_2)
    other = take(dataset(corpus_file, vocab_file, seed=4, repeat=False), 10)
    assert not np.array_equal(epoch_1["input_word_ids"], other["input_word_ids"])


@pytest.mark.slow
def test_sharding_by_files_and_by_blocks(tmp_path, vocab_file):
    # File a uses only the first half of the syllables' documents, file b the rest.
    documents = synthetic_documents(60, seed=2)
    a = write_corpus(tmp_path / "a.txt", documents[:30])
    b = write_corpus(tmp_path / "b.txt", documents[30:])

    def shard(patterns, index, **kwargs):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=index)
        ds = dataset(
            patterns,
            vocab_file,
            input_context=context,
            repeat=False,
            shuffle_buffer=0,
            drop_remainder=False,
            **kwargs,
        )
        return take(ds, 1000)

    def texts(features):
        # Segment A of each pair, unmasked: it comes from the pipeline's own documents
        # (masked ids, which every pipeline writes, would make unrelated rows collide).
        ids = unmasked_ids(
            features["input_word_ids"],
            features["masked_lm_positions"],
            features["masked_lm_ids"],
            features["masked_lm_weights"],
        )
        separator = VOCAB.index("[SEP]")
        return {tuple(row[1 : int(np.flatnonzero(row == separator)[0])]) for row in ids}

    both = f"{a},{b}"
    zero, one = shard(both, 0), shard(both, 1)
    assert len(zero["input_word_ids"]) > 50 and len(one["input_word_ids"]) > 50
    assert not texts(zero) & texts(one)
    # One file for two pipelines: blocks alternate between them.
    zero, one = shard(a, 0, lines_per_block=40), shard(a, 1, lines_per_block=40)
    assert len(zero["input_word_ids"]) > 0 and len(one["input_word_ids"]) > 0
    assert not texts(zero) & texts(one)


def test_remasking_restores_pairs_and_changes_masks(created_port_records, vocab_file):
    path, seq, pred = created_port_records
    spec = data_pretraining.pretraining_feature_spec(seq, pred)
    originals = tf.io.parse_example(tf.stack(list(tf.data.TFRecordDataset(path))), spec)
    ds = dynamic.remasked_pretraining_dataset(
        path,
        vocab_file,
        8,
        max_seq_length=seq,
        max_predictions_per_seq=pred,
        shuffle=False,
        repeat=False,
    )
    epoch_1, epoch_2 = list(ds.as_numpy_iterator()), list(ds.as_numpy_iterator())
    first = {k: np.concatenate([b[0][k] for b in epoch_1]) for k in epoch_1[0][0]} | {
        k: np.concatenate([b[1][k] for b in epoch_1]) for k in epoch_1[0][1]
    }
    second = {k: np.concatenate([b[1][k] for b in epoch_2]) for k in epoch_2[0][1]}
    n = len(first["input_word_ids"])
    # The pairs are the records' (restored), the masks are new.
    record_ids = originals["input_ids"].numpy()[:n].copy()
    weights = originals["masked_lm_weights"].numpy()[:n] > 0
    rows = np.broadcast_to(np.arange(n)[:, None], weights.shape)
    record_ids[rows[weights], originals["masked_lm_positions"].numpy()[:n][weights]] = originals[
        "masked_lm_ids"
    ].numpy()[:n][weights]
    restored = check_algorithm_generic(first, seq, pred)
    np.testing.assert_array_equal(restored, record_ids)
    np.testing.assert_array_equal(
        first["next_sentence_labels"], originals["next_sentence_labels"].numpy()[:n, 0]
    )
    assert not np.array_equal(first["masked_lm_ids"], second["masked_lm_ids"])


def check_algorithm_generic(features, seq, pred):
    ids = features["input_word_ids"].copy()
    real = features["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], real.shape)
    ids[rows[real], features["masked_lm_positions"][real]] = features["masked_lm_ids"][real]
    for row in range(len(ids)):
        length = int(features["input_mask"][row].sum())
        assert int(real[row].sum()) == min(pred, max(1, round(length * 0.15)), length - 3)
    return ids


@pytest.fixture(scope="module")
def created_port_records(tmp_path_factory, corpus_file, vocab_file, port):
    """Records written by the single-process port of the original."""
    path = str(tmp_path_factory.mktemp("port") / "port.tfrecord")
    port.run(
        corpus_file,
        path,
        vocab_file,
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        dupe_factor=1,
        random_seed=1,
    )
    return path, SEQ, PRED


@pytest.fixture(scope="module")
def pretrainer():
    import keras

    from keras_bert_zoo.models import BertEncoder, BertPretrainer

    encoder = BertEncoder(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=SEQ,
    )
    model = BertPretrainer(encoder)
    model.compile(optimizer=keras.optimizers.AdamW(1e-3))
    return model


@pytest.mark.slow
@pytest.mark.parametrize("source", ["port_records", "dynamic_text", "remasked_port_records"])
def test_bert_pretrainer_trains_on_every_source(
    source, pretrainer, created_port_records, corpus_file, vocab_file
):
    path, seq, pred = created_port_records
    if source == "port_records":
        ds = data_pretraining.pretraining_dataset(
            path,
            BATCH,
            max_seq_length=seq,
            max_predictions_per_seq=pred,
            split_labels=True,
            drop_remainder=True,
            repeat=True,
        )
    elif source == "dynamic_text":
        ds = dataset(corpus_file, vocab_file)
    else:
        ds = dynamic.remasked_pretraining_dataset(
            path, vocab_file, BATCH, max_seq_length=seq, max_predictions_per_seq=pred
        )
    history = pretrainer.fit(ds, steps_per_epoch=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][-1])
    assert (
        history.history["masked_lm_loss"][-1] > 0 and history.history["next_sentence_loss"][-1] > 0
    )
