"""Creates BERT pretraining TFRecords (masked LM + next sentence) from raw text or Wikipedia dumps.

google-research/bert's create_pretraining_data.py flags, names and defaults, plus
parallelism and streaming. Inputs are plain text (one sentence per line, a blank line
between documents) or MediaWiki XML dumps (``.xml``/``.xml.bz2``; articles only,
markup stripped, sentences split in every script), bz2/gzip/xz-compressed or not, UTF-8
or UTF-16 with a byte-order mark, all detected by content (tools/build_vocab.py reads
them the same way). The records have the original feature names and layout.

Usage:
    python tools/create_pretraining_data.py \
        --input_file='corpus/*.txt,enwiki-latest-pages-articles1.xml.bz2' \
        --output_file=out/pretrain.tfrecord@16 --vocab_file=vocab.txt \
        [--do_lower_case] [--do_whole_word_mask] [--max_seq_length=128] \
        [--max_predictions_per_seq=20] [--masked_lm_prob=0.15] [--short_seq_prob=0.1] \
        [--dupe_factor=10] [--random_seed=12345] [--num_workers=N] [--chunk_chars=1000000]

    # Cleaned sentences instead of records (the input format of the dynamic pipeline):
    python tools/create_pretraining_data.py --input_file=dump.xml.bz2 \
        --output_text_file=wiki_sentences.txt

    # The same records from an Apache Beam pipeline (pip install "keras_bert_zoo[beam]"):
    # every argument this tool does not know is one of Beam's pipeline options.
    python tools/create_pretraining_data.py --engine=beam --input_file='gs://b/enwiki-*.bz2' \
        --output_file=gs://b/data128/train.tfrecord@256 --vocab_file=vocab.txt \
        --runner=DataflowRunner --project=P --region=R --temp_location=gs://b/tmp \
        --setup_file=./setup.py
    python tools/create_pretraining_data.py --engine=beam ... --runner=DirectRunner \
        --direct_running_mode=multi_processing --direct_num_workers=0

Both engines write the same records for the same inputs and flags, and a statistics
file beside them (`train.tfrecord@N` -> `train.stats.json`).

All logic lives in keras_bert_zoo.pretraining (creator, beam_pipeline, corpus, wikitext,
instances, writer).

A mistake in the input ends with one line `<tool>: error: <message>` and exit status 1;
set KERAS_BERT_ZOO_TRACEBACK=1 to see its traceback.
"""

import logging
import multiprocessing
import multiprocessing.forkserver
import sys

from absl import app, flags
from absl import logging as absl_logging

from keras_bert_zoo.utils import extras, startup

# Before anything loads: the command line checked (the arguments this tool does not know
# are Beam's). TensorFlow is imported in main(), after the worker processes'
# forkserver was started: both load it at the same time.
startup.start_tool(
    __file__,
    known_only=True,
    extras=[extras.when_flag("engine", lambda v: v == "beam", "beam")],
    import_tensorflow=False,
)
_PRELOAD = "keras_bert_zoo.pretraining._forkserver_preload"

_INPUT_FILE = flags.DEFINE_string(
    "input_file",
    None,
    "Input raw text file (or comma-separated globs); text or MediaWiki XML dumps.",
)
_OUTPUT_FILE = flags.DEFINE_string(
    "output_file",
    None,
    "Output TF example file (or comma-separated list of files, or PATH@N for N shards).",
)
_VOCAB_FILE = flags.DEFINE_string(
    "vocab_file", None, "The vocabulary file that the BERT model was trained on."
)
_DO_LOWER_CASE = flags.DEFINE_bool(
    "do_lower_case",
    True,
    "Whether to lower case the input text. Should be True for uncased models and False for "
    "cased models.",
)
_DO_WHOLE_WORD_MASK = flags.DEFINE_bool(
    "do_whole_word_mask",
    False,
    "Whether to use whole word masking rather than per-WordPiece masking.",
)
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
_MAX_PREDICTIONS = flags.DEFINE_integer(
    "max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence."
)
_RANDOM_SEED = flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
_DUPE_FACTOR = flags.DEFINE_integer(
    "dupe_factor", 10, "Number of times to duplicate the input data (with different masks)."
)
_MASKED_LM_PROB = flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
_SHORT_SEQ_PROB = flags.DEFINE_float(
    "short_seq_prob",
    0.1,
    "Probability of creating sequences which are shorter than the maximum length.",
)
# --- Not in the original ---
_ENGINE = flags.DEFINE_enum(
    "engine",
    "local",
    ["local", "beam"],
    "local: worker processes on this machine (--num_workers). beam: an Apache Beam "
    "pipeline (pip install 'keras_bert_zoo[beam]'); every argument this tool does not "
    "know is passed to Beam as a pipeline option (--runner=DirectRunner|DataflowRunner|"
    "FlinkRunner|SparkRunner, --project, --temp_location, --direct_num_workers, "
    "--direct_running_mode=multi_processing, ...). Both write the same records.",
)
_NUM_WORKERS = flags.DEFINE_integer(
    "num_workers",
    None,
    "Worker processes of --engine=local (default: one per available core; 0: no subprocess).",
)
_CHUNK_CHARS = flags.DEFINE_integer(
    "chunk_chars",
    1_000_000,
    "Characters of raw input per work unit. The documents of a chunk are the pool that "
    "'random next' segments are drawn from; memory holds about 2 chunks per worker.",
)
_PROGRESS_SECONDS = flags.DEFINE_float(
    "progress_interval_seconds", 30.0, "Seconds between progress log lines."
)
_OUTPUT_TEXT_FILE = flags.DEFINE_string(
    "output_text_file",
    None,
    "Instead of records, write the input's documents as one sentence per line with blank "
    "lines between documents (MediaWiki dumps cleaned and split); no vocabulary needed.",
)


