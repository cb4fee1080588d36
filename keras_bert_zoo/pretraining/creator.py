"""Static pretraining data: raw text or Wikipedia dumps -> sharded TFRecords, on every core.

``create_pretraining_data`` is the library behind ``tools/create_pretraining_data.py``.
It produces records in google-research/bert's format with its algorithm (see
``instances``) and its flags and defaults, but streams and runs in parallel:

* **Streaming.** The main process reads the input files one document at a time
  (``corpus``) and groups consecutive documents of a file into *chunks* of about
  ``chunk_chars`` characters (and at least two documents; a file's last chunk may be
  smaller). A chunk is the unit of work and of randomness, named by a ``ChunkKey``: its
  file's place in the input list and its own place in that file, so that files can be
  read independently (``beam_pipeline`` reads them in parallel). Memory holds the
  chunks in flight (two per worker) and nothing else, so it does not grow with the
  corpus.
* **Random next.** The original draws the random "B" segment from any document of
  the corpus, which it therefore holds in memory (20 GB for Wikipedia). Here it is
  drawn from the other documents of the same chunk: a uniform pick among a window of
  consecutive documents (``chunk_chars`` of text, 1M characters by default: about
  100-300 Wikipedia articles). Documents that were cut because they exceed half a
  chunk can supply random-next segments to their own other parts.
* **Parallel.** Worker processes (one per core by default) clean wikitext, split
  sentences, tokenize with the batched tf-text ``BertTokenizer``, build the
  instances of all ``dupe_factor`` passes in one vectorised call
  (``instances.create_pretraining_instances``), mask them, shuffle the chunk's
  instances and serialize them (``writer.encode_pretraining_examples``). The main process
  writes the chunks' records in chunk order, round-robin over the output files as
  the original does (``writer.shard_of``).
* **Deterministic.** A chunk draws everything from stateless seeds derived from
  ``random_seed`` and its key (``chunk_seeds``); chunks are formed from the input
  alone. The same inputs and flags give byte-identical files whatever the number of
  workers, and whatever the engine: ``beam_pipeline`` writes the same bytes.
* **Atomic.** Records go to temporary files that are renamed to their final names
  only when the whole run succeeded; then the run's statistics are written beside
  them (``writer.statistics_path``: ``train.tfrecord@4`` -> ``train.stats.json``).

Deliberate deviations from the original: instances are shuffled within their chunk
(the original shuffles all instances of the corpus globally; readers shuffle files and
records again), a file boundary ends a document (and a chunk), random-next comes from
the chunk, whole-word masking never joins a ``##`` piece across ``[SEP]``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import multiprocessing
import os
import time
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
from absl import logging

from keras_bert_zoo.pretraining import corpus, writer
from keras_bert_zoo.utils.errors import UserError

__all__ = [
    "ChunkKey",
    "ChunkProcessor",
    "ChunkResult",
    "ChunkStats",
    "CreationConfig",
    "CreationPlan",
    "CreationSummary",
    "check_instances_made",
    "chunk_seeds",
    "create_pretraining_data",
    "iter_chunks",
    "iter_file_chunks",
    "log_inputs",
    "log_summary",
    "plan_creation",
    "write_statistics",
]

_LOGGED_LOCATIONS = 5


@dataclasses.dataclass(frozen=True)
class CreationConfig:
    """The settings of one run (google-research/bert's flags and ours).

    The first eleven fields are create_pretraining_data.py's flags with its defaults.
    """

    vocab_file: str
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    random_seed: int = 12345
    chunk_chars: int = 1_000_000
    tokenize_batch_size: int = 2048

    def validate(self) -> None:
        problems = []
        if self.max_seq_length < 5:
            problems.append(
                f"max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP]), got {self.max_seq_length}"
            )
        if self.max_predictions_per_seq < 1:
            problems.append(
                f"max_predictions_per_seq must be >= 1, got {self.max_predictions_per_seq}"
            )
        if not 0.0 < self.masked_lm_prob <= 1.0:
            problems.append(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            problems.append(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.dupe_factor < 1:
            problems.append(f"dupe_factor must be >= 1, got {self.dupe_factor}")
        if self.chunk_chars < 1:
            problems.append(f"chunk_chars must be >= 1, got {self.chunk_chars}")
        if os.path.isdir(self.vocab_file):
            inside = os.path.join(self.vocab_file, "vocab.txt")
            problems.append(
                f"vocab_file {self.vocab_file!r} is a directory, not a vocabulary file"
                + (f" (it holds {inside!r})" if os.path.isfile(inside) else "")
            )
        elif not os.path.isfile(self.vocab_file):
            problems.append(f"vocab_file {self.vocab_file!r} does not exist")
        if problems:
            raise UserError("; ".join(problems))


class ChunkKey(NamedTuple):
    """A chunk's name: its file's index in the run's input list, its index in that file.

    Keys sort in the order the local creator processes chunks, which is the order
    records are written in.
    """

    file: int
    chunk: int


def chunk_seeds(random_seed: int, key: ChunkKey):
    """(TensorFlow stateless seed ``[2]``, numpy ``Generator``) of the chunk ``key``.

    A chunk of the first file draws what chunk ``key.chunk`` drew before chunks were
    keyed by file (numpy pads a seed of fewer than four words with zeros), so a
    single-file run writes the same records as before.
    """
    import tensorflow as tf

    seed = tf.random.experimental.stateless_fold_in(
        tf.constant([random_seed, key.file], tf.int64), key.chunk
    )
    return tf.cast(seed, tf.int64), np.random.default_rng([random_seed, key.chunk, key.file])


@dataclasses.dataclass
class ChunkStats:
    """What a worker saw and produced in one chunk (summed into the summary)."""

    documents: int = 0
    empty_documents: int = 0
    one_sentence_documents: int = 0
    sentences: int = 0
    empty_sentences: int = 0
    long_sentences: int = 0
    corpus_tokens: int = 0
    instances: int = 0
    instance_tokens: int = 0
    masked_tokens: int = 0
    random_next: int = 0
    long_sentence_locations: list = dataclasses.field(default_factory=list)
    empty_document_locations: list = dataclasses.field(default_factory=list)

    def merge(self, other: ChunkStats) -> None:
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, list):
                mine.extend(theirs[: max(0, _LOGGED_LOCATIONS - len(mine))])
            else:
                setattr(self, field.name, mine + theirs)


@dataclasses.dataclass
class ChunkResult:
    index: ChunkKey
    records: bytes
    lengths: np.ndarray
    stats: ChunkStats


class ChunkProcessor:
    """Turns one chunk of raw documents into serialized, shuffled records.

    Holds the tokenizer, the masker and the traced instance function; one per worker
    process (or one in the main process with ``num_workers=0``).
    """

    def __init__(self, config: CreationConfig):
        import tensorflow as tf

        from keras_bert_zoo.pretraining import instances
        from keras_bert_zoo.text import BertTokenizer
        from keras_bert_zoo.text.masking import PretrainingMasker

        self.config = config
        self.tokenizer = BertTokenizer(vocabulary=config.vocab_file, lowercase=config.do_lower_case)
        self.masker = PretrainingMasker(
            config.vocab_file,
            max_predictions_per_seq=config.max_predictions_per_seq,
            masked_lm_prob=config.masked_lm_prob,
            whole_word_mask=config.do_whole_word_mask,
        )
        self._tokenize = tf.function(
            self.tokenizer.tokenize,
            input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False,
        )

        @tf.function(
            input_signature=[
                tf.TensorSpec([None], tf.int32),
                tf.TensorSpec([None], tf.int64),
                tf.TensorSpec([None], tf.int64),
                tf.TensorSpec([2], tf.int64),
            ],
            autograph=False,
        )
        def make_instances(token_ids, sentence_lengths, sentences_per_document, seed):
            sentences = tf.RaggedTensor.from_row_lengths(token_ids, sentence_lengths)
            documents = tf.RaggedTensor.from_row_lengths(sentences, sentences_per_document)
            return instances.create_pretraining_instances(
                documents,
                seed,
                self.masker,
                config.max_seq_length,
                config.short_seq_prob,
                duplicates=config.dupe_factor,
            )

        self._make_instances = make_instances

    @staticmethod
    def _location(document: corpus.RawDocument, sentence: int = 0) -> str:
        """Where a document's sentence comes from: file and line, or file and article."""
        if document.lines is not None:
            return f"{document.source}:{document.first_line + sentence}"
        return f"{document.source}: article {document.title!r}"

    def tokenize(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(flat token ids, tokens per sentence) of a list of strings."""
        import tensorflow as tf

        values, lengths = [], []
        size = self.config.tokenize_batch_size
        for start in range(0, len(sentences), size):
            ids = self._tokenize(tf.constant(sentences[start : start + size], tf.string))
            values.append(ids.flat_values.numpy())
            lengths.append(ids.row_lengths().numpy())
        if not values:
            return np.zeros([0], np.int32), np.zeros([0], np.int64)
        return np.concatenate(values), np.concatenate(lengths)

    def __call__(self, index: ChunkKey, documents: list[corpus.RawDocument]) -> ChunkResult:
        import tensorflow as tf

        config = self.config
        stats = ChunkStats()
        texts, sentence_counts = [], []
        for document in documents:
            sentences = corpus.document_sentences(document)
            texts.extend(sentences)
            sentence_counts.append(len(sentences))
        token_ids, token_counts = self.tokenize(texts)
        document_of_sentence = np.repeat(np.arange(len(sentence_counts)), sentence_counts)
        first_sentence = np.cumsum(sentence_counts) - sentence_counts
        stats.sentences = len(texts)
        stats.corpus_tokens = int(token_counts.sum())
        # Sentences longer than a whole instance are truncated by the algorithm, as in
        # the original; count them and remember where the first ones are.
        max_num_tokens = config.max_seq_length - 3
        long_rows = np.flatnonzero(token_counts > max_num_tokens)
        stats.long_sentences = len(long_rows)
        for row in long_rows[:_LOGGED_LOCATIONS]:
            document = document_of_sentence[row]
            stats.long_sentence_locations.append(
                self._location(documents[document], row - first_sentence[document])
            )
        # Empty sentences (nothing left after tokenization) and then empty documents
        # are dropped, as the original does.
        keep = token_counts > 0
        stats.empty_sentences = int((~keep).sum())
        kept_per_document = np.bincount(
            document_of_sentence[keep], minlength=len(sentence_counts)
        ).astype(np.int64)
        empty = kept_per_document == 0
        stats.empty_documents = int(empty.sum())
        stats.empty_document_locations = [
            self._location(documents[i]) for i in np.flatnonzero(empty)[:_LOGGED_LOCATIONS]
        ]
        sentences_per_document = kept_per_document[~empty]
        stats.documents = len(sentences_per_document)
        stats.one_sentence_documents = int((sentences_per_document == 1).sum())
        token_counts = token_counts[keep]
        if stats.documents == 0:
            return ChunkResult(index, b"", np.zeros([0], np.int64), stats)

        seed, rng = chunk_seeds(config.random_seed, index)
        out = self._make_instances(
            tf.constant(token_ids, tf.int32),
            tf.constant(token_counts, tf.int64),
            tf.constant(sentences_per_document, tf.int64),
            seed,
        )
        features = {name: value.numpy() for name, value in out.items()}
        count = len(features["next_sentence_labels"])
        order = rng.permutation(count)
        stats.instances = count
        stats.instance_tokens = int(features["input_mask"].sum())
        stats.masked_tokens = int(features["masked_lm_weights"].sum())
        stats.random_next = int(features["next_sentence_labels"].sum())
        records, lengths = writer.encode_pretraining_examples(features, order=order)
        return ChunkResult(index, records, lengths, stats)


@dataclasses.dataclass
class CreationSummary:
    """What a run read, skipped and wrote."""

    input_files: list
    output_files: list
    records_per_file: list
    corpus: corpus.CorpusStats
    chunks: int
    stats: ChunkStats
    seconds: float
    workers: int
    config: CreationConfig
    statistics_file: str | None = None
    # How the work was spread when not on local worker processes ("Beam's DirectRunner").
    engine: str | None = None

    @property
    def masked_fraction(self) -> float:
        return self.stats.masked_tokens / max(1, self.stats.instance_tokens)

    @property
    def random_next_fraction(self) -> float:
        return self.stats.random_next / max(1, self.stats.instances)

    def lines(self) -> list[str]:
        s, c = self.stats, self.corpus
        where = self.engine or f"with {self.workers} worker process(es)"
        out = [
            f"Read {c.files} file(s), {c.input_bytes / 1e6:.1f} MB, in {self.seconds:.1f} s "
            f"{where}, {self.chunks} chunk(s)",
            f"Documents: {s.documents} used; skipped {s.empty_documents} empty"
            + (
                f"; MediaWiki pages: {c.pages} read, {c.redirect_pages} redirects and "
                f"{c.non_article_pages} non-article pages skipped"
                if c.pages
                else ""
            )
            + (f"; {c.split_documents} over-long documents cut" if c.split_documents else ""),
            f"One-sentence documents (always random next, as in the original): "
            f"{s.one_sentence_documents}",
            f"Sentences: {s.sentences} ({s.empty_sentences} empty after tokenization skipped, "
            f"{s.long_sentences} longer than max_seq_length - 3 tokens truncated); "
            f"invalid UTF-8 lines: {c.invalid_utf8_lines} (bad bytes dropped)",
            f"Tokens: {s.corpus_tokens} in the corpus, {s.instance_tokens} in instances",
            f"Instances: {s.instances} "
            f"({s.instances / max(self.seconds, 1e-9):.0f}/s), masked fraction "
            f"{self.masked_fraction:.4f} of instance tokens, NSP random next "
            f"{self.random_next_fraction:.4f} (is-next {1 - self.random_next_fraction:.4f})",
            self._written(),
        ]
        if self.statistics_file:
            out.append(f"Statistics: {self.statistics_file}")
        return out

    def _written(self) -> str:
        """Where the records went: each file, or for many shards (the README's 256) their
        count, first and last and the records a file (each file's count is in the
        statistics file)."""
        files, counts = self.output_files, self.records_per_file
        if len(files) <= 4:
            return "Wrote " + ", ".join(f"{n} to {p}" for p, n in zip(files, counts, strict=True))
        empty = sum(1 for n in counts if n == 0)
        return (
            f"Wrote {sum(counts)} to {len(files)} files ({files[0]} ... {files[-1]}), "
            f"{min(counts)} to {max(counts)} a file" + (f", {empty} empty" if empty else "")
        )

    def statistics(self) -> dict:
        """What the statistics file holds: the same for both engines (no timing), so
        two runs on the same input with the same flags write the same file."""
        s = self.stats
        return {
            "instances": s.instances,
            "masked_fraction": self.masked_fraction,
            "random_next_fraction": self.random_next_fraction,
            "random_next": s.random_next,
            "tokens": {
                "corpus": s.corpus_tokens,
                "instances": s.instance_tokens,
                "masked": s.masked_tokens,
            },
            "documents": s.documents,
            "empty_documents": s.empty_documents,
            "one_sentence_documents": s.one_sentence_documents,
            "sentences": s.sentences,
            "empty_sentences": s.empty_sentences,
            "long_sentences": s.long_sentences,
            "chunks": self.chunks,
            "corpus": dataclasses.asdict(self.corpus),
            "input_files": list(self.input_files),
            "records_per_file": {
                os.path.basename(path): count
                for path, count in zip(self.output_files, self.records_per_file, strict=True)
            },
            "config": dataclasses.asdict(self.config),
        }


def write_statistics(summary: CreationSummary) -> None:
    """Writes ``summary.statistics()`` as JSON to ``summary.statistics_file``, atomically."""
    from keras_bert_zoo.utils import atomic

    atomic.write_json_atomically(summary.statistics_file, summary.statistics())


def _chunks(
    documents: Iterator[corpus.RawDocument], chunk_chars: int
) -> Iterator[list[corpus.RawDocument]]:
    chunk, size = [], 0
    for document in documents:
        chunk.append(document)
        size += document.size
        if size >= chunk_chars and len(chunk) >= 2:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def iter_file_chunks(
    file_index: int,
    input_file: corpus.InputFile,
    stats: corpus.CorpusStats,
    chunk_chars: int,
    progress: list | None = None,
) -> Iterator[tuple[ChunkKey, list[corpus.RawDocument]]]:
    """The chunks of one input file with their keys: what either engine processes.

    Args:
        file_index: the file's place in the run's input list (``ChunkKey.file``).
        input_file: the file (``corpus.sniff_input_file``).
        stats: counts of what was read, updated as the file is read.
        chunk_chars: characters of raw text per chunk; documents longer than half of
            it are cut.
        progress: optional one-element list holding the compressed bytes read so far.
    """
    documents = corpus.iter_file_documents(
        input_file, stats, max_document_chars=max(1, chunk_chars // 2), progress=progress
    )
    for number, chunk in enumerate(_chunks(documents, chunk_chars)):
        yield ChunkKey(file_index, number), chunk


def iter_chunks(
    input_files: list[corpus.InputFile],
    stats: corpus.CorpusStats,
    chunk_chars: int,
    progress: list | None = None,
) -> Iterator[tuple[ChunkKey, list[corpus.RawDocument]]]:
    """The chunks of every input file in key order (``iter_file_chunks``, file by file);
    ``progress`` counts the compressed bytes of all files read so far."""
    done = 0
    for file_index, input_file in enumerate(input_files):
        local = [0] if progress is not None else None
        for item in iter_file_chunks(file_index, input_file, stats, chunk_chars, local):
            if progress is not None:
                progress[0] = done + local[0]
            yield item
        done += input_file.size


@functools.lru_cache(maxsize=4)
def _cached_processor(config: CreationConfig) -> ChunkProcessor:
    # In-process runs reuse the tokenizer and the traced functions of a config.
    return ChunkProcessor(config)


_WORKER: ChunkProcessor | None = None


def _initialize_worker(config: CreationConfig) -> None:
    global _WORKER
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    # One process per core: TensorFlow's own thread pools would oversubscribe.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    _WORKER = ChunkProcessor(config)


def _process_in_worker(index: ChunkKey, documents: list[corpus.RawDocument]) -> ChunkResult:
    return _WORKER(index, documents)


def default_num_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


class _Progress:
    """Progress log lines: input done, documents and instances per second, ETA.

    "Done" is measured in compressed input bytes up to the end of the last chunk
    written (the reader runs ahead of the workers, so bytes read would overstate it).
    """

    def __init__(self, total_bytes: int, interval: float):
        self.total_bytes = total_bytes
        self.interval = interval
        self.start = time.monotonic()
        self.last = self.start
        self.read = [0]  # updated by the reader
        self.chunk_ends: dict[int, int] = {}
        self.done_bytes = 0

    def chunks(self, chunks):
        """Remembers where in the input each chunk ends."""
        for index, chunk in chunks:
            self.chunk_ends[index] = self.read[0]
            yield index, chunk

    def written(self, index, documents: int, instances: int, force: bool = False) -> None:
        self.done_bytes = max(self.done_bytes, self.chunk_ends.pop(index, 0))
        now = time.monotonic()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        fraction = min(1.0, self.done_bytes / self.total_bytes) if self.total_bytes else 0.0
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else float("nan")
        logging.info(
            "%.1f%% of the input done (%.1f of %.1f MB); %d documents (%.0f/s), %d instances "
            "written (%.0f/s); elapsed %.0f s, ETA %s",
            100 * fraction,
            self.done_bytes / 1e6,
            self.total_bytes / 1e6,
            documents,
            documents / elapsed,
            instances,
            instances / elapsed,
            elapsed,
            f"{eta:.0f} s" if eta == eta else "unknown",
        )


def create_pretraining_data(
    input_file: str | list[str],
    output_file: str | list[str],
    config: CreationConfig,
    *,
    num_workers: int | None = None,
    progress_interval: float = 30.0,
    compression_type: str | None = None,
) -> CreationSummary:
    """Creates pretraining TFRecords from text files and MediaWiki dumps.

    Args:
        input_file: comma-separated glob patterns (or a list of them); each file is
            plain text or a MediaWiki XML dump, optionally bz2/gzip/xz-compressed,
            detected by content.
        output_file: comma-separated output paths, or ``path@N`` for ``N`` shards;
            records go round-robin over them. The run's statistics go beside them
            (``writer.statistics_path``).
        config: ``CreationConfig`` (vocabulary and the algorithm's settings).
        num_workers: worker processes; default one per available core; ``0`` runs
            everything in this process (for tests and debugging).
        progress_interval: seconds between progress log lines.
        compression_type: ``None``, ``"GZIP"`` or ``"ZLIB"`` for the output records.

    Returns:
        ``CreationSummary``; its ``lines()`` are also logged.

    Raises:
        corpus.CorpusError: unreadable input (the message names the file).
        ValueError: bad settings, or a corpus without a single usable document.
    """
    start = time.monotonic()
    plan = plan_creation(input_file, output_file, config)
    log_inputs(plan)
    input_files, output_paths = plan.input_files, plan.output_files
    workers = default_num_workers() if num_workers is None else int(num_workers)

    corpus_stats = corpus.CorpusStats()
    stats = ChunkStats()
    progress = _Progress(sum(f.size for f in input_files), progress_interval)
    chunks = progress.chunks(
        iter_chunks(input_files, corpus_stats, config.chunk_chars, progress=progress.read)
    )
    num_chunks = 0
    with writer.ShardedRecordWriter(output_paths, compression_type) as record_writer:

        def write(result: ChunkResult) -> None:
            nonlocal num_chunks
            num_chunks += 1
            stats.merge(result.stats)
            for record in writer.split_records(result.records, result.lengths):
                record_writer.write(record)
            progress.written(result.index, stats.documents + stats.empty_documents, stats.instances)

        if workers == 0:
            processor = _cached_processor(config)
            for index, chunk in chunks:
                write(processor(index, chunk))
        else:
            _run_pool(chunks, config, workers, write)
        check_instances_made(plan, corpus_stats, stats)
        counts = list(record_writer.counts)
    progress.written(-1, stats.documents + stats.empty_documents, stats.instances, force=True)
    summary = CreationSummary(
        input_files=[f.path for f in input_files],
        output_files=output_paths,
        records_per_file=counts,
        corpus=corpus_stats,
        chunks=num_chunks,
        stats=stats,
        seconds=time.monotonic() - start,
        workers=workers,
        config=config,
        statistics_file=plan.statistics_file,
    )
    write_statistics(summary)
    log_summary(summary)
    return summary


@dataclasses.dataclass(frozen=True)
class CreationPlan:
    """A run's checked inputs and outputs (``plan_creation``)."""

    input_files: list[corpus.InputFile]
    output_files: list[str]
    statistics_file: str


def plan_creation(
    input_file: str | list[str], output_file: str | list[str], config: CreationConfig
) -> CreationPlan:
    """Checks a run's settings, inputs and vocabulary before anything is written.

    Args:
        input_file: comma-separated glob patterns, or a list of them.
        output_file: comma-separated output paths, or ``path@N``.
        config: the run's ``CreationConfig``.

    Raises:
        corpus.CorpusError: an input pattern matches nothing, or a file is neither
            text nor a MediaWiki dump (the message names it).
        ValueError: bad settings, or a vocabulary the masker cannot use.
    """
    config.validate()
    input_paths = corpus.expand_input_files(input_file)
    output_paths = writer.expand_output_files(output_file)
    input_files = [corpus.sniff_input_file(path) for path in input_paths]
    _check_vocabulary(config)
    return CreationPlan(input_files, output_paths, writer.statistics_path(output_file))


def log_inputs(plan: CreationPlan) -> None:
    """One log line per input file (format, compression, a text encoding other than
    UTF-8), once every check of the run passed: a refused run prints only its reason."""
    for item in plan.input_files:
        details = [item.compression, item.encoding.upper() if item.encoding != "utf-8" else None]
        details = ", ".join(d for d in details if d)
        logging.info("Input %s: %s%s", item.path, item.format, f" ({details})" if details else "")


def check_instances_made(
    plan: CreationPlan, corpus_stats: corpus.CorpusStats, stats: ChunkStats
) -> None:
    """Raises ValueError for a run that made no instance (and so must write nothing)."""
    if stats.instances == 0:
        raise UserError(
            f"No instance could be made from {[f.path for f in plan.input_files]}: "
            f"{corpus_stats.documents} documents read, {stats.empty_documents} empty"
        )


def log_summary(summary: CreationSummary) -> None:
    """Logs a run's warnings (truncated sentences, empty documents) and its summary."""
    _log_problems(summary)
    for line in summary.lines():
        logging.info("%s", line)


def _run_pool(chunks, config: CreationConfig, workers: int, write) -> None:
    """Processes chunks on `workers` processes, writing results in chunk order."""
    _run_ordered(chunks, workers, _initialize_worker, (config,), _process_in_worker, write)


def _worker_context():
    """Workers are forked from a forkserver that has TensorFlow and the tokenizer's
    tables loaded but has run no TensorFlow op (a process that has cannot be forked
    safely); where there is no forkserver (Windows), they are spawned."""
    try:
        context = multiprocessing.get_context("forkserver")
    except ValueError:
        return multiprocessing.get_context("spawn")
    context.set_forkserver_preload(["keras_bert_zoo.pretraining._forkserver_preload"])
    return context


def _run_ordered(chunks, workers, initializer, initargs, function, write) -> None:
    """`write(function(index, chunk))` for every chunk, computed on `workers`
    processes, written in chunk order, with at most 2 chunks per worker in flight."""
    in_flight: collections.deque = collections.deque()
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=_worker_context(),
        initializer=initializer,
        initargs=initargs,
    ) as pool:
        try:
            for index, chunk in chunks:
                in_flight.append(pool.submit(function, index, chunk))
                while len(in_flight) >= 2 * workers:
                    write(in_flight.popleft().result())
            while in_flight:
                write(in_flight.popleft().result())
        except BaseException:
            for future in in_flight:
                future.cancel()
            raise


def _document_text(index: ChunkKey, documents: list[corpus.RawDocument]) -> tuple[str, int, int]:
    """(text, documents, sentences): one sentence per line, a blank line after each document."""
    parts, count, sentences = [], 0, 0
    for document in documents:
        lines = corpus.document_sentences(document)
        if lines:
            parts.append("\n".join(lines) + "\n\n")
            count += 1
            sentences += len(lines)
    return "".join(parts), count, sentences


def _no_initializer() -> None:
    pass


def export_sentences(
    input_file: str | list[str],
    output_text_file: str,
    *,
    num_workers: int | None = None,
    chunk_chars: int = 1_000_000,
) -> str:
    """Writes the input's documents as text: one sentence per line, blank lines between
    documents (google-research/bert's input format; MediaWiki dumps cleaned and split).

    The file is written atomically. Returns a one-line summary.
    """
    from keras_bert_zoo.utils import atomic

    start = time.monotonic()
    input_files = [corpus.sniff_input_file(p) for p in corpus.expand_input_files(input_file)]
    stats = corpus.CorpusStats()
    chunks = iter_chunks(input_files, stats, chunk_chars)
    workers = default_num_workers() if num_workers is None else int(num_workers)
    totals = [0, 0]
    with atomic.atomic_open(output_text_file, "w") as out:

        def write(result):
            text, documents, sentences = result
            out.write(text)
            totals[0] += documents
            totals[1] += sentences

        if workers == 0:
            for index, chunk in chunks:
                write(_document_text(index, chunk))
        else:
            _run_ordered(chunks, workers, _no_initializer, (), _document_text, write)
    summary = (
        f"Wrote {totals[0]} documents, {totals[1]} sentences to {output_text_file} in "
        f"{time.monotonic() - start:.1f} s ({stats.files} file(s); {stats.redirect_pages} "
        f"redirects and {stats.non_article_pages} non-article pages skipped; "
        f"{stats.invalid_utf8_lines} lines with invalid UTF-8)"
    )
    logging.info("%s", summary)
    return summary


def _check_vocabulary(config: CreationConfig) -> None:
    """Fails early (before any worker starts) on a vocabulary the masker cannot use."""
    from keras_bert_zoo.text.tokenizer import validate_casing
    from keras_bert_zoo.text.vocab import load_vocab

    tokens = load_vocab(config.vocab_file)
    missing = [t for t in ("[UNK]", "[CLS]", "[SEP]", "[MASK]") if t not in tokens]
    if missing:
        raise UserError(f"Vocabulary {config.vocab_file!r} lacks {missing}")
    validate_casing(tokens, config.do_lower_case, repr(config.vocab_file))


def _log_problems(summary: CreationSummary) -> None:
    s = summary.stats
    if s.long_sentences:
        logging.warning(
            "%d sentence(s) are longer than max_seq_length - 3 = %d tokens; the algorithm "
            "truncates them, as the original does. First: %s",
            s.long_sentences,
            summary.config.max_seq_length - 3,
            "; ".join(s.long_sentence_locations),
        )
    if s.empty_documents:
        logging.warning(
            "%d document(s) hold no token and were skipped, as the original does. First: %s",
            s.empty_documents,
            "; ".join(s.empty_document_locations),
        )
