"""Generic tf.data builders: sources, sharding, shuffling, batching, bucketing.

The pipeline is split in two halves so that each half has one job:

* A *source* (``text_line_dataset``, ``tfrecord_dataset``, ``tfds_dataset``) yields
  unbatched raw elements (strings, parsed records, feature dicts). Sources know how to
  shard themselves for a ``tf.distribute.InputContext`` and how to shuffle their files
  deterministically.
* ``make_plain_batches`` turns a source into model-ready batches: cache, shuffle,
  repeat, batch, preprocess (vectorised, one call per batch), optional dynamic
  padding, prefetch; ``make_bucketed_batches`` groups sequences of similar length.

``distributed_dataset_fn`` glues both halves into the ``fn(input_context)`` that
``strategy.distribute_datasets_from_function`` expects.

Sharding rule: with ``input_context.num_input_pipelines`` workers, files are sharded
when there are at least as many files as workers (each worker reads only its files);
otherwise every worker reads every file and keeps records ``i, i + n, i + 2n, ...`` of
each file, which is independent of the file order, so shards stay disjoint even when
file order is shuffled.

Determinism: every shuffle takes an explicit ``seed``. With the same seed the element
order is the same in every run (and the sequence of per-epoch orders is the same when
``reshuffle_each_iteration`` is on); ``deterministic=True`` also makes parallel map and
interleave keep their input order (``tf.data.Options.deterministic``).
"""

from __future__ import annotations

import collections.abc
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from keras_bert_zoo.inputs import INPUT_MASK
from keras_bert_zoo.utils.errors import UserError

AUTOTUNE = tf.data.AUTOTUNE

FilePatterns = str | Sequence[str]


# --------------------------------------------------------------------------- files


def list_files(file_patterns: FilePatterns) -> list[str]:
    """Expands glob patterns (or comma-separated patterns) into a sorted file list.

    Sorting makes the list, and hence file sharding, identical on every worker.
    Raises ``ValueError`` when nothing matches.
    """
    if isinstance(file_patterns, (str, bytes)):
        file_patterns = [file_patterns]
    patterns: list[str] = []
    for p in file_patterns:
        p = p.decode() if isinstance(p, bytes) else str(p)
        patterns.extend(part for part in p.split(",") if part)
    files: set[str] = set()
    for pattern in patterns:
        matched = tf.io.gfile.glob(pattern)
        if not matched:
            raise UserError(f"No files match {pattern!r}.")
        files.update(matched)
    return sorted(files)


def shard_info(
    num_files: int, input_context: tf.distribute.InputContext | None
) -> tuple[str, int, int]:
    """Returns ``(mode, num_shards, index)`` with mode ``"none"``, ``"files"`` or ``"records"``."""
    if input_context is None or input_context.num_input_pipelines <= 1:
        return "none", 1, 0
    n = input_context.num_input_pipelines
    i = input_context.input_pipeline_id
    if num_files >= n:
        return "files", n, i
    return "records", n, i


def _with_options(dataset: tf.data.Dataset, deterministic: bool | None) -> tf.data.Dataset:
    if deterministic is None:
        return dataset
    options = tf.data.Options()
    options.deterministic = deterministic
    return dataset.with_options(options)


def file_names(
    files: list[str], mode: str, num_shards: int, index: int, *, shuffle: bool, seed: int | None
) -> tf.data.Dataset:
    """The names of the files this input pipeline reads: its share of ``files`` when
    ``shard_info`` shards files (``mode``, ``num_shards``, ``index``: its answer), in a
    new seeded order each epoch when ``shuffle``."""
    file_ds = tf.data.Dataset.from_tensor_slices(files)
    if mode == "files":
        file_ds = file_ds.shard(num_shards, index)
    if shuffle:
        file_ds = file_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    return file_ds


