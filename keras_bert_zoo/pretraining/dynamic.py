"""Dynamic masking: pretraining batches built on the fly in ``tf.data``, new masks every epoch.

Two sources, one output: batches ``(x, y)`` with exactly the keys, dtypes and fixed
shapes that ``data.pretraining_dataset(..., split_labels=True)`` gives for static
records, so ``BertPretrainer.fit`` takes either:

* ``x``: ``input_word_ids``, ``input_mask``, ``input_type_ids`` (int32
  ``[batch, max_seq_length]``), ``masked_lm_positions`` (int32
  ``[batch, max_predictions_per_seq]``);
* ``y``: ``masked_lm_ids`` (int32), ``masked_lm_weights`` (float32) ``[batch,
  max_predictions_per_seq]``, ``next_sentence_labels`` (int32 ``[batch]``, 1 =
  random next).

``dynamic_pretraining_dataset`` reads raw text (one sentence per line, blank lines
between documents: google-research/bert's input format, or the output of
``tools/create_pretraining_data.py --output_text_file`` for Wikipedia dumps), and per
block of lines tokenizes (``text.BertTokenizer``), builds NSP pairs
(``instances.create_segment_pairs``) and masks (``text.masking.PretrainingMasker`` on
tensorflow-text's ``mask_language_model``): every pass over the data sees new pairs
and new masks. ``remasked_pretraining_dataset`` reads existing pretraining records
(ours or google-research/bert's: "tokenized segment pairs"), puts the original ids
back at the masked positions and masks again, so the pairs stay and the masks change.

Both are deterministic given ``seed`` (stateless random ops keyed by the running
block or batch number, deterministic interleave and map, seeded shuffle): the same
seed gives the same batch sequence, so a trainer can restore its input position by
skipping the steps it already ran. Both shard per worker with a
``tf.distribute.InputContext`` (files when there are enough, else blocks or records).

How the text source forms documents: lines are read in blocks of
``lines_per_block``; the lines after a block's last blank line are carried into the
next block (``Dataset.scan``), so documents are never cut at block boundaries unless
one grows beyond ``max_document_lines`` (then it is cut, to bound memory). "Random
next" segments come from the other documents of the same block.
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert_zoo.data import pipeline
from keras_bert_zoo.data.pretraining import pretraining_dataset, split_pretraining_features
from keras_bert_zoo.pretraining import instances
from keras_bert_zoo.text.masking import PretrainingMasker

__all__ = ["dynamic_pretraining_dataset", "remasked_pretraining_dataset", "text_blocks"]

AUTOTUNE = tf.data.AUTOTUNE


def _feature_shapes(rows, max_seq_length, max_predictions):
    sequence, predictions = [rows, max_seq_length], [rows, max_predictions]
    return {
        "input_word_ids": sequence,
        "input_mask": sequence,
        "input_type_ids": sequence,
        "masked_lm_positions": predictions,
        "masked_lm_ids": predictions,
        "masked_lm_weights": predictions,
        "next_sentence_labels": [rows],
    }


def _finish(dataset, batch_size, drop_remainder, split_labels, max_seq_length, max_predictions):
    """Batches of instance dicts -> fixed shapes, (x, y) or flat, prefetched."""
    shapes = _feature_shapes(
        batch_size if drop_remainder else None, max_seq_length, max_predictions
    )

    @tf.autograph.experimental.do_not_convert
    def finish(features):
        features = {name: tf.ensure_shape(value, shapes[name]) for name, value in features.items()}
        return split_pretraining_features(features) if split_labels else features

    return dataset.map(finish).prefetch(AUTOTUNE)


def _with_element_seeds(dataset, seed, shard):
    """``(index, element)`` pairs -> ``(element, element_seed)``: a stateless seed
    ``[2]`` of the seed, the input shard, the index and a seeded random int64 that
    is new for every iteration.

    ``Dataset.random(rerandomize_each_iteration=True)`` draws a different sequence for
    each pass (each iterator) over the dataset, the same sequence of sequences for
    the same seed: masks change from epoch to epoch even when the caller re-iterates
    a finite dataset (Keras ``fit`` without ``steps_per_epoch``), and a new process
    with the same seed sees the same batches.
    """
    base_seed = tf.constant([seed, shard], tf.int64)
    fold_in = tf.random.experimental.stateless_fold_in

    def element_seed(indexed, iteration_seed):
        index, element = indexed
        return element, fold_in(fold_in(base_seed, index), iteration_seed)

    randoms = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    return tf.data.Dataset.zip(dataset, randoms).map(element_seed)


def _masker(vocabulary, max_predictions_per_seq, masked_lm_prob, do_whole_word_mask):
    """The ``PretrainingMasker`` of create_pretraining_data.py's masking arguments."""
    return PretrainingMasker(
        vocabulary,
        max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob,
        whole_word_mask=do_whole_word_mask,
    )


