"""The settings of each job: one dataclass per job, whose fields are its binary's flags.

Each field is declared once, with its default, help and bounds (`utils.settings`):
`define_flags` defines the flags from it, `config_from_flags` reads them back, and
`--helpfull` shows the same help. The training core's fields come from
`training.options.TrainingOptions`; a job redeclares only the defaults it changes (a
default every job shares is the core's: google-research/bert's learning rate, 5e-5).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from keras_bert_zoo.runners import run_dir
from keras_bert_zoo.runners.runner import MODES
from keras_bert_zoo.tasks import registry
from keras_bert_zoo.tasks.pretraining import INPUT_MODES
from keras_bert_zoo.training.options import TrainingOptions
from keras_bert_zoo.utils import settings
from keras_bert_zoo.utils.deprecation import RenamedFields
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.run_layout import CHECKPOINT_LAYOUTS
from keras_bert_zoo.utils.settings import setting

PRETRAINING_MODES = ("train", "eval", "export")

# === What every job has ===


@dataclasses.dataclass
class JobOptions(TrainingOptions, metaclass=RenamedFields):
    """The settings every job shares: the training core's (where the run goes,
    `output_dir`, among them), where it starts from (`init_checkpoint`, which each job
    redeclares with what it accepts), and its vocabulary, evaluation batch and exports."""

    init_checkpoint: str | None = setting(
        None,
        help="On a fresh start, load the encoder (and any heads it holds) from this "
        "checkpoint: a google-research/bert or Hugging Face directory.",
        affects_result=True,
    )
    vocab_file: str | None = setting(
        None,
        help="WordPiece vocab.txt (default: --init_checkpoint's; pretraining copies it into "
        "the exports).",
        affects_result=True,
    )
    do_lower_case: bool | None = setting(
        None,
        help="Lower-case and strip accents (pretraining: of --input_mode=dynamic_text). "
        "Default: read from the vocabulary; a value that contradicts it is an error.",
        affects_result=True,
    )
    eval_batch_size: int = setting(
        32, help="Batch size of evaluation.", lower_bound=1, affects_result=False
    )
    # Each layout is a full copy of the weights (88 MB for MiniLM, 440 MB for BERT-Base):
    # a fine-tuning run writes only the ones asked for; a pretraining run redeclares both.
    checkpoint_layouts: tuple[str, ...] = setting(
        (),
        help="Checkpoint layouts the run writes beside its model, with the heads it has: "
        "google (export_google/), huggingface (export_huggingface/); repeat the flag for both.",
        choices=CHECKPOINT_LAYOUTS,
        old_names=("export_formats",),
        affects_result=False,
    )
    overwrite_output_dir: bool = setting(
        False,
        help="Start over in --output_dir: remove the run there (its checkpoints, summaries, "
        "models, evaluations and predictions; other files stay) instead of resuming it. A "
        "rerun with settings that change what is learned needs it (or another --output_dir).",
        affects_result=False,
    )
    # `JobOptions(export_formats=...)` and `.export_formats`, for one release.
    RENAMED_FIELDS: ClassVar = {"export_formats": "checkpoint_layouts"}

    def __post_init__(self):
        super().__post_init__()
        self.checkpoint_layouts = run_dir.check_checkpoint_layouts(self.checkpoint_layouts)


# === Fine-tuning ===


@dataclasses.dataclass
class FinetuningConfig(JobOptions):
    """Every setting of a fine-tuning run; each field is the binary's flag of that name,
    with its help (`utils.settings`).

    The training fields are those of `keras_bert_zoo.training.options`; the defaults are
    google-research/bert's `run_classifier.py` ones (the paper's fine-tuning recipe).
    `task_options` holds the task's own options (`TaskOption`s) by name, e.g.
    `{"train_file": "reviews.tsv", "heldout_fraction": 0.25}`: one flag each; in
    eval/predict/export runs they override a fine-tuned model's saved options.
    """

    # === The run ===
    task: str | None = setting(
        None,
        help="The task: " + ", ".join(registry.list_tasks()) + ". Without it (and in a run with "
        "no flags) the built-in main job runs: MiniLM fine-tuned on gensim's movie reviews. "
        "May be left out in eval/predict/export runs of a fine-tuned model (it names its task).",
        affects_result=True,
    )
    mode: str = setting(
        "train_and_eval",
        help="train | train_and_eval (periodic evaluation, best export) | eval | predict | "
        "export (a fine-tuned model written as finetuned/ and --checkpoint_layouts).",
        choices=MODES,
        affects_result=False,
    )
    data_dir: str | None = setting(
        None, help="Directory of the task's files (official layout).", affects_result=True
    )
    eval_split: str | None = setting(
        None,
        help="The name of the evaluated split: eval_results.json's key, "
        "predictions_<split>.jsonl, the TensorBoard tags (e.g. test). Default: the stem of "
        "--eval_file when given, else the task's (dev).",
        affects_result=False,
    )
    tfds_data_dir: str | None = setting(
        None,
        help="tensorflow-datasets data directory to read a prepared copy from when "
        "--data_dir is unset (nothing is downloaded).",
        affects_result=True,
    )
    init_checkpoint: str | None = setting(
        None,
        help="Training: the initial weights: a google-research/bert or Hugging Face "
        "directory, the name of a pretrained checkpoint an installed package ships "
        "(all-MiniLM-L6-v2: the demo extra's real MiniLM; tools/list_presets.py lists them), "
        "a fine-tuned directory or a fine-tuning run's --output_dir (its "
        "encoder), a pretraining run's --output_dir, or a preset name (random weights). "
        "eval/predict/export: the fine-tuned model (default: --output_dir's).",
        affects_result=True,
    )
    max_seq_length: int | None = setting(
        None,
        help="Tokens per packed sequence (default: the task's, 128 for sentence tasks and "
        "384 for SQuAD; for a fine-tuned model, the length it was trained with).",
        lower_bound=3,
        affects_result=True,
    )
    encoding: str | None = setting(
        None, help="Text encoding of the input files (default: UTF-8).", affects_result=True
    )
    task_options: dict[str, Any] = setting(
        help="The task's options.",
        flag=False,
        default_factory=dict,
        affects_result=True,
    )
    num_train_epochs: float = setting(
        3.0, help="Epochs over the training examples.", affects_result=True
    )
    num_train_steps: int | None = setting(
        None,
        help="Optimizer steps (default: examples / --train_batch_size * --num_train_epochs).",
        lower_bound=0,
        affects_result=True,
    )
    predict_batch_size: int = setting(
        32, help="Batch size of prediction.", lower_bound=1, affects_result=False
    )
    use_best_model: bool = setting(
        False,
        help="Evaluate, predict and export with the best evaluated model (best/) instead "
        "of the final one.",
        affects_result=False,
    )
    export_best: bool = setting(
        True,
        help="Export the best evaluated model to --output_dir/best/ during training.",
        affects_result=False,
    )
    # === Training core (keras_bert_zoo.training.options): the defaults fine-tuning changes ===
    warmup_proportion: float = 0.1
    steps_per_loop: int = 10
    eval_every: int | None = None  # once per epoch

    def __post_init__(self):
        super().__post_init__()
        self.task_options = dict(self.task_options)
        if self.num_train_epochs <= 0 and not self.num_train_steps:
            raise UserError(f"num_train_epochs must be positive, got {self.num_train_epochs}")

    @property
    def trains(self) -> bool:
        return self.mode in ("train", "train_and_eval")


def runner_flag_names() -> list[str]:
    """The names of the binary's flags that map to `FinetuningConfig` fields."""
    return settings.flag_names(FinetuningConfig)