def _file_source(
    files: list[str],
    reader: Callable[[tf.Tensor], tf.data.Dataset],
    *,
    input_context: tf.distribute.InputContext | None,
    shuffle_files: bool,
    seed: int | None,
    cycle_length: int | None,
    block_length: int,
    num_parallel_reads: int | None,
    deterministic: bool | None,
) -> tf.data.Dataset:
    mode, n, i = shard_info(len(files), input_context)
    file_ds = file_names(files, mode, n, i, shuffle=shuffle_files, seed=seed)

    if mode == "records":

        def read(path):
            return reader(path).shard(n, i)

    else:
        read = reader

    num_local_files = len(files) if mode != "files" else len(range(i, len(files), n))
    if cycle_length is None:
        cycle_length = max(1, min(num_local_files, 16))
    if num_local_files <= 1:
        return _with_options(file_ds.flat_map(read), deterministic)
    ds = file_ds.interleave(
        read,
        cycle_length=cycle_length,
        block_length=block_length,
        num_parallel_calls=num_parallel_reads,
        deterministic=deterministic,
    )
    return _with_options(ds, deterministic)


# ------------------------------------------------------------------------- sources


def text_line_dataset(
    file_patterns: FilePatterns,
    *,
    input_context: tf.distribute.InputContext | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    skip_empty_lines: bool = True,
    strip: bool = True,
    compression_type: str | None = None,
    cycle_length: int | None = None,
    block_length: int = 1,
    num_parallel_reads: int | None = AUTOTUNE,
    deterministic: bool | None = True,
) -> tf.data.Dataset:
    """Lines of UTF-8 text files as a dataset of scalar ``tf.string``.

    Args:
      file_patterns: a glob pattern, comma-separated patterns, or a list of them.
      input_context: shard for this input pipeline (see module docstring).
      shuffle: shuffle the order of files (with ``seed``). Shuffle lines with
        ``make_plain_batches(shuffle_buffer=...)``.
      skip_empty_lines: drop lines that are empty (after ``strip``).
      strip: strip surrounding whitespace.
      compression_type: ``None``, ``"GZIP"`` or ``"ZLIB"``.
      cycle_length, block_length, num_parallel_reads: interleave parameters.
      deterministic: keep the interleave order fixed (``tf.data.Options``).
    """
    files = list_files(file_patterns)

    def reader(path):
        ds = tf.data.TextLineDataset(path, compression_type=compression_type)
        if strip:
            ds = ds.map(tf.strings.strip)
        if skip_empty_lines:
            ds = ds.filter(lambda line: tf.strings.length(line) > 0)
        return ds

    return _file_source(
        files,
        reader,
        input_context=input_context,
        shuffle_files=shuffle,
        seed=seed,
        cycle_length=cycle_length,
        block_length=block_length,
        num_parallel_reads=num_parallel_reads,
        deterministic=deterministic,
    )


def tfrecord_dataset(
    file_patterns: FilePatterns,
    parse_fn: Callable[[tf.Tensor], Any] | None = None,
    *,
    input_context: tf.distribute.InputContext | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    compression_type: str | None = None,
    cycle_length: int | None = None,
    block_length: int = 1,
    num_parallel_reads: int | None = AUTOTUNE,
    num_parallel_calls: int | None = AUTOTUNE,
    deterministic: bool | None = True,
) -> tf.data.Dataset:
    """Records of TFRecord files, optionally parsed one by one with ``parse_fn``.

    For large datasets it is faster to leave ``parse_fn=None`` and pass a parser that
    accepts a batch of serialized records as ``make_plain_batches(preprocess_fn=...)``
    (``tf.io.parse_example`` is vectorised); ``pretraining.parse_pretraining_examples``
    accepts both.
    """
    files = list_files(file_patterns)

    def reader(path):
        return tf.data.TFRecordDataset(path, compression_type=compression_type)

    ds = _file_source(
        files,
        reader,
        input_context=input_context,
        shuffle_files=shuffle,
        seed=seed,
        cycle_length=cycle_length,
        block_length=block_length,
        num_parallel_reads=num_parallel_reads,
        deterministic=deterministic,
    )
    if parse_fn is not None:
        ds = ds.map(parse_fn, num_parallel_calls=num_parallel_calls, deterministic=deterministic)
    return ds