def text_blocks(path, lines_per_block: int, max_document_lines: int) -> tf.data.Dataset:
    """Blocks of whole documents (lines, blank separators kept) of one text file."""
    lines = tf.data.TextLineDataset(path).map(tf.strings.strip)
    # A final blank line ends the file's last document.
    lines = lines.concatenate(tf.data.Dataset.from_tensors(tf.constant("")))

    @tf.autograph.experimental.do_not_convert
    def carry(leftover, block):
        combined = tf.concat([leftover, block], axis=0)
        size = tf.size(combined, out_type=tf.int64)
        blanks = tf.where(tf.equal(combined, ""))[:, 0]
        cut = tf.cond(tf.size(blanks) > 0, lambda: blanks[-1] + 1, lambda: tf.constant(0, tf.int64))
        # A document longer than max_document_lines is cut, so memory stays bounded.
        cut = tf.where(size - cut > max_document_lines, size, cut)
        return combined[cut:], combined[:cut]

    blocks = lines.batch(lines_per_block).scan(tf.constant([], tf.string), carry)
    return blocks.filter(lambda block: tf.reduce_any(tf.not_equal(block, "")))


def dynamic_pretraining_dataset(
    file_patterns: pipeline.FilePatterns,
    vocabulary,
    batch_size: int,
    *,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15,
    short_seq_prob: float = 0.1,
    do_whole_word_mask: bool = False,
    do_lower_case: bool | None = None,
    seed: int = 12345,
    input_context: tf.distribute.InputContext | None = None,
    shuffle_files: bool = True,
    shuffle_buffer: int | None = 10_000,
    repeat: bool | int = True,
    drop_remainder: bool = True,
    split_labels: bool = True,
    lines_per_block: int = 4096,
    max_document_lines: int = 65536,
    cycle_length: int = 4,
) -> tf.data.Dataset:
    """Pretraining batches from raw text, with NSP pairs and masks made on the fly.

    Args:
        file_patterns: globs (or comma-separated globs) of UTF-8 text files, one
            sentence per line, blank lines between documents.
        vocabulary: ``vocab.txt`` path or list of tokens.
        batch_size: examples per batch (per replica under a strategy).
        max_seq_length, max_predictions_per_seq, masked_lm_prob, short_seq_prob,
            do_whole_word_mask: as in create_pretraining_data.py.
        do_lower_case: tokenizer casing; ``None`` infers it from the vocabulary.
        seed: int. Every random choice derives from it.
        input_context: ``tf.distribute.InputContext``: this pipeline's shard.
        shuffle_files: shuffle the file order each epoch (seeded).
        shuffle_buffer: instances shuffled across blocks (``None``/0: off).
        repeat: ``True`` forever, an int for that many epochs, ``False`` once.
        drop_remainder: static batch dimension (needed by XLA/TPU).
        split_labels: ``(x, y)`` for ``BertPretrainer.fit``; otherwise one dict.
        lines_per_block: lines read per block; a block's documents are the pool of
            random-next segments.
        max_document_lines: longer documents are cut.
        cycle_length: files read in parallel (interleaved).

    Returns:
        ``tf.data.Dataset`` of batches (see the module docstring).

    Example:

    ```python
    dataset = dynamic_pretraining_dataset("corpus/*.txt", "vocab.txt", batch_size=32)
    model.fit(dataset, steps_per_epoch=1000, epochs=3)  # a BertPretrainer
    ```
    """
    files = pipeline.list_files(file_patterns)
    mode, num_shards, shard_index = pipeline.shard_info(len(files), input_context)
    tokenizer = _tokenizer(vocabulary, do_lower_case)
    masker = _masker(vocabulary, max_predictions_per_seq, masked_lm_prob, do_whole_word_mask)

    file_ds = pipeline.file_names(
        files, mode, num_shards, shard_index, shuffle=shuffle_files, seed=seed
    )
    if repeat is True:
        file_ds = file_ds.repeat()
    elif repeat:
        file_ds = file_ds.repeat(int(repeat))
    blocks = file_ds.interleave(
        lambda path: text_blocks(path, lines_per_block, max_document_lines),
        cycle_length=cycle_length,
        num_parallel_calls=AUTOTUNE,
        deterministic=True,
    )
    # The running block number (across epochs) keys the block's randomness.
    blocks = blocks.enumerate()
    if mode == "records":
        blocks = blocks.filter(lambda index, _: tf.equal(index % num_shards, shard_index))
    blocks = _with_element_seeds(blocks, seed, shard_index)

    @tf.autograph.experimental.do_not_convert  # plain TF ops; conversion only costs tracing time
    def make(lines, block_seed):
        is_text = tf.not_equal(lines, "")
        document_of_line = tf.cumsum(tf.cast(~is_text, tf.int64))
        text = tf.boolean_mask(lines, is_text)
        document_of_line = tf.boolean_mask(document_of_line, is_text)
        ids = tokenizer.tokenize(text)
        has_tokens = ids.row_lengths() > 0
        ids = tf.ragged.boolean_mask(ids, has_tokens)
        document_of_line = tf.boolean_mask(document_of_line, has_tokens)
        # Renumber documents 0..D-1 (ids only increase along the block).
        starts = tf.concat(
            [
                tf.ones([tf.minimum(tf.size(document_of_line), 1)], tf.bool),
                document_of_line[1:] != document_of_line[:-1],
            ],
            axis=0,
        )
        rows = tf.cumsum(tf.cast(starts, tf.int64)) - 1
        documents = tf.RaggedTensor.from_value_rowids(
            ids, rows, nrows=tf.reduce_sum(tf.cast(starts, tf.int64))
        )
        return instances.create_pretraining_instances(
            documents, block_seed, masker, max_seq_length, short_seq_prob
        )

    dataset = blocks.map(make, num_parallel_calls=AUTOTUNE, deterministic=True).unbatch()
    if shuffle_buffer:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return _finish(
        dataset, batch_size, drop_remainder, split_labels, max_seq_length, max_predictions_per_seq
    )


