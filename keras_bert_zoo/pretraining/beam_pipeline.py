"""Pretraining records on Apache Beam: the local creator's chunks as a Beam pipeline.

``create_pretraining_data_on_beam`` writes the records ``creator.create_pretraining_data``
writes for the same inputs and settings, byte for byte and shard for shard, on any Beam
runner: the DirectRunner on one machine, Dataflow, Flink or Spark. It is made of the
local creator's pieces (``creator.iter_file_chunks``, ``creator.ChunkProcessor``,
``writer.shard_of``, ``creator.CreationSummary``):

1. **Read** (``_ReadChunks``). Each input file is one element, so files are read in
   parallel; a file yields its chunks keyed ``ChunkKey(file, chunk)`` (its place in
   the input list and the chunk's place in it: the split does not depend on the
   runner) and its ``CorpusStats``. A reshuffle spreads a file's chunks over workers.
2. **Process** (``_ProcessChunk``). ``ChunkProcessor`` turns a chunk into shuffled,
   serialized records with the chunk's own seeds (``creator.chunk_seeds``), so the
   records do not depend on the worker, the bundle or a retry. The DoFn writes them as
   TFRecords to a *chunk file* in the run's temporary directory, grouped by their
   index modulo the shard count N: section ``r`` holds records ``r, r + N, ...``.
3. **Place.** Once every chunk's record count is known (a global combine of a few
   numbers per chunk), chunk ``k``'s first record has the run-wide index ``o_k`` (the
   records of all smaller keys), and its section ``r`` goes to shard
   ``writer.shard_of(o_k + r, N)``: the local creator's round-robin. A GroupByKey on
   the shard gathers references to byte ranges of chunk files, not records.
4. **Write** (``_WriteShard``). A shard copies its sections in key order into a
   temporary file beside its final name.
5. **Commit** (here, once the pipeline succeeded): the temporary shards are renamed
   to their final names and the statistics file is written (``writer.statistics_path``,
   the same file the local creator writes). On any failure the temporaries are
   removed: nothing appears under a final name.

Records travel through files, never through the runner's shuffle: on the
DirectRunner every record would otherwise cross the runner's data channel twice
(with multi-processing, about 8 s per 700 MB on two cores, a third of the local
creator's whole run), and a shard's records would have to be held in one worker's
memory to be sorted into order. The shuffle carries a few hundred bytes per chunk.

Every path, inputs and outputs, may be local or on any filesystem Beam reads
(``gs://``, ``s3://``, ``hdfs://``: ``apache_beam.io.filesystems``). The vocabulary is
read here, by the launching process, and travels inside the pipeline: workers need no
copy of it. Progress and counters are Beam metrics (namespace ``METRICS_NAMESPACE``):
files, documents and chunks read, chunks processed, instances, records per shard.

Importing this module needs the ``beam`` extra (``pip install "keras_bert_zoo[beam]"``);
without it the import raises ``BeamNotInstalledError``, a one-line message saying so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
import json
import logging as python_logging
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from absl import logging

from keras_bert_zoo.pretraining import corpus, creator, writer
from keras_bert_zoo.utils.errors import UserError


class BeamNotInstalledError(ImportError, UserError):
    """Apache Beam is missing: an ImportError, and a UserError so that the tools end
    with its one-line message (keras_bert_zoo.utils.cli) rather than a traceback."""


def _beam_logs_wanted() -> bool:
    """Beam's own log lines are shown with --verbosity=1 (absl's debug level) or more."""
    return logging.get_verbosity() >= logging.DEBUG


class _DropBeamRecords(python_logging.Filter):
    """Drops the records that Beam's modules log on the root logger."""

    def filter(self, record: python_logging.LogRecord) -> bool:
        return f"{os.sep}apache_beam{os.sep}" not in record.pathname