def define_flags(flag_values=None) -> None:
    """Defines the binary's flags: one per `FinetuningConfig` field (the training core's
    with the fine-tuning defaults) and one per task option (`tasks.all_task_options()`)."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    settings.define_flags(FinetuningConfig, flag_values)
    for option in registry.all_task_options().values():
        if option.name in runner_flag_names():
            raise ValueError(f"Task option {option.name!r} clashes with a flag of run_finetuning")
        settings.define_value_flag(
            flag_values, option.name, option.default, f"[task option] {option.help}", option.choices
        )


def explicit_flag_values(flag_values=None) -> dict[str, Any]:
    """The settings given on the command line, as `FinetuningConfig` keywords (task
    options gathered in `task_options`)."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    values = settings.flag_values_of(FinetuningConfig, flag_values, given_only=True)
    options = {
        name: flag_values[name].value
        for name in registry.all_task_options()
        if name in flag_values and flag_values[name].present
    }
    if options:
        values["task_options"] = options
    return values


def config_from_flags(flag_values=None) -> FinetuningConfig:
    """A `FinetuningConfig` from parsed flags: every runner and training flag, and the
    task options that were given on the command line (the others keep the task's own
    defaults, or a fine-tuned model's saved values)."""
    values = settings.flag_values_of(FinetuningConfig, flag_values)
    values["task_options"] = explicit_flag_values(flag_values).get("task_options", {})
    return FinetuningConfig(**values)


# === Pretraining ===