def tfds_dataset(
    name_or_builder: Any,
    split: str,
    *,
    data_dir: str | None = None,
    input_context: tf.distribute.InputContext | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    as_supervised: bool = False,
    builder_kwargs: dict | None = None,
    decoders: Any = None,
    deterministic: bool | None = True,
) -> tf.data.Dataset:
    """A tensorflow-datasets split that is already prepared in ``data_dir``.

    Never downloads (``download=False``, ``try_gcs=False``): prepare the dataset
    beforehand (``tfds build`` or ``builder.download_and_prepare()``).

    Args:
      name_or_builder: a registered dataset name (``"glue/sst2"``, ``"my_ds:1.0.0"``)
        or a ``tfds.core.DatasetBuilder`` instance.
      split: a split expression (``"train"``, ``"train[:90%]"``).
      input_context: when the split has at least as many shard files as input
        pipelines, tfds shards the files (``ReadConfig.input_context``); otherwise
        every pipeline reads the split and keeps every n-th record.
      shuffle: shuffle the shard files, with ``seed`` (``ReadConfig.shuffle_seed``).
    """
    import tensorflow_datasets as tfds

    if isinstance(name_or_builder, tfds.core.DatasetBuilder):
        builder = name_or_builder
    else:
        builder = tfds.builder(name_or_builder, data_dir=data_dir, **(builder_kwargs or {}))
    if not builder.is_prepared():
        raise FileNotFoundError(
            f"tensorflow-datasets {builder.info.full_name!r} is not prepared in "
            f"{builder.data_dir!r}; this pipeline never downloads: build it first "
            "(`tfds build` or builder.download_and_prepare())."
        )
    num_files = builder.info.splits[split].num_shards
    mode, n, i = shard_info(num_files, input_context)

    options = tf.data.Options()
    if deterministic is not None:
        options.deterministic = deterministic
    read_config = tfds.ReadConfig(
        options=options,
        shuffle_seed=seed,
        input_context=input_context if mode == "files" else None,
        try_autocache=False,
    )
    ds = builder.as_dataset(
        split=split,
        shuffle_files=shuffle,
        read_config=read_config,
        as_supervised=as_supervised,
        decoders=decoders,
    )
    if mode == "records":
        if shuffle:
            raise UserError(
                f"Split {split!r} has {num_files} file(s) for {n} input pipelines, so records "
                "are sharded, which needs the same file order on every pipeline: use "
                "shuffle=False and shuffle records with make_plain_batches(shuffle_buffer=...)."
            )
        ds = ds.shard(n, i)
    return ds


# ------------------------------------------------------------------------ batching


def _find_mask(element: Any, mask_key: str) -> tf.Tensor | None:
    if isinstance(element, collections.abc.Mapping):
        if mask_key in element:
            return element[mask_key]
        values = element.values()
    elif isinstance(element, (tuple, list)):
        values = element
    else:
        return None
    for value in values:
        found = _find_mask(value, mask_key)
        if found is not None:
            return found
    return None


def _sequence_lengths(element: Any, mask_key: str) -> tf.Tensor:
    mask = _find_mask(element, mask_key)
    if mask is None:
        raise UserError(
            f"Dynamic padding and bucketing need a {mask_key!r} feature in the "
            "preprocessed element (or pass length_fn)."
        )
    return tf.reduce_sum(tf.cast(tf.not_equal(mask, 0), tf.int32), axis=-1)


def trim_to_longest(
    element: Any, *, mask_key: str = INPUT_MASK, length: tf.Tensor | None = None
) -> Any:
    """Cuts every padded sequence feature of a batch to the batch's longest sequence.

    Sequence features are the tensors whose axis at the ``mask_key`` feature's last axis
    has that axis's static size (for ``[B, S]`` batches: axis 1) — e.g. input_word_ids,
    input_mask, input_type_ids — so a ``[B, 128]`` batch whose longest sequence has 37
    tokens becomes ``[B, 37]``. Works for a single unbatched element (axis 0) and for
    multiple choice's ``[B, choices, S]`` (axis 2) too. Other features (labels,
    masked_lm_positions of another size) are untouched. ``data.bucketing.trim_batch``
    also rounds the length up to a few values (bounded traced shapes).
    """
    mask = _find_mask(element, mask_key)
    if mask is None:
        raise UserError(f"No {mask_key!r} feature to trim by.")
    axis = mask.shape.rank - 1
    seq_dim = mask.shape[axis]
    if length is None:
        length = tf.reduce_max(_sequence_lengths(element, mask_key))

    def trim(t):
        if not isinstance(t, tf.Tensor) or t.shape.rank is None or t.shape.rank <= axis:
            return t
        if seq_dim is None or t.shape[axis] != seq_dim:
            return t
        return t[(slice(None),) * axis + (slice(None, length),)]

    return tf.nest.map_structure(trim, element)