@contextlib.contextmanager
def _quiet_beam_logs(level: int):
    """Beam's log records below `level` are dropped in the block, and all those its
    modules log on the root logger, unless --verbosity=1 asks for Beam's logs.

    What they say concerns Beam, not the records: its import's two notices about its
    Google Cloud connectors (apitools missing, no BigQuery storage client), the pickler
    a runner picks, a failing step's traceback before the pipeline's own error.
    """
    if _beam_logs_wanted():
        yield
        return
    root, beam_logger = python_logging.getLogger(), python_logging.getLogger("apache_beam")
    drop, saved_level = _DropBeamRecords(), beam_logger.level
    root.addFilter(drop)
    beam_logger.setLevel(level)
    try:
        yield
    finally:
        root.removeFilter(drop)
        beam_logger.setLevel(saved_level)


try:
    with _quiet_beam_logs(python_logging.ERROR):
        import apache_beam as beam
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.filesystems import FileSystems
        from apache_beam.metrics import Metrics
        from apache_beam.metrics.metric import MetricsFilter
        from apache_beam.options.pipeline_options import (
            DirectOptions,
            PipelineOptions,
            StandardOptions,
            WorkerOptions,
        )
        from apache_beam.runners.runner import PipelineState
except ImportError as error:
    raise BeamNotInstalledError(
        f"--engine=beam needs Apache Beam ({error}): pip install 'keras_bert_zoo[beam]' "
        "(apache-beam[tfrecord]==2.77.0)"
    ) from error

__all__ = [
    "BeamNotInstalledError",
    "METRICS_NAMESPACE",
    "create_pretraining_data_on_beam",
    "pipeline_options",
]

METRICS_NAMESPACE = "keras_bert_zoo.pretraining"
_CORPUS_STATS = "corpus_stats"
# A TFRecord frame: length (8 bytes), its masked CRC (4), the record, its masked CRC (4).
_FRAME_BYTES = 16


class _ChunkDone(NamedTuple):
    """What processing a chunk left: its record count, the byte offset where each of
    its sections ends in its chunk file, and its statistics."""

    key: creator.ChunkKey
    records: int
    section_ends: tuple
    stats: creator.ChunkStats


class _SectionRef(NamedTuple):
    """Section `section` of chunk `key`: bytes [start, end) of its chunk file."""

    key: creator.ChunkKey
    section: int
    start: int
    end: int
    records: int


def _chunk_path(chunk_dir: str, key: creator.ChunkKey) -> str:
    return FileSystems.join(chunk_dir, f"{key.file:06d}-{key.chunk:09d}.tfrecord")


def _create(path: str):
    """`path` opened for writing bytes (a local path's directory is created)."""
    if corpus.is_url(path):
        return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "wb")


def _exists(path: str) -> bool:
    return FileSystems.exists(path) if corpus.is_url(path) else os.path.exists(path)


def _section_sizes(lengths, num_shards: int) -> list[int]:
    """Framed bytes of each section of a chunk: records r, r + N, ... (N = num_shards)."""
    return [
        int(lengths[section::num_shards].sum()) + _FRAME_BYTES * len(lengths[section::num_shards])
        for section in range(min(num_shards, len(lengths)))
    ]


class _ReadChunks(beam.DoFn):
    """(file index, ``InputFile``) -> its chunks ``(ChunkKey, documents)``, and its
    ``CorpusStats`` on the tagged output ``corpus_stats``."""

    def __init__(self, chunk_chars: int):
        self._chunk_chars = chunk_chars
        self._files = Metrics.counter(METRICS_NAMESPACE, "files_read")
        self._documents = Metrics.counter(METRICS_NAMESPACE, "documents_read")
        self._chunks = Metrics.counter(METRICS_NAMESPACE, "chunks_read")

    def process(self, element):
        file_index, input_file = element
        stats = corpus.CorpusStats()
        for key, documents in creator.iter_file_chunks(
            file_index, input_file, stats, self._chunk_chars
        ):
            self._chunks.inc()
            self._documents.inc(len(documents))
            yield key, documents
        self._files.inc()
        yield beam.pvalue.TaggedOutput(_CORPUS_STATS, stats)


