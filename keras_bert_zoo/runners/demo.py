"""The main job: the real pretrained all-MiniLM-L6-v2 fine-tuned on the 200 labelled
movie-review sentences gensim ships, then exported for TF Serving and asked in raw text.

`tools/run_finetuning.py` with no flags runs it (`run_demo(demo_config())`); any flag
given changes that job's setting.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from keras_bert_zoo.runners.finetuning import FinetuningConfig, FinetuningResult, run_finetuning
from keras_bert_zoo.tasks import prediction
from keras_bert_zoo.utils import installation, run_layout

DEMO_DATA_FILE = "pang_lee_polarity.cor"
DEMO_SENTENCES = (
    "A gripping, beautifully acted film that stays with you long after it ends.",
    "Tedious, predictable and far too long; I nearly fell asleep.",
    "The performances are wonderful and the story is genuinely moving.",
    "A clumsy mess of a movie with no laughs and no heart.",
)


def gensim_test_data_dir() -> str:
    """gensim's test-data directory (it holds `pang_lee_polarity.cor`)."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "The main job's data comes from the 'gensim' package, which is not installed: "
            f"run `{installation.install_extra_command('demo')}`"
        )
    path = os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data")
    if not os.path.isfile(os.path.join(path, DEMO_DATA_FILE)):
        raise FileNotFoundError(f"{path}: no {DEMO_DATA_FILE} (gensim==4.4.0 ships it)")
    return path


def demo_config(**overrides) -> FinetuningConfig:
    """The main job's settings, for 150 training sentences on 2 CPU cores.

    all-MiniLM-L6-v2 (the `demo` extra's real pretrained BERT) on gensim's 200 labelled
    movie-review sentences (`__label__pos` / `__label__neg`, Latin-1), 50 of them held
    out (25 per label, picked by a seeded SHA-256: the same split everywhere). The
    paper's 3 epochs at batch 32 are 14 steps here, too few; 10 epochs at batch 16
    with a peak learning rate of 5e-5, linear decay without warmup, and sequences of 64
    tokens (the longest sentence has 52 words) learn it. The held-out set is evaluated
    after each epoch to show progress; the final model is reported, so nothing is
    chosen on the held-out set.

    Args:
        **overrides: `FinetuningConfig` fields to change (task options in
            `task_options` update the demo's).
    """
    from keras_bert_zoo.tasks.feature_extraction import DEMO_CHECKPOINT

    task_options = {
        "train_file": DEMO_DATA_FILE,
        "input_format": "fasttext",
        "heldout_fraction": 0.25,
    }
    task_options.update(overrides.pop("task_options", {}))
    settings = dict(
        task="text_classification",
        mode="train_and_eval",
        data_dir=overrides.get("data_dir") or gensim_test_data_dir(),
        encoding="latin-1",
        init_checkpoint=overrides.get("init_checkpoint") or DEMO_CHECKPOINT,
        max_seq_length=64,
        train_batch_size=16,
        num_train_epochs=10.0,
        learning_rate=5e-5,
        warmup_proportion=0.0,
        steps_per_loop=3,
        checkpoint_every=0,
        keep_checkpoints=1,
        export_best=False,
        eval_batch_size=50,
        seed=12345,
        task_options=task_options,
    )
    settings.update(overrides)
    return FinetuningConfig(**settings)


@dataclasses.dataclass
class DemoResult:
    """What `run_demo` printed.

    Attributes:
        finetuning: the run's `FinetuningResult` (its `exports["keras"]` is the
            fine-tuned directory, which `tasks.load_finetuned` and the SavedModel export
            read).
        accuracy: held-out accuracy of the final model.
        num_heldout: held-out sentences.
        answers: `(sentence, label, probability)` for each raw sentence.
        seconds: wall time of the whole job.
        output_dir: where its files are.
        exported: the TF Serving SavedModel (`serving.ExportedModel`) under
            `output_dir/serving/`.
        served_answers: the export's answers for the raw sentences (dicts with
            `label`, `label_id`, `probabilities`), from the SavedModel loaded back.
    """

    finetuning: FinetuningResult
    accuracy: float
    num_heldout: int
    answers: list[tuple[str, str, float]]
    seconds: float
    output_dir: str
    exported: Any = None
    served_answers: list[dict] = dataclasses.field(default_factory=list)


def exported_base(output_dir: str) -> str:
    """Where the main job writes its TF Serving export (`<task>/<version>/` below it)."""
    return os.path.join(output_dir, "serving")


def _keep_only(directory: str, kept: Sequence[str]) -> None:
    kept_names = {os.path.relpath(path, directory) for path in kept}
    for name in os.listdir(directory):
        if name in kept_names:
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)


