"""Errors in a user's input end every tool with one line, a non-zero status and no output.

The tests of a realistic mistake for each tool run two tools exactly as a user does
(`python tools/<name>.py ...`) and the others' `main` in this process, and check: exit
status != 0, no traceback on stderr, the last line of stderr is `<tool>: error:
<message>` naming the file, line or flag, and the output the command names
(--output_dir, --output_file, ...) was not created. The
in-process tests check `keras_bert_zoo.utils.cli`'s classification: a `UserError`
raised by our code is the user's, and so is an `OSError` about a path or a decode error
of a file our code read; anything else (a plain `ValueError` too) is a bug and keeps its
traceback.
"""

import concurrent.futures
import os
import pathlib
import subprocess
import sys
import textwrap

import child_process
import pytest

from keras_bert_zoo.utils import cli

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "tasks"))
import finetuning_test_helpers as helpers  # noqa: E402

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + "eu rejects german call to".split()
CONLL_TRAIN = """\
-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

to TO B-VP O
boycott VB I-VP
"""
CONLL_BAD_LINE = 9  # "boycott VB I-VP": its NER tag column is missing


_environment = child_process.environment


def _run_tool(tool, args):
    completed = subprocess.run(
        [sys.executable, f"tools/{tool}.py", *args],
        capture_output=True,
        text=True,
        env=_environment(),
        cwd=REPO_ROOT,
        timeout=300,
    )
    return completed.returncode, completed.stderr


def _cases(root: pathlib.Path):
    """(name, tool, args, strings the error line must hold, paths that must not exist)."""
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", VOCABULARY)
    conll = root / "conll"
    conll.mkdir()
    (conll / "eng.train").write_text(CONLL_TRAIN, encoding="utf-8")
    (conll / "eng.testa").write_text(CONLL_TRAIN.split("\nto")[0] + "\n", encoding="utf-8")
    not_a_checkpoint = root / "notes"
    not_a_checkpoint.mkdir()
    (not_a_checkpoint / "README.txt").write_text("my notes\n", encoding="utf-8")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    finetune = [
        "--task=conll2003",
        f"--data_dir={conll}",
        "--mode=train",
        "--max_seq_length=16",
        "--train_batch_size=2",
        "--num_train_steps=2",
    ]
    return [
        (
            "finetuning_malformed_conll",
            "run_finetuning",
            [*finetune, f"--init_checkpoint={checkpoint}", f"--output_dir={root / 'run1'}"],
            [f"eng.train:{CONLL_BAD_LINE}:", "3 columns"],
            [root / "run1"],
        ),
        (
            "finetuning_init_checkpoint_not_a_checkpoint",
            "run_finetuning",
            [*finetune, f"--init_checkpoint={not_a_checkpoint}", f"--output_dir={root / 'run2'}"],
            [str(not_a_checkpoint)],
            [root / "run2"],
        ),
        (
            "export_not_a_finetuned_dir",
            "export_saved_model",
            [f"--finetuned_dir={checkpoint}", f"--export_base={root / 'exports'}"],
            [str(checkpoint)],
            [root / "exports"],
        ),
        (
            "create_pretraining_data_missing_input",
            "create_pretraining_data",
            [
                f"--input_file={root / 'corpus' / 'wiki-*.txt'}",
                f"--output_file={root / 'records.tfrecord'}",
                f"--vocab_file={vocab}",
                "--num_workers=0",
            ],
            ["wiki-*.txt"],
            [root / "records.tfrecord"],
        ),
        (
            "build_vocab_missing_input",
            "build_vocab",
            [f"--input_files={root / 'texts' / '*.txt'}", f"--output_vocab={root / 'v.txt'}"],
            [str(root / "texts" / "*.txt")],
            [root / "v.txt"],
        ),
        (
            "convert_checkpoint_bad_input",
            "convert_checkpoint",
            [
                f"--input={not_a_checkpoint}",
                f"--output={root / 'converted'}",
                "--output_format=huggingface",
            ],
            [str(not_a_checkpoint)],
            [root / "converted"],
        ),
        (
            "saved_model_run_missing_saved_model",
            "saved_model_run",
            [f"--saved_model={root / 'exports' / 'sst2'}", "--input=sentence=a fine film"],
            [str(root / "exports" / "sst2")],
            [],
        ),
        (
            "run_pretraining_missing_input",
            "run_pretraining",
            [
                f"--input_file={root / 'records' / 'train-*.tfrecord'}",
                f"--output_dir={root / 'pretrain'}",
                f"--vocab_file={vocab}",
                "--preset=bert_tiny",
                "--num_train_steps=2",
            ],
            ["train-*.tfrecord"],
            [root / "pretrain"],
        ),
        (
            "extract_features_missing_input",
            "extract_features",
            [
                f"--model_dir={checkpoint}",
                f"--input_file={root / 'sentences.txt'}",
                f"--output_file={root / 'features.jsonl'}",
            ],
            [str(root / "sentences.txt")],
            [root / "features.jsonl"],
        ),
        (
            "list_presets_bad_flag_value",
            "list_presets",
            ["--names_only=perhaps"],
            ["--names_only"],
            [],
        ),
    ]