class _ProcessChunk(beam.DoFn):
    """(ChunkKey, documents) -> ``_ChunkDone``; the records go to the chunk's file.

    Args:
        config: the run's settings; its ``vocab_file`` is replaced on the worker by a
            local copy of ``vocabulary``.
        vocabulary: the vocabulary file's bytes.
        chunk_dir: the directory of the chunk files.
        num_shards: the number of output files (N).
        one_thread: TensorFlow on one thread (each worker process is one core's).
    """

    def __init__(
        self,
        config: creator.CreationConfig,
        vocabulary: bytes,
        chunk_dir: str,
        num_shards: int,
        one_thread: bool,
    ):
        self._config = config
        self._vocabulary = vocabulary
        self._chunk_dir = chunk_dir
        self._num_shards = num_shards
        self._one_thread = one_thread
        self._processor = None
        self._vocab_path = None
        self._chunks = Metrics.counter(METRICS_NAMESPACE, "chunks_processed")
        self._documents = Metrics.counter(METRICS_NAMESPACE, "documents_used")
        self._instances = Metrics.counter(METRICS_NAMESPACE, "instances")

    def setup(self):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        if self._one_thread:
            try:
                tf.config.threading.set_intra_op_parallelism_threads(1)
                tf.config.threading.set_inter_op_parallelism_threads(1)
            except RuntimeError:
                pass  # TensorFlow already runs in this process: keep its threads
        fd, self._vocab_path = tempfile.mkstemp(prefix="kbz-vocab-", suffix=".txt")
        with os.fdopen(fd, "wb") as f:
            f.write(self._vocabulary)
        self._processor = creator.ChunkProcessor(
            dataclasses.replace(self._config, vocab_file=self._vocab_path)
        )

    def teardown(self):
        if self._vocab_path and os.path.exists(self._vocab_path):
            os.remove(self._vocab_path)

    def process(self, element):
        key, documents = element
        result = self._processor(creator.ChunkKey(*key), documents)
        count = len(result.lengths)
        if count:
            self._write_chunk_file(_chunk_path(self._chunk_dir, result.index), result)
        self._chunks.inc()
        self._documents.inc(result.stats.documents)
        self._instances.inc(count)
        ends = tuple(itertools.accumulate(_section_sizes(result.lengths, self._num_shards)))
        yield _ChunkDone(result.index, count, ends, result.stats)

    def _write_chunk_file(self, path: str, result: creator.ChunkResult) -> None:
        # TensorFlow's writer frames records (CRC-32C in C++) about 3x faster than crcmod.
        import tensorflow as tf

        records = writer.split_records(result.records, result.lengths)
        local = path
        if corpus.is_url(path):
            fd, local = tempfile.mkstemp(prefix="kbz-chunk-", suffix=".tfrecord")
            os.close(fd)
        else:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            with tf.io.TFRecordWriter(local) as record_writer:
                for section in range(min(self._num_shards, len(records))):
                    for record in records[section :: self._num_shards]:
                        record_writer.write(record)
            if local != path:
                with open(local, "rb") as source, _create(path) as target:
                    shutil.copyfileobj(source, target, 1 << 22)
        finally:
            if local != path and os.path.exists(local):
                os.remove(local)


def _record_offsets(chunks: list[tuple]) -> dict:
    """{ChunkKey: run-wide index of its first record}: records are numbered in key order."""
    offsets, total = {}, 0
    for key, records in sorted(chunks):
        offsets[creator.ChunkKey(*key)] = total
        total += records
    return offsets


def _place(done: _ChunkDone, offsets: dict, num_shards: int):
    """(shard, ``_SectionRef``) of each section of a chunk."""
    first = offsets[creator.ChunkKey(*done.key)]
    start = 0
    for section, end in enumerate(done.section_ends):
        records = len(range(section, done.records, num_shards))
        shard = writer.shard_of(first + section, num_shards)
        yield shard, _SectionRef(creator.ChunkKey(*done.key), section, start, end, records)
        start = end