def _cache_shuffle_repeat(
    dataset: tf.data.Dataset,
    cache: bool | str,
    shuffle_buffer: int | None,
    seed: int | None,
    reshuffle_each_iteration: bool,
    repeat: bool | int,
) -> tf.data.Dataset:
    if cache:
        dataset = dataset.cache(cache if isinstance(cache, str) else "")
    if shuffle_buffer:
        dataset = dataset.shuffle(
            shuffle_buffer, seed=seed, reshuffle_each_iteration=reshuffle_each_iteration
        )
    if repeat is True:
        return dataset.repeat()
    return dataset.repeat(int(repeat)) if repeat else dataset


def _finish(dataset: tf.data.Dataset, prefetch: int | None, deterministic: bool | None):
    if prefetch:
        dataset = dataset.prefetch(prefetch)
    return _with_options(dataset, deterministic)


def make_plain_batches(
    dataset: tf.data.Dataset,
    preprocess_fn: Callable[[Any], Any] | None = None,
    batch_size: int = 32,
    *,
    drop_remainder: bool = False,
    shuffle_buffer: int | None = None,
    seed: int | None = None,
    reshuffle_each_iteration: bool = True,
    repeat: bool | int = False,
    cache: bool | str = False,
    pad_to_longest: bool = False,
    mask_key: str = INPUT_MASK,
    num_parallel_calls: int | None = AUTOTUNE,
    deterministic: bool | None = True,
    prefetch: int | None = AUTOTUNE,
) -> tf.data.Dataset:
    """Caches, shuffles, repeats, batches, preprocesses and prefetches ``dataset``.

    Order of operations: ``cache`` (the raw source, so preprocessing changes never
    need a stale cache) -> ``shuffle`` -> ``repeat`` -> ``batch`` -> ``preprocess_fn``
    on the whole batch (one vectorised call per batch, run in parallel) -> optional
    dynamic padding -> ``prefetch``. ``make_bucketed_batches`` groups by length instead.

    Args:
      dataset: unbatched raw elements (e.g. strings, ``(text, label)`` tuples, dicts).
      preprocess_fn: called on a *batch* of raw elements (the same structure with a
        leading batch axis), e.g. ``keras_bert_zoo.text.BertPreprocessor`` or a batched
        record parser. Must be traceable by ``tf.function``. ``None`` keeps elements.
      batch_size: examples per batch (per replica under a strategy: see
        ``distributed_dataset_fn``).
      drop_remainder: drop the last partial batch (static batch dimension; required
        on TPU and recommended with ``jit_compile``).
      shuffle_buffer: shuffle examples with this buffer (``None`` or 0: no shuffle).
      seed: shuffle seed; the same seed gives the same order in every run.
      reshuffle_each_iteration: a different (still seed-determined) order each epoch.
      repeat: ``True`` repeats forever, an int repeats that many epochs.
      cache: ``True`` caches the raw source in memory, a string caches it to files
        with that prefix.
      pad_to_longest: dynamic padding: after ``preprocess_fn`` pads to its fixed
        length, cut each batch's sequence features to its longest sequence (see
        ``trim_to_longest``).
      mask_key: the feature whose nonzero entries count a sequence's tokens.
      num_parallel_calls, deterministic: for ``map``; ``deterministic`` is also set
        on ``tf.data.Options``.
      prefetch: prefetch buffer (``None`` or 0 disables).
    """
    ds = _cache_shuffle_repeat(
        dataset, cache, shuffle_buffer, seed, reshuffle_each_iteration, repeat
    ).batch(batch_size, drop_remainder=drop_remainder)
    if preprocess_fn is not None:
        ds = ds.map(
            preprocess_fn, num_parallel_calls=num_parallel_calls, deterministic=deterministic
        )
        if drop_remainder:
            ds = ds.map(lambda *x: _set_batch_dim(_unwrap(x), batch_size))
    if pad_to_longest:
        ds = ds.map(
            lambda *x: trim_to_longest(_unwrap(x), mask_key=mask_key),
            num_parallel_calls=num_parallel_calls,
            deterministic=deterministic,
        )
    return _finish(ds, prefetch, deterministic)