def answer_sentences(task, model, preprocessor, sentences, batch_size=32):
    """`(sentence, label, probability of that label)` for raw sentences."""
    examples = task.examples_from_texts(list(sentences))
    answers = prediction.predict(task, model, examples, preprocessor, batch_size)
    return [
        (sentence, answer.label, float(answer.probabilities[answer.label]))
        for sentence, answer in zip(sentences, answers, strict=True)
    ]


def run_demo(
    config: FinetuningConfig | None = None,
    sentences: Sequence[str] = DEMO_SENTENCES,
    out=None,
) -> DemoResult:
    """The main job: fine-tunes MiniLM on gensim's movie reviews, prints the held-out
    accuracy, the wall time and its answers for a few raw sentences.

    Args:
        config: `demo_config()` by default; without an `output_dir`, a new temporary
            directory is used, and at the end it keeps only what the job prints: the
            fine-tuned model (`finetuned/`), the TF Serving export (`serving/`) and any
            `checkpoint_layouts` asked for (about 180 MB for MiniLM). Its training
            checkpoint, summaries and predictions go: nobody resumes or reads them.
        sentences: raw sentences to answer.
        out: where to print (default: standard output).
    """
    out = out or sys.stdout
    start = time.time()
    config = config or demo_config()
    temporary = not config.output_dir
    if temporary:
        config = dataclasses.replace(
            config, output_dir=tempfile.mkdtemp(prefix="keras_bert_zoo_finetuning_demo_")
        )

    def say(text=""):
        print(text, file=out, flush=True)

    say(
        f"Fine-tuning {config.init_checkpoint}\n  on {config.task} "
        f"{os.path.join(config.data_dir or '', config.task_options.get('train_file') or '')}\n"
        f"  lr {config.learning_rate:g}, batch {config.train_batch_size}, "
        f"{config.num_train_epochs:g} epochs, max_seq_length {config.max_seq_length}, "
        f"warmup {config.warmup_proportion:g}; output in {config.output_dir}"
    )
    result = run_finetuning(config)
    task = result.task
    first_split = next(iter(result.eval_results))
    accuracy = result.eval_results[first_split].get("accuracy", float("nan"))
    num_heldout = len(task.read(first_split))
    answers = answer_sentences(task, result.model, result.preprocessor, sentences)
    if temporary:
        # The checkpoint is the largest thing here (weights and optimizer slots, 3x the
        # model) and is gone before the export needs the disk.
        shutil.rmtree(
            os.path.join(config.output_dir, run_layout.CHECKPOINTS_DIR), ignore_errors=True
        )
    # The answers users get in production come from the SavedModel TF Serving loads, so
    # the main job exports one and asks it, not the Keras model, in raw text.
    from keras_bert_zoo import serving

    exported, served_answers = serving.export_and_answer(
        result.exports["keras"], exported_base(config.output_dir), list(sentences)
    )
    if temporary:
        _keep_only(config.output_dir, [exported_base(config.output_dir), *result.exports.values()])
    seconds = time.time() - start

    for entry in result.eval_history:
        split_results = entry["results"].get(first_split, {})
        if "accuracy" in split_results:
            say(f"  step {entry['step']:>4}: held-out accuracy {split_results['accuracy']:.3f}")
    say(
        f"held-out accuracy: {accuracy:.3f} on {num_heldout} sentences "
        f"(chance 0.5; model at step {result.step})"
    )
    say(
        f"wall time: {seconds:.1f} s (training {result.training_seconds:.1f} s, "
        f"{os.cpu_count()} CPU cores visible)"
    )
    say(f"exported for TF Serving: {exported.path}")
    say("answers served by the export (loaded back, raw text in):")
    for sentence, served in zip(sentences, served_answers, strict=True):
        probability = max(served["probabilities"])
        say(f"  {served['label']:>4} {probability:.3f}  {sentence}")
    difference = max(
        abs(max(served["probabilities"]) - probability)
        for (_, _, probability), served in zip(answers, served_answers, strict=True)
    )
    agree = all(
        served["label"] == label
        for (_, label, _), served in zip(answers, served_answers, strict=True)
    )
    say(
        f"  same labels as the in-memory Keras model: {'yes' if agree else 'NO'}; "
        f"largest probability difference {difference:.1e}"
    )
    say(f"fine-tuned model: {result.exports.get('keras')}")
    for export_format, path in result.exports.items():
        if export_format != "keras":
            say(f"{export_format} checkpoint: {path}")
    return DemoResult(
        result, accuracy, num_heldout, answers, seconds, config.output_dir, exported, served_answers
    )