class _WriteShard(beam.DoFn):
    """(shard, section references) -> (shard, records): the shard's temporary file,
    its sections in key order."""

    def __init__(self, chunk_dir: str, temporary_paths: Sequence[str]):
        self._chunk_dir = chunk_dir
        self._temporary_paths = list(temporary_paths)

    def process(self, element):
        shard, refs = element
        refs = sorted(ref for ref in refs if ref is not None)
        path = self._temporary_paths[shard]
        records = 0
        with _create(path) as target:
            for ref in refs:
                with corpus.open_binary(_chunk_path(self._chunk_dir, ref.key)) as source:
                    source.seek(ref.start)
                    target.write(source.read(ref.end - ref.start))
                records += ref.records
            if not corpus.is_url(path):
                target.flush()
                os.fsync(target.fileno())
        Metrics.counter(METRICS_NAMESPACE, f"records_in_shard_{shard:05d}").inc(records)
        yield shard, records


def _merge_corpus_stats(parts: Iterable[corpus.CorpusStats]) -> corpus.CorpusStats:
    total = corpus.CorpusStats()
    for part in parts:
        total.merge(part)
    return total


def _write_totals(_, path: str, chunks: list, corpus_stats, shard_records: list) -> None:
    """The run's totals as JSON, for the launching process: chunk statistics merged
    in key order (as the local creator merges them), corpus counts, records per shard."""
    stats = creator.ChunkStats()
    for _, chunk_stats in sorted(chunks, key=lambda item: tuple(item[0])):
        stats.merge(chunk_stats)
    counts = dict(shard_records)
    totals = {
        "chunks": len(chunks),
        "stats": dataclasses.asdict(stats),
        "corpus": dataclasses.asdict(corpus_stats),
        "records_per_shard": [counts.get(shard, 0) for shard in range(len(counts))],
    }
    with _create(path) as f:
        f.write(json.dumps(totals).encode("utf-8"))


def _build(
    pipeline: beam.Pipeline,
    plan: creator.CreationPlan,
    config: creator.CreationConfig,
    vocabulary: bytes,
    work_dir: str,
    temporary_paths: list[str],
    one_thread: bool,
) -> None:
    num_shards = len(plan.output_files)
    chunk_dir = FileSystems.join(work_dir, "chunks")
    read = (
        pipeline
        | "Input files" >> beam.Create(list(enumerate(plan.input_files)))
        | "Read chunks"
        >> beam.ParDo(_ReadChunks(config.chunk_chars)).with_outputs(_CORPUS_STATS, main="chunks")
    )
    done = (
        read.chunks
        | "Spread chunks" >> beam.Reshuffle()
        | "Process chunks"
        >> beam.ParDo(_ProcessChunk(config, vocabulary, chunk_dir, num_shards, one_thread))
    )
    offsets = (
        done
        | "Records per chunk" >> beam.Map(lambda d: (tuple(d.key), d.records))
        | "All chunk counts" >> beam.combiners.ToList()
        | "Record offsets" >> beam.Map(_record_offsets)
    )
    placed = done | "Place sections" >> beam.FlatMap(
        _place, offsets=beam.pvalue.AsSingleton(offsets), num_shards=num_shards
    )
    # Every shard is written, also one that no section goes to (an empty file, as
    # the local creator leaves it).
    every_shard = pipeline | "Shards" >> beam.Create([(shard, None) for shard in range(num_shards)])
    written = (
        (placed, every_shard)
        | "Sections and shards" >> beam.Flatten()
        | "By shard" >> beam.GroupByKey()
        | "Write shards" >> beam.ParDo(_WriteShard(chunk_dir, temporary_paths))
    )
    chunk_stats = (
        done
        | "Chunk statistics" >> beam.Map(lambda d: (tuple(d.key), d.stats))
        | "All chunk statistics" >> beam.combiners.ToList()
    )
    corpus_stats = read[_CORPUS_STATS] | "Corpus statistics" >> beam.CombineGlobally(
        _merge_corpus_stats
    )
    _ = (
        pipeline
        | "Totals" >> beam.Create([None])
        | "Write totals"
        >> beam.Map(
            _write_totals,
            path=FileSystems.join(work_dir, "totals.json"),
            chunks=beam.pvalue.AsSingleton(chunk_stats),
            corpus_stats=beam.pvalue.AsSingleton(corpus_stats),
            shard_records=beam.pvalue.AsList(written),
        )
    )