def make_bucketed_batches(
    dataset: tf.data.Dataset,
    preprocess_fn: Callable[[Any], Any] | None = None,
    batch_size: int = 32,
    *,
    bucket_boundaries: Sequence[int],
    bucket_batch_sizes: Sequence[int] | None = None,
    pad_to_bucket_boundary: bool = False,
    preprocess_chunk_size: int | None = None,
    length_fn: Callable[[Any], tf.Tensor] | None = None,
    drop_remainder: bool = False,
    shuffle_buffer: int | None = None,
    seed: int | None = None,
    reshuffle_each_iteration: bool = True,
    repeat: bool | int = False,
    cache: bool | str = False,
    mask_key: str = INPUT_MASK,
    num_parallel_calls: int | None = AUTOTUNE,
    deterministic: bool | None = True,
    prefetch: int | None = AUTOTUNE,
) -> tf.data.Dataset:
    """Batches of sequences of similar length (``tf.data.Dataset.bucket_by_sequence_length``).

    Cache, shuffle and repeat as ``make_plain_batches``; then raw elements are
    preprocessed in chunks of ``preprocess_chunk_size`` (vectorised), unbatched,
    trimmed to their own length, and grouped so that each batch holds sequences of
    similar length, padded to the longest in the batch (or to the bucket boundary with
    ``pad_to_bucket_boundary``, which pads to ``boundary - 1`` and needs every length
    ``< boundaries[-1]``). Lengths ``< boundaries[0]`` go to bucket 0, etc.

    Args:
      dataset, preprocess_fn, batch_size, drop_remainder, shuffle_buffer, seed,
        reshuffle_each_iteration, repeat, cache, mask_key, num_parallel_calls,
        deterministic, prefetch: as in ``make_plain_batches``.
      bucket_boundaries: strictly increasing sequence lengths between buckets.
      bucket_batch_sizes: batch size per bucket (``len(bucket_boundaries) + 1``);
        defaults to ``batch_size`` for all.
      pad_to_bucket_boundary: pad each batch to its bucket's boundary.
      preprocess_chunk_size: elements per vectorised ``preprocess_fn`` call (defaults
        to ``batch_size``).
      length_fn: length of a preprocessed element; defaults to the number of nonzero
        entries of its ``mask_key`` feature (and then elements are trimmed first).
    """
    boundaries = [int(b) for b in bucket_boundaries]
    if boundaries != sorted(set(boundaries)):
        raise UserError(f"bucket_boundaries must increase strictly: {boundaries}")
    sizes = list(bucket_batch_sizes or [batch_size] * (len(boundaries) + 1))
    if len(sizes) != len(boundaries) + 1:
        raise UserError("bucket_batch_sizes needs len(bucket_boundaries) + 1 entries.")

    def parallel_map(d, fn):
        return d.map(fn, num_parallel_calls=num_parallel_calls, deterministic=deterministic)

    ds = _cache_shuffle_repeat(
        dataset, cache, shuffle_buffer, seed, reshuffle_each_iteration, repeat
    )
    if preprocess_fn is not None:
        ds = parallel_map(ds.batch(preprocess_chunk_size or batch_size), preprocess_fn).unbatch()

    def element_length(*x):
        x = _unwrap(x)
        if length_fn is not None:
            return tf.cast(length_fn(x), tf.int32)
        # The longest of an element's sequences (multiple choice: of its choices).
        return tf.reduce_max(_sequence_lengths(x, mask_key))

    if length_fn is None:
        ds = parallel_map(ds, lambda *x: trim_to_longest(_unwrap(x), mask_key=mask_key))
    ds = ds.bucket_by_sequence_length(
        element_length,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=sizes,
        pad_to_bucket_boundary=pad_to_bucket_boundary,
        drop_remainder=drop_remainder,
    )
    return _finish(ds, prefetch, deterministic)