@dataclasses.dataclass
class PretrainingConfig(JobOptions):
    """Every setting of a pretraining run: one flag per field, its help in the field
    (`utils.settings`); the training core's are `training.options.TrainingOptions`'. The
    defaults are google-research/bert's `run_pretraining.py` ones, except the warmup: 1%
    of the steps (the paper's 10,000 of 1,000,000), as a fixed 10,000 would exceed a
    shorter run."""

    mode: str = setting(
        "train",
        help="train: train (evaluating on --eval_input_file when given), export; eval: "
        "evaluate --output_dir's newest checkpoint (or --init_checkpoint) on "
        "--eval_input_file; export: write that model as export_google/, export_huggingface/.",
        choices=PRETRAINING_MODES,
        affects_result=False,
    )
    # === Input ===
    input_file: str | None = setting(
        None,
        help="Comma-separated globs of the training input: pretraining TFRecords (ours or "
        "google-research/bert's) or, with --input_mode=dynamic_text, text files.",
        affects_result=True,
    )
    input_mode: str = setting(
        "records",
        help="records: static records as written; remask_records: the records with new "
        "masks every pass; dynamic_text: raw text, NSP pairs and masks made on the fly.",
        choices=INPUT_MODES,
        affects_result=True,
    )
    eval_input_file: str | None = setting(
        None,
        help="Comma-separated globs of held-out pretraining records.",
        affects_result=False,
    )
    eval_steps: int = setting(
        100, help="Batches per evaluation (0: all).", lower_bound=0, affects_result=False
    )
    eval_batch_size: int = 8
    # The exported checkpoint is what pretraining is for: both layouts by default.
    checkpoint_layouts: tuple[str, ...] = CHECKPOINT_LAYOUTS
    # === Model ===
    bert_config_file: str | None = setting(
        None,
        help="The model's bert_config.json (or HF config.json).",
        affects_result=True,
    )
    preset: str | None = setting(
        None,
        help="A preset architecture for random weights (e.g. bert_tiny_uncased).",
        affects_result=True,
    )
    init_checkpoint: str | None = setting(
        None,
        help="Initial weights on a fresh start: a google-research/bert or Hugging Face "
        "directory (with or without the pretraining heads), an earlier run's --output_dir "
        "or one of its checkpoints/ckpt-N, a fine-tuned directory, or a preset name. "
        "--mode=eval|export: the model used (default: --output_dir's newest checkpoint).",
        affects_result=True,
    )
    # === Data ===
    max_seq_length: int | None = setting(
        None,
        help="Tokens per sequence (records: default read from them; dynamic_text: 128). "
        "Longer than --init_checkpoint's position table: the table is extended (phase 2).",
        lower_bound=5,
        affects_result=True,
    )
    max_predictions_per_seq: int | None = setting(
        None,
        help="Masked positions per sequence (records: default read from them; else 20).",
        lower_bound=1,
        affects_result=True,
    )
    masked_lm_prob: float = setting(
        0.15, help="Masked LM probability (dynamic modes).", affects_result=True
    )
    short_seq_prob: float = setting(
        0.1, help="Probability of shorter sequences (dynamic_text).", affects_result=True
    )
    do_whole_word_mask: bool = setting(
        False, help="Whole-word masking (dynamic modes).", affects_result=True
    )
    shuffle_buffer: int = setting(
        10_000,
        help="Records (instances) shuffled in memory.",
        lower_bound=0,
        affects_result=True,
    )
    # === Run ===
    num_train_steps: int = setting(
        100_000, help="Optimizer steps.", lower_bound=1, affects_result=True
    )
    # === Training core (keras_bert_zoo.training.options): the defaults pretraining changes ===
    warmup_proportion: float = 0.01
    decay_from_step_zero: bool = True

    def __post_init__(self):
        super().__post_init__()
        if self.bert_config_file and self.preset:
            raise UserError("Pass only one of bert_config_file and preset")


def pretraining_flag_names() -> list[str]:
    """The names of the binary's flags (one per `PretrainingConfig` field)."""
    return settings.flag_names(PretrainingConfig)


def define_pretraining_flags(flag_values=None) -> None:
    """Defines the binary's flags: its own and every training-core flag (with the
    pretraining defaults)."""
    settings.define_flags(PretrainingConfig, flag_values)


def config_from_pretraining_flags(flag_values=None) -> PretrainingConfig:
    """A `PretrainingConfig` from parsed flags."""
    return PretrainingConfig(**settings.flag_values_of(PretrainingConfig, flag_values))


# === Distillation ===

DISTILLATION_MODES = ("train", "train_and_eval")
# Fine-tuning fields the teacher decides: not flags of run_distillation.
DISTILLATION_EXCLUDED = ("init_checkpoint",)