def pipeline_options(args: Sequence[str] | PipelineOptions = ()) -> PipelineOptions:
    """Beam's pipeline options from command-line arguments (``--runner=...``).

    Unlike ``PipelineOptions(args)``, which drops what it does not know with a
    warning, an unknown option is an error: a misspelt ``--temp_location`` would
    otherwise surface only on the cluster; a bad value of a known option is one line
    too (not argparse's usage). Worker processes log warnings and errors only, unless
    ``--default_sdk_harness_log_level`` says otherwise.

    Raises:
        UserError: naming the arguments Beam does not know, or the option whose value
            it refuses.
    """
    if isinstance(args, PipelineOptions):
        return args
    args = list(args)
    parsers = []

    def refuse(message: str):
        # argparse would print Beam's whole usage (150 lines) and exit with status 2.
        raise UserError(
            f"Beam pipeline option {message.removeprefix('argument ')} (Beam's options: "
            "python -m apache_beam.options.pipeline_options --help)"
        )

    def keep_parser(parser):
        parser.error = refuse
        parsers.append(parser)

    PipelineOptions(args).get_all_options(add_extra_args_fn=keep_parser)
    _, unknown = parsers[0].parse_known_args(args)
    if unknown:
        raise UserError(
            f"Unknown Beam pipeline option(s) {unknown} (Beam's options: "
            "python -m apache_beam.options.pipeline_options --help)"
        )
    if not any(arg.startswith("--default_sdk_harness_log_level") for arg in args):
        args.append("--default_sdk_harness_log_level=WARNING")
    return PipelineOptions(args)


_DIRECT_RUNNERS = ("DirectRunner", "SwitchingDirectRunner")
# Beam's runners by their short names, which Beam matches case-insensitively, with or
# without the "Runner" suffix (apache_beam.runners.runner.create_runner).
_KNOWN_RUNNERS = {path.rsplit(".", 1)[1]: path for path in StandardOptions.ALL_KNOWN_RUNNERS}
_RUNNER_EXTRAS = {"DataflowRunner": "apache-beam[gcp]==2.77.0"}


def _resolve_runner(options: PipelineOptions) -> tuple[str, object | None]:
    """(the runner's name, the runner to run on, or None for Beam to make it by name).

    Any spelling Beam accepts of the DirectRunner (``direct``, ``Direct``,
    ``directrunner``, none at all) runs on the in-process DirectRunner that never tries
    Prism: Beam 2.77's DirectRunner first tries its Prism runner, which downloads a Go
    binary from GitHub at run time (a tool here uses no network while it runs), runs the
    pipeline there with neither `--direct_running_mode` nor `--direct_num_workers`, and
    leaves `beam-temp` behind. `is_interactive()` is the one switch that skips Prism and
    leaves the rest of the DirectRunner's choice as it is (Beam's FnApiRunner, which the
    direct_* options configure).

    Raises:
        UserError: a runner name Beam does not know, or a runner whose package is not
            installed (one line each, before anything runs).
    """
    runner = options.view_as(StandardOptions).runner
    if runner is not None and not isinstance(runner, str):
        return type(runner).__name__, runner  # a runner object (the Python API)
    given = runner or "DirectRunner"
    by_lower_name = {name.lower(): name for name in _KNOWN_RUNNERS}
    name = by_lower_name.get(given.lower(), by_lower_name.get(given.lower() + "runner"))
    if name is None:
        if "." in given:
            return given.rsplit(".", 1)[1], None  # a class's qualified name: Beam imports it
        raise UserError(
            f"--runner={given}: not a Beam runner (Beam's runners: "
            f"{', '.join(sorted(_KNOWN_RUNNERS))}, or a runner class's qualified name)"
        )
    if name in _DIRECT_RUNNERS:
        from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner

        direct = SwitchingDirectRunner()
        direct.is_interactive()
        return "DirectRunner", direct
    try:
        importlib.import_module(_KNOWN_RUNNERS[name].rsplit(".", 1)[0])
    except ImportError as error:
        extra = _RUNNER_EXTRAS.get(name)
        raise UserError(
            f"--runner={given}: Beam's {name} cannot be imported ({error})"
            + (f": pip install '{extra}'" if extra else "")
        ) from error
    return name, None