def remasked_pretraining_dataset(
    file_patterns: pipeline.FilePatterns,
    vocabulary,
    batch_size: int,
    *,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15,
    do_whole_word_mask: bool = False,
    seed: int = 12345,
    input_context: tf.distribute.InputContext | None = None,
    shuffle: bool = True,
    shuffle_buffer: int | None = 10_000,
    repeat: bool | int = True,
    drop_remainder: bool = True,
    split_labels: bool = True,
    compression_type: str | None = None,
) -> tf.data.Dataset:
    """Pretraining records (ours or google-research/bert's) with fresh masks each time.

    The original ids are restored at the records' masked positions (from
    ``masked_lm_ids``), then ``PretrainingMasker`` masks each batch again under a seed
    keyed by the running batch number: the segment pairs and NSP labels stay, the
    masks differ from epoch to epoch. ``max_seq_length`` and ``max_predictions_per_seq``
    are the records' (they fix the parsed shapes).

    Args: as ``dynamic_pretraining_dataset``; ``shuffle`` shuffles files and records.
    """
    # The static records' own reader: files, shuffle, repeat, batches, parsed.
    batches = pretraining_dataset(
        file_patterns,
        batch_size,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        input_context=input_context,
        shuffle=shuffle,
        # 0, not None: `pretraining_dataset` would take None for its default buffer.
        shuffle_buffer=shuffle_buffer or 0,
        seed=seed,
        compression_type=compression_type,
        repeat=repeat,
        drop_remainder=drop_remainder,
    )
    masker = _masker(vocabulary, max_predictions_per_seq, masked_lm_prob, do_whole_word_mask)

    @tf.autograph.experimental.do_not_convert
    def remask(parsed, batch_seed):
        ids = parsed["input_word_ids"]
        # Put the original ids back where the record masked them.
        rows = tf.broadcast_to(
            tf.range(tf.shape(ids)[0])[:, tf.newaxis], tf.shape(parsed["masked_lm_positions"])
        )
        real = parsed["masked_lm_weights"] > 0
        ids = tf.tensor_scatter_nd_update(
            ids,
            tf.boolean_mask(tf.stack([rows, parsed["masked_lm_positions"]], axis=-1), real),
            tf.boolean_mask(parsed["masked_lm_ids"], real),
        )
        lengths = tf.reduce_sum(parsed["input_mask"], axis=1)
        ragged = tf.RaggedTensor.from_tensor(ids, lengths=lengths)
        segments = tf.RaggedTensor.from_tensor(parsed["input_type_ids"], lengths=lengths)
        masked, positions, labels = masker(ragged, batch_seed)
        return instances.pad_instances(
            masked,
            segments,
            positions,
            labels,
            parsed["next_sentence_labels"],
            max_seq_length,
            max_predictions_per_seq,
        )

    shard = input_context.input_pipeline_id if input_context is not None else 0
    batches = _with_element_seeds(batches.enumerate(), seed, shard)
    batches = batches.map(remask, num_parallel_calls=AUTOTUNE, deterministic=True)
    return _finish(
        batches, batch_size, drop_remainder, split_labels, max_seq_length, max_predictions_per_seq
    )


def _tokenizer(vocabulary, do_lower_case):
    from keras_bert_zoo.text import BertTokenizer

    return BertTokenizer(vocabulary=vocabulary, lowercase=do_lower_case)