_BUCKETING_ONLY = (
    "bucket_batch_sizes",
    "pad_to_bucket_boundary",
    "preprocess_chunk_size",
    "length_fn",
)


def _batches(dataset, preprocess_fn=None, batch_size=32, *, bucket_boundaries=None, **kwargs):
    """`make_bucketed_batches` when `bucket_boundaries` is given, else
    `make_plain_batches` (which ignores the bucketing arguments, as `make_batches` did):
    for the callers that take either's keyword arguments."""
    if bucket_boundaries is None:
        for key in _BUCKETING_ONLY:
            kwargs.pop(key, None)
        return make_plain_batches(dataset, preprocess_fn, batch_size, **kwargs)
    if kwargs.pop("pad_to_longest", False):
        raise UserError("Use either bucket_boundaries or pad_to_longest, not both.")
    return make_bucketed_batches(
        dataset, preprocess_fn, batch_size, bucket_boundaries=bucket_boundaries, **kwargs
    )


def make_batches(dataset, preprocess_fn=None, batch_size=32, **kwargs) -> tf.data.Dataset:
    """Deprecated: call ``make_plain_batches`` or ``make_bucketed_batches``.

    Dispatches on ``bucket_boundaries``, as the one builder of two modes it replaces
    did. Kept for one release.
    """
    warnings.warn(
        "make_batches is deprecated: use make_plain_batches, or make_bucketed_batches "
        "for bucket_boundaries",
        DeprecationWarning,
        stacklevel=2,
    )
    return _batches(dataset, preprocess_fn, batch_size, **kwargs)


def _set_batch_dim(element: Any, batch_size: int) -> Any:
    # A preprocessor built on ragged tensors loses the static batch size; restore it
    # when every batch is full, so that XLA and TPUs see static shapes.
    def fix(t):
        if isinstance(t, tf.Tensor) and t.shape.rank and t.shape[0] is None:
            t = tf.ensure_shape(t, [batch_size] + t.shape.as_list()[1:])
        return t

    return tf.nest.map_structure(fix, element)


def _unwrap(args: tuple) -> Any:
    # Dataset.map spreads tuple elements over positional arguments.
    return args[0] if len(args) == 1 else args


# --------------------------------------------------------------------- distribution


def distributed_dataset_fn(
    source_fn: Callable[[tf.distribute.InputContext | None], tf.data.Dataset],
    global_batch_size: int,
    preprocess_fn: Callable[[Any], Any] | None = None,
    **batch_kwargs: Any,
) -> Callable[[tf.distribute.InputContext | None], tf.data.Dataset]:
    """A ``fn(input_context)`` for ``strategy.distribute_datasets_from_function``.

    ``source_fn(input_context)`` builds this pipeline's shard of the raw data (e.g.
    ``lambda ctx: text_line_dataset(files, input_context=ctx)``); the result is batched
    with ``make_plain_batches`` (``make_bucketed_batches`` when ``batch_kwargs`` hold
    ``bucket_boundaries``) and ``preprocess_fn`` at the per-replica batch
    size ``input_context.get_per_replica_batch_size(global_batch_size)``. Called with
    no context (single device), the batch size is ``global_batch_size``.

    For TPUStrategy (and XLA generally) pass ``drop_remainder=True`` and keep
    ``pad_to_longest`` / ``bucket_boundaries`` off, so that every batch has one static
    shape.

    Example::

        def source(ctx):
            return text_line_dataset("train-*.txt", input_context=ctx, shuffle=True, seed=1)

        dataset_fn = distributed_dataset_fn(
            source, global_batch_size=256, preprocess_fn=preprocessor,
            shuffle_buffer=10_000, seed=1, repeat=True, drop_remainder=True)
        dist = strategy.distribute_datasets_from_function(dataset_fn)
    """

    def dataset_fn(input_context: tf.distribute.InputContext | None = None):
        if input_context is None:
            batch_size = global_batch_size
        else:
            batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        ds = source_fn(input_context)
        return _batches(ds, preprocess_fn, batch_size, **batch_kwargs)

    return dataset_fn