def _describe_runner(options: PipelineOptions, runner_name: str) -> tuple[str, bool]:
    """(how the run is described in the summary, whether a worker process is one core's)."""
    if runner_name in (*_DIRECT_RUNNERS, "BundleBasedDirectRunner"):
        direct = options.view_as(DirectOptions)
        mode = direct.direct_running_mode or "in_memory"
        workers = direct.direct_num_workers
        workers = creator.default_num_workers() if workers == 0 else workers or 1
        return f"on Beam's DirectRunner ({mode}, {workers} worker(s))", mode == "multi_processing"
    workers = options.view_as(WorkerOptions).num_workers
    return f"on Beam's {runner_name}" + (f" ({workers} workers)" if workers else ""), True


# A pipeline that failed on its input: the input's error as a worker raised it (on
# runners with worker processes, inside the text of the runner's own error).
_CORPUS_ERROR = re.compile(r"keras_bert_zoo\.pretraining\.corpus\.CorpusError: ([^\n]+)")
_WHILE_RUNNING = re.compile(r" \[while running '[^\n]*?'\]")


def _input_error(error: BaseException) -> corpus.CorpusError | None:
    """The one-line ``CorpusError`` a failed pipeline ended on (a truncated ``.bz2``,
    malformed XML: what only reading finds), or None for any other failure."""
    if isinstance(error, corpus.CorpusError):
        message = str(error)
    else:
        found = _CORPUS_ERROR.findall(str(error))
        if not found:
            return None
        message = found[-1]
    return corpus.CorpusError(_WHILE_RUNNING.sub("", message).strip())


@contextlib.contextmanager
def _quiet_run(options: PipelineOptions, runner_name: str):
    """Runs the pipeline without Beam's log lines (shown with --verbosity=1).

    Beam logs a failing step's traceback (in every worker, and again in the launching
    process) before the pipeline's own error, and the DirectRunner's worker processes
    (`multi_processing`) write Beam's start-up notices to the terminal. Here Beam's
    loggers are silenced, and those workers' output goes to a temporary file that is
    shown only when the pipeline fails for another reason than its input (a bug: all
    of it may matter). The input's error itself becomes one line (`_input_error`).
    """
    if _beam_logs_wanted():
        yield
        return
    mode = options.view_as(DirectOptions).direct_running_mode
    capture = runner_name in _DIRECT_RUNNERS and mode == "multi_processing"
    with _quiet_beam_logs(python_logging.CRITICAL), tempfile.TemporaryFile() as workers_log:
        try:
            with _stderr_to(workers_log) if capture else contextlib.nullcontext():
                yield
        except Exception as error:
            if capture and _input_error(error) is None:
                workers_log.seek(0)
                sys.stderr.write(workers_log.read().decode("utf-8", "replace"))
            raise