CASE_NAMES = [
    "finetuning_malformed_conll",
    "finetuning_init_checkpoint_not_a_checkpoint",
    "export_not_a_finetuned_dir",
    "create_pretraining_data_missing_input",
    "build_vocab_missing_input",
    "convert_checkpoint_bad_input",
    "saved_model_run_missing_saved_model",
    "run_pretraining_missing_input",
    "extract_features_missing_input",
    "list_presets_bad_flag_value",
]


# Run as a user runs them, in a fresh process: a tool that fails after TensorFlow loaded
# (its exit status and whole stderr: no traceback, no log line after the error) and a
# flag refused by the start-up check before TensorFlow loads (no absl "FATAL Flags
# parsing error"). The others go through the tool's `main` in this process, which
# prints the same line (`cli.wrap`).
FRESH_PROCESS = ("finetuning_malformed_conll", "list_presets_bad_flag_value")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """{name: (name, tool, args, expected strings, paths that must not exist)}."""
    cases = _cases(tmp_path_factory.mktemp("tool_errors"))
    assert [case[0] for case in cases] == CASE_NAMES
    return {case[0]: case for case in cases}


@pytest.fixture(scope="module")
def tool_runs(cases):
    """The fresh-process cases run once, together: {name: (code, stderr)}."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_run_tool, *cases[name][1:3]) for name in FRESH_PROCESS}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", CASE_NAMES)
def test_user_error_is_one_line_and_writes_nothing(cases, tool_runs, run_tool_in_process, name):
    _, tool, args, expected, outputs = cases[name]
    if name in FRESH_PROCESS:
        code, stderr = tool_runs[name]
    else:
        code, _, stderr = run_tool_in_process(tool, *args)
    assert code != 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    last_line = [line for line in stderr.splitlines() if line.strip()][-1]
    # A flag absl rejects while parsing too (list_presets): no "FATAL Flags parsing error".
    assert last_line.startswith(f"{tool}: error: "), stderr[-3000:]
    assert "FATAL" not in stderr, stderr[-3000:]
    for string in expected:
        assert string in last_line, stderr[-3000:]
    for path in outputs:
        assert not path.exists(), f"{path} was created: {stderr[-3000:]}"


# === In-process: what is a user error ===

# Functions whose code lives "inside the package": compiled under a file name there, the
# way the frames of keras_bert_zoo's own modules are.
_PACKAGE_CODE = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    import keras

    from keras_bert_zoo.utils.errors import UserError


    def raise_on_purpose():
        raise UserError("data/train.tsv:3: 1 columns where the file has 2")


    def raise_chained():
        try:
            {}["label"]
        except KeyError as error:
            raise UserError("--label_column=label: no such column") from error


    def raise_plain_value_error():
        raise ValueError("an argument check of ours that is no user error")


    def open_missing(path):
        with open(path, encoding="utf-8") as f:
            return f.read()


    def raise_file_not_found():
        raise FileNotFoundError("--init_checkpoint=x: no such file or directory")


    def read_latin1(path):
        with open(path, encoding="utf-8") as f:
            return f.read()


    def call_numpy():
        return np.reshape(np.arange(3), (2, 2))


    def reraise_numpy():
        try:
            return call_numpy()
        except ValueError:
            raise


    def call_tensorflow():
        return tf.constant([1, [2, 3]])


    class Layer(keras.layers.Layer):
        def call(self, x):
            return tf.constant([1, [2, 3]])


    def call_keras_layer():
        return Layer()(np.zeros((2, 3), "float32"))


    def type_error():
        raise TypeError("a bug")


    def key_error():
        return {}["missing"]
    """
)


@pytest.fixture(scope="module")
def package_code():
    import keras_bert_zoo

    filename = os.path.join(os.path.dirname(keras_bert_zoo.__file__), "_fake_module_for_tests.py")
    namespace = {"__name__": "keras_bert_zoo._fake_module_for_tests"}
    exec(compile(_PACKAGE_CODE, filename, "exec"), namespace)  # noqa: S102
    return namespace


def _raised(function, *args):
    try:
        function(*args)
    except Exception as error:  # noqa: BLE001
        return error
    raise AssertionError(f"{function.__name__} raised nothing")


@pytest.mark.parametrize(
    "function",
    ["raise_on_purpose", "raise_chained", "raise_file_not_found"],
)
def test_errors_raised_on_purpose_by_our_code_are_user_errors(package_code, function):
    assert cli.is_user_error(_raised(package_code[function]))


