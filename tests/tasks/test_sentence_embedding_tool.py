"""`tools/run_finetuning.py --task=sentence_embedding` as a user runs it, on bad input:
a file with the wrong columns, an empty positive, a scored pair out of range, a
judgement naming a document the corpus lacks. Each is one error line naming the file
and line, exit status 1, no traceback, and nothing written. The first case runs the
tool in a fresh process; the others run its `main` in this process as `cli.run` does
(`finetuning_test_helpers.run_tool_as_user`), which prints the same line.
"""

import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import child_process  # noqa: E402
import finetuning_test_helpers as helpers  # noqa: E402
import sentence_embedding_fixtures as fixtures  # noqa: E402


def _run(args):
    completed = subprocess.run(
        [sys.executable, "tools/run_finetuning.py", "--task=sentence_embedding", *args],
        capture_output=True,
        text=True,
        env=child_process.environment(),
        cwd=child_process.REPO_ROOT,
        timeout=300,
    )
    return completed.returncode, completed.stderr


@pytest.mark.slow
def test_bad_input_is_one_line_naming_file_and_line_and_nothing_is_written(tmp_path, load_tool):
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "bert", fixtures.VOCABULARY)
    pairs = [row[:2] for row in fixtures.triplets(4)]
    good = fixtures.write_table(tmp_path / "good.tsv", ["anchor", "positive"], pairs)
    columns = fixtures.write_table(tmp_path / "columns.tsv", ["query", "doc"], pairs)
    empty = fixtures.write_table(
        tmp_path / "empty.tsv", ["anchor", "positive"], [*pairs, ("a", "")]
    )
    scored = fixtures.write_table(
        tmp_path / "scored.tsv", ["anchor", "positive", "score"], [("a cat", "the cat", 6)]
    )
    beir = fixtures.write_beir(tmp_path / "beir", count=3)
    with open(beir["qrels_file"], "a", encoding="utf-8") as f:
        f.write("q0\tnowhere\t1\n")
    cases = {
        "columns": (
            [f"--train_file={columns}"],
            [f"{columns}:1:", "'anchor'", "['query', 'doc']", "--anchor_column"],
        ),
        "empty": ([f"--train_file={empty}"], [f"{empty}:6:", "empty text", "'positive'"]),
        "range": (
            [f"--train_file={scored}", "--score_range=0,5"],
            [f"{scored}:2:", "score 6", "--score_range=0,5"],
        ),
        "corpus": (
            [f"--train_file={good}", *(f"--{k}={v}" for k, v in beir.items())],
            [f"{beir['qrels_file']}:5:", "'nowhere'", "--corpus_file"],
        ),
    }
    for index, (name, (args, fragments)) in enumerate(cases.items()):
        output_dir = tmp_path / f"out_{name}"
        args = [*args, f"--init_checkpoint={checkpoint}", f"--output_dir={output_dir}"]
        if index == 0:
            status, stderr = _run(args)
        else:
            with load_tool("run_finetuning") as tool:
                status, _, stderr = helpers.run_tool_as_user(
                    tool, "run_finetuning", "--task=sentence_embedding", *args
                )
        errors = [line for line in stderr.splitlines() if line.startswith("run_finetuning:")]
        assert status == 1, (name, stderr[-2000:])
        assert "Traceback" not in stderr, name
        assert len(errors) == 1 and errors[0].startswith("run_finetuning: error: "), stderr
        for expected in fragments:
            assert expected in errors[0], (name, errors[0])
        assert not output_dir.exists(), name