def _start_worker_server() -> None:
    if (
        _ENGINE.value != "local"
        or _NUM_WORKERS.value == 0
        or "forkserver" not in multiprocessing.get_all_start_methods()
    ):
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload([_PRELOAD])
    multiprocessing.forkserver.ensure_running()


def main(argv):
    """Runs the tool; `argv[1:]` are the arguments left to Beam (`_parse_flags`)."""
    beam_args = argv[1:]
    if beam_args and _ENGINE.value != "beam":
        raise app.UsageError(
            f"Unknown arguments {beam_args}: see --helpfull (Beam's pipeline options are "
            "taken with --engine=beam only)"
        )
    if not _INPUT_FILE.value:
        raise app.UsageError("--input_file is required")
    if _ENGINE.value == "beam" and (_NUM_WORKERS.present or _OUTPUT_TEXT_FILE.value):
        raise app.UsageError(
            "--num_workers and --output_text_file are the local engine's; with --engine=beam "
            "the runner's options (--direct_num_workers, --num_workers on Dataflow) set workers"
        )
    _start_worker_server()
    from keras_bert_zoo.pretraining import creator

    if _OUTPUT_TEXT_FILE.value:
        summary = creator.export_sentences(_INPUT_FILE.value, _OUTPUT_TEXT_FILE.value)
        print(summary)
        return
    if not _OUTPUT_FILE.value or not _VOCAB_FILE.value:
        raise app.UsageError("--output_file and --vocab_file are required (or --output_text_file)")
    config = creator.CreationConfig(
        vocab_file=_VOCAB_FILE.value,
        do_lower_case=_DO_LOWER_CASE.value,
        do_whole_word_mask=_DO_WHOLE_WORD_MASK.value,
        max_seq_length=_MAX_SEQ_LENGTH.value,
        max_predictions_per_seq=_MAX_PREDICTIONS.value,
        masked_lm_prob=_MASKED_LM_PROB.value,
        short_seq_prob=_SHORT_SEQ_PROB.value,
        dupe_factor=_DUPE_FACTOR.value,
        random_seed=_RANDOM_SEED.value,
        chunk_chars=_CHUNK_CHARS.value,
    )
    if _ENGINE.value == "beam":
        # Imported only here: without the extra, the import is the one-line error.
        from keras_bert_zoo.pretraining import beam_pipeline

        _quiet_beam()
        summary = beam_pipeline.create_pretraining_data_on_beam(
            _INPUT_FILE.value,
            _OUTPUT_FILE.value,
            config,
            pipeline_args=beam_args,
            progress_interval=_PROGRESS_SECONDS.value,
        )
    else:
        summary = creator.create_pretraining_data(
            _INPUT_FILE.value,
            _OUTPUT_FILE.value,
            config,
            num_workers=_NUM_WORKERS.value,
            progress_interval=_PROGRESS_SECONDS.value,
        )
    print("\n".join(summary.lines()))


def _quiet_beam() -> None:
    """Beam's own informational logs and its workers' warnings about options it sets
    itself are shown only with --verbosity=1 (absl's debug level) or more."""
    if absl_logging.get_verbosity() < absl_logging.DEBUG:
        logging.getLogger("apache_beam").setLevel(logging.ERROR)


def _parse_flags(argv):
    """absl's flag parsing (`app.parse_flags_with_usage`), except that the arguments this
    tool does not know are left for Beam (`main`) rather than refused."""
    try:
        return flags.FLAGS(argv, known_only=True)
    except flags.Error as error:
        sys.stderr.write(f"FATAL Flags parsing error: {error}\n")
        sys.stderr.write("Pass --helpshort or --helpfull to see help on flags.\n")
        sys.exit(1)


def _main_reporting_user_errors(argv):
    """`main` as `cli.run` runs it. keras_bert_zoo.utils.cli imports keras_bert_zoo (and
    TensorFlow), so the worker processes' forkserver is started first."""
    _start_worker_server()
    from keras_bert_zoo.utils import quiet_import

    if quiet_import.wants_quiet_import():
        quiet_import.import_tensorflow_quietly()
    from keras_bert_zoo.utils import cli

    return cli.wrap(main)(argv)


def run():
    """The console script `keras-bert-zoo-create-pretraining-data`, and this file."""
    main_module = sys.modules["__main__"]
    main_module.__doc__ = main_module.__doc__ or __doc__  # absl's --help reads it
    app.run(_main_reporting_user_errors, flags_parser=_parse_flags)


if __name__ == "__main__":
    run()