def test_os_and_decode_errors_of_our_reads_are_user_errors(package_code, tmp_path):
    missing = _raised(package_code["open_missing"], str(tmp_path / "absent.txt"))
    assert isinstance(missing, FileNotFoundError) and cli.is_user_error(missing)
    assert (
        cli.user_error_message(missing) == f"{tmp_path / 'absent.txt'}: No such file or directory"
    )
    directory = _raised(package_code["open_missing"], str(tmp_path))
    assert isinstance(directory, IsADirectoryError) and cli.is_user_error(directory)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9\n".encode("latin-1"))
    assert cli.is_user_error(_raised(package_code["read_latin1"], str(latin1)))


@pytest.mark.parametrize(
    "function",
    [
        "call_numpy",
        "reraise_numpy",
        "call_tensorflow",
        "call_keras_layer",
        "type_error",
        "key_error",
        "raise_plain_value_error",
    ],
)
def test_errors_raised_elsewhere_or_of_other_types_are_bugs(package_code, function):
    error = _raised(package_code[function])
    assert not cli.is_user_error(error), repr(error)


def test_errors_raised_outside_the_package_are_bugs():
    error = _raised(lambda: (_ for _ in ()).throw(ValueError("raised in a test file")))
    assert not cli.is_user_error(error)


def test_wrapped_main_prints_one_line_and_exits_1(package_code, capsys, monkeypatch):
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", ["tools/run_finetuning.py"])
    with pytest.raises(SystemExit) as exit_info:
        cli.wrap(lambda argv: package_code["raise_on_purpose"]())(["run_finetuning"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == (
        "run_finetuning: error: data/train.tsv:3: 1 columns where the file has 2\n"
    )


def test_a_user_error_is_one_line_wherever_raised_and_a_plain_value_error_a_bug(
    package_code, capsys, monkeypatch
):
    from keras_bert_zoo.utils.errors import UserError

    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", ["tools/run_finetuning.py"])

    def raise_user_error(argv):  # raised in a test file: the class decides, not the place
        raise UserError("--train_file=x.tsv: no such column: label")

    assert issubclass(UserError, ValueError)
    with pytest.raises(SystemExit) as exit_info:
        cli.wrap(raise_user_error)(["run_finetuning"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == (
        "run_finetuning: error: --train_file=x.tsv: no such column: label\n"
    )
    # Raised by our code, but not a UserError: a bug, with its traceback.
    with pytest.raises(ValueError, match="no user error") as raised:
        cli.wrap(lambda argv: package_code["raise_plain_value_error"]())(["run_finetuning"])
    assert type(raised.value) is ValueError and raised.value.__traceback__ is not None
    assert capsys.readouterr().err == ""


def test_the_package_error_families_are_user_errors():
    from keras_bert_zoo.checkpoints.naming import CheckpointError
    from keras_bert_zoo.pretraining.beam_pipeline import BeamNotInstalledError
    from keras_bert_zoo.pretraining.corpus import CorpusError
    from keras_bert_zoo.tasks.sentence.readers import InputFileError
    from keras_bert_zoo.training.checkpointing import CheckpointMismatchError
    from keras_bert_zoo.training.distribute import StrategyError
    from keras_bert_zoo.utils.errors import UserError

    for family in (
        CheckpointError,
        BeamNotInstalledError,
        CorpusError,
        InputFileError,
        CheckpointMismatchError,
        StrategyError,
    ):
        assert issubclass(family, UserError), family
        assert cli.is_user_error(_raised(_raiser(family))), family


def _raiser(family):
    def raise_it():
        raise family("the input is wrong")

    return raise_it


def test_wrapped_main_lets_bugs_and_traceback_requests_through(package_code, monkeypatch):
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    with pytest.raises(KeyError):
        cli.wrap(lambda argv: package_code["key_error"]())(["tool"])
    with pytest.raises(ValueError, match="cannot reshape"):
        cli.wrap(lambda argv: package_code["call_numpy"]())(["tool"])
    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    with pytest.raises(ValueError, match="data/train.tsv:3"):
        cli.wrap(lambda argv: package_code["raise_on_purpose"]())(["tool"])


def test_a_task_typo_is_reported_before_tensorflow_loads(tmp_path):
    from keras_bert_zoo import tasks
    from keras_bert_zoo.tasks import names

    # The list the tool reads without TensorFlow is the registry's.
    assert list(names.TASK_NAMES) == sorted(tasks.list_tasks())
    # A `tensorflow` that fails to import: the answer came before it was needed.
    for package in ("tensorflow", "keras"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("raise ImportError('TensorFlow loaded')\n")
    env = child_process.environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    child = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "tools" / "run_finetuning.py"),
            "--task=glu/mrpc",
            "--output_dir=/nonexistent",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert child.returncode == 1, child.stdout + child.stderr
    assert child.stderr.strip().splitlines() == [
        "run_finetuning: error: --task=glu/mrpc: no such task (did you mean glue/mrpc?); "
        "choose from " + ", ".join(names.TASK_NAMES)
    ]