@contextlib.contextmanager
def _stderr_to(file):
    """File descriptor 2 (this process's stderr, which child processes inherit) points
    to `file` until the block ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _wait(result, progress_interval: float):
    """Waits for the pipeline, logging its counters every `progress_interval` seconds
    on runners that return before the end (Dataflow, Flink, Spark)."""
    start = time.monotonic()
    while not PipelineState.is_terminal(result.state):
        try:
            result.wait_until_finish(duration=int(progress_interval * 1000))
        except NotImplementedError:
            return result.wait_until_finish()
        if not PipelineState.is_terminal(result.state):
            counters = _counters(result)
            logging.info(
                "Beam run: %d of %d chunks read processed, %d documents, %d instances; "
                "elapsed %.0f s",
                counters.get("chunks_processed", 0),
                counters.get("chunks_read", 0),
                counters.get("documents_read", 0),
                counters.get("instances", 0),
                time.monotonic() - start,
            )
    return result.state


def _counters(result) -> dict[str, int]:
    try:
        query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    except Exception:  # a runner without metrics: counters are only progress
        return {}
    out = {}
    for counter in query["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        out[counter.key.metric.name] = out.get(counter.key.metric.name, 0) + (value or 0)
    return out


def _refuse_existing(plan: creator.CreationPlan) -> None:
    # A run on a cluster must not replace part of an earlier run's shards and then
    # fail: existing outputs are an error, not overwritten.
    for path in [*plan.output_files, plan.statistics_file]:
        if _exists(path):
            raise FileExistsError(
                f"{path} already exists: the Beam engine does not overwrite records "
                "(remove them or choose another --output_file)"
            )


def _read_vocabulary(path: str) -> bytes:
    with corpus.open_binary(path) as f:
        return f.read()


def _temporary_name(path: str, run_id: str) -> str:
    # Dot-named `.name.tmp-<id>`, as utils.atomic names its temporaries.
    directory, name = os.path.split(path)
    return (directory + "/" if directory else "") + f".{name}.tmp-{run_id}"


def _remove(paths: Iterable[str], directory: str) -> None:
    """Removes the temporary files `paths` and the temporary `directory`, where they exist."""
    for path in [*paths, directory]:
        try:
            if corpus.is_url(path):
                if path == directory:
                    # A trailing slash deletes everything under the prefix (object stores
                    # have no directories to test for).
                    FileSystems.delete([path.rstrip("/") + "/"])
                elif FileSystems.exists(path):
                    FileSystems.delete([path])
            elif os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.exists(path):
                os.remove(path)
        except Exception as e:  # cleanup must not hide the run's own error
            logging.warning("Could not remove the temporary %s: %s", path, e)


def _commit(temporary_paths: list[str], final_paths: list[str]) -> None:
    for temporary, final in zip(temporary_paths, final_paths, strict=True):
        if corpus.is_url(final):
            FileSystems.rename([temporary], [final])
        else:
            os.replace(temporary, final)


def _write_statistics(summary: creator.CreationSummary, run_id: str) -> None:
    if not corpus.is_url(summary.statistics_file):
        creator.write_statistics(summary)
        return
    temporary = _temporary_name(summary.statistics_file, run_id)
    with _create(temporary) as f:
        text = json.dumps(summary.statistics(), indent=2, sort_keys=True, ensure_ascii=False)
        f.write((text + "\n").encode("utf-8"))
    FileSystems.rename([temporary], [summary.statistics_file])


def create_pretraining_data_on_beam(
    input_file: str | list[str],
    output_file: str | list[str],
    config: creator.CreationConfig,
    *,
    pipeline_args: Sequence[str] | PipelineOptions = (),
    progress_interval: float = 30.0,
) -> creator.CreationSummary:
    """Creates pretraining TFRecords with an Apache Beam pipeline (see the module doc).

    Everything is checked before the pipeline starts (inputs, vocabulary, settings,
    pipeline options and runner, outputs that exist); nothing is written before. What
    only reading finds (a truncated ``.bz2``, malformed XML) ends the pipeline with the
    input's one-line ``CorpusError``, as in the local creator; Beam's own log lines are
    shown with ``--verbosity=1`` only.

    Args:
        input_file: comma-separated glob patterns (or a list of them): text files or
            MediaWiki XML dumps, optionally compressed, local or on any filesystem
            Beam reads.
        output_file: comma-separated output paths, or ``path@N`` for ``N`` shards.
            None of them (nor the statistics file) may exist.
        config: ``CreationConfig``; ``vocab_file`` is read by this process.
        pipeline_args: Beam's pipeline options as command-line arguments
            (``["--runner=DataflowRunner", "--project=...", ...]``) or a
            ``PipelineOptions``; none: the DirectRunner in this process.
        progress_interval: seconds between progress log lines on runners that run
            detached (Dataflow, Flink, Spark).

    Returns:
        ``CreationSummary``, as the local creator's (its ``lines()`` are logged).

    Raises:
        corpus.CorpusError: unreadable input (the message names the file).
        FileExistsError: an output or the statistics file exists.
        ValueError: bad settings, pipeline options or runner, an unusable vocabulary,
            or a corpus without a single usable document.
    """
    with _quiet_beam_logs(python_logging.ERROR):
        return _create_on_beam(input_file, output_file, config, pipeline_args, progress_interval)


def _pipeline(runner, runner_name: str, options: PipelineOptions) -> beam.Pipeline:
    """The pipeline object; the options a runner requires are checked here (Dataflow's
    project, region, temp_location), before anything is read or written."""
    try:
        return beam.Pipeline(runner=runner, options=options)
    except ValueError as error:
        problems = "; ".join(
            line.strip().rstrip(".") for line in str(error).splitlines()[1:] if line.strip()
        )
        raise UserError(f"--runner={runner_name}: {problems or error}") from error


def _create_on_beam(input_file, output_file, config, pipeline_args, progress_interval):
    """`create_pretraining_data_on_beam`'s work, its logs quieted."""
    start = time.monotonic()
    options = pipeline_options(pipeline_args)
    runner_name, runner = _resolve_runner(options)
    plan = creator.plan_creation(input_file, output_file, config)
    _refuse_existing(plan)
    vocabulary = _read_vocabulary(config.vocab_file)
    pipeline = _pipeline(runner, runner_name, options)
    creator.log_inputs(plan)
    engine, one_thread = _describe_runner(options, runner_name)
    run_id = uuid.uuid4().hex
    work_dir = _temporary_name(plan.output_files[0] + ".chunks", run_id)
    temporary_paths = [_temporary_name(path, run_id) for path in plan.output_files]
    _build(pipeline, plan, config, vocabulary, work_dir, temporary_paths, one_thread)
    logging.info("Running the pipeline %s", engine)
    try:
        try:
            with _quiet_run(options, runner_name):
                result = pipeline.run()
                state = _wait(result, progress_interval)
        except Exception as error:
            input_error = _input_error(error)
            if input_error is not None:
                raise input_error from error
            raise
        if state != PipelineState.DONE:
            raise RuntimeError(f"The Beam pipeline ended in state {state}")
        with corpus.open_binary(FileSystems.join(work_dir, "totals.json")) as f:
            totals = json.loads(f.read().decode("utf-8"))
        stats = creator.ChunkStats(**totals["stats"])
        corpus_stats = corpus.CorpusStats(**totals["corpus"])
        creator.check_instances_made(plan, corpus_stats, stats)
        _commit(temporary_paths, plan.output_files)
    finally:
        _remove(temporary_paths, work_dir)
    summary = creator.CreationSummary(
        input_files=[f.path for f in plan.input_files],
        output_files=plan.output_files,
        records_per_file=totals["records_per_shard"],
        corpus=corpus_stats,
        chunks=totals["chunks"],
        stats=stats,
        seconds=time.monotonic() - start,
        workers=0,
        config=config,
        statistics_file=plan.statistics_file,
        engine=engine,
    )
    _write_statistics(summary, run_id)
    counters = _counters(result)
    if counters:
        logging.info(
            "Beam counters: %s", ", ".join(f"{k}={v}" for k, v in sorted(counters.items()))
        )
    creator.log_summary(summary)
    return summary