@dataclasses.dataclass
class DistillationConfig(FinetuningConfig):
    """Every setting of a distillation run: a student of `teacher` (a fine-tuned model)
    trained on the teacher's task. The fine-tuning fields keep their meaning (the task's
    data and options, the training core, the evaluation); `init_checkpoint` is the
    teacher's, and so is `task` but for a checkpoint teacher (an embedding model). The
    output directory is a fine-tuning run's: `run_finetuning
    --mode=eval|predict|export` and `export_saved_model.py` take it as it is."""

    teacher: str | None = setting(
        None,
        help="The teacher: a fine-tuned directory (finetuned/, best/) or a fine-tuning run's "
        "--output_dir, of any task; or, with --task=sentence_embedding, an embedding "
        "checkpoint (a sentence-transformers directory or an installed name such as "
        "all-MiniLM-L6-v2).",
        affects_result=True,
    )
    task: str | None = setting(
        None,
        help="The task of a --teacher checkpoint (sentence_embedding); a fine-tuned teacher "
        "names its own (given, it must be that one).",
        affects_result=True,
    )
    student: str | None = setting(
        None,
        help="Where the student starts when it is not the teacher's own layers: a preset "
        "(random weights of that architecture) or any checkpoint --init_checkpoint accepts "
        "(its vocabulary must be the teacher's; the hidden size may differ).",
        affects_result=True,
    )
    student_layers: str | None = setting(
        None,
        help="The student is the teacher with these of its blocks (DistilBERT's "
        "initialization): indices (0,2,4) or a count (3: evenly spaced from the first). "
        "Default: half the teacher's blocks, when --student is not given.",
        affects_result=True,
    )
    transfer_file: str | None = setting(
        None,
        help="Unlabelled in-domain text the teacher labels, one example a line (the task's "
        "text fields separated by tabs): trained on the soft targets and intermediate "
        "losses only.",
        affects_result=True,
    )
    cache_teacher_outputs: bool = setting(
        False,
        help="Compute the teacher's outputs over the training features once, into "
        "<output_dir>/teacher_outputs.tfrecord, and train on them instead of running the "
        "teacher at every step (a large transfer set; the soft-target term only, not "
        "--hidden_state_weight or --attention_weight). A resumed run reads them back.",
        affects_result=False,
    )
    temperature: float = setting(
        2.0,
        help="Softmax temperature of the soft targets (the loss is scaled by T^2).",
        affects_result=True,
    )
    hard_label_weight: float = setting(
        1.0,
        help="Weight of the task's own loss on the labels.",
        lower_bound=0.0,
        affects_result=True,
    )
    soft_target_weight: float = setting(
        1.0,
        help="Weight of the soft-target loss: KL to the teacher's temperature-scaled "
        "distributions (per position for span and tag heads, over the choices for multiple "
        "choice), or squared error to its score (regression).",
        lower_bound=0.0,
        affects_result=True,
    )
    hidden_state_weight: float = setting(
        0.0,
        help="Weight of the hidden-state loss: MSE between mapped blocks' outputs, through a "
        "learned projection when the widths differ (TinyBERT).",
        lower_bound=0.0,
        affects_result=True,
    )
    attention_weight: float = setting(
        0.0,
        help="Weight of the attention loss: KL between mapped blocks' attention "
        "distributions (TinyBERT, MiniLM).",
        lower_bound=0.0,
        affects_result=True,
    )
    layer_map: str | None = setting(
        None,
        help="student:teacher block pairs of the intermediate losses, e.g. 0:1,1:3,2:5 "
        "(default: uniform, the last block to the last block).",
        affects_result=True,
    )
    mode: str = setting(
        "train_and_eval",
        help="train | train_and_eval (periodic evaluation of the student, best export). "
        "Evaluate, predict or export the result with run_finetuning.py.",
        choices=DISTILLATION_MODES,
        affects_result=False,
    )


def distillation_flag_names() -> list[str]:
    """The names of the binary's flags that map to `DistillationConfig` fields."""
    return [
        name
        for name in settings.flag_names(DistillationConfig)
        if name not in DISTILLATION_EXCLUDED
    ]


def define_distillation_flags(flag_values=None) -> None:
    """Defines the binary's flags: one per `DistillationConfig` field, and one per task
    option (`tasks.all_task_options()`)."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    settings.define_flags(DistillationConfig, flag_values, exclude=DISTILLATION_EXCLUDED)
    for option in registry.all_task_options().values():
        settings.define_value_flag(
            flag_values, option.name, option.default, f"[task option] {option.help}", option.choices
        )


def config_from_distillation_flags(flag_values=None) -> DistillationConfig:
    """A `DistillationConfig` from parsed flags (task options given on the command line
    in `task_options`)."""
    values = settings.flag_values_of(DistillationConfig, flag_values)
    values["task_options"] = explicit_flag_values(flag_values).get("task_options", {})
    return DistillationConfig(**values)
