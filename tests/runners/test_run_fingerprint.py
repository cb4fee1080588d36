"""The resume fingerprint (`runners.fingerprint`, issue 47 point 1): a rerun into the
same `--output_dir` resumes only the same run.

Each setting that changes what is learned is changed in turn, and the job refuses the
directory in one line naming it (old -> new) and the two ways on; each setting that
does not is changed in turn, and the job accepts it. The check runs where the runner
runs it, in `record_run`, on a prepared job (data read, tokenizer made, no model built
and nothing trained), so the whole table takes seconds; one end-to-end run of the tool
is in tests/tools/test_rerun_with_other_settings.py.

Every field of every job's config must appear in these tables (a new setting must be
classified, and tested), and the tables must agree with the fields' declarations
(`setting(affects_result=...)`).
"""

import dataclasses
import json
import os
import pathlib
import re
import shutil
import sys

import pytest

from keras_bert_zoo.pretraining import CreationConfig, create_pretraining_data
from keras_bert_zoo.runners import (
    distillation,
    finetuning,
    fingerprint,
    pretraining,
    run_dir,
    sources,
)
from keras_bert_zoo.runners.configs import DistillationConfig, FinetuningConfig, PretrainingConfig
from keras_bert_zoo.tasks import registry
from keras_bert_zoo.training.options import TrainingOptions
from keras_bert_zoo.utils import settings
from keras_bert_zoo.utils.errors import UserError

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))
import finetuning_test_helpers as helpers  # noqa: E402

WORDS = ["good", "great", "fun", "bad", "awful", "dull", "the", "film", "was", "very", "."]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(WORDS)
# The same number of tokens (it fits the checkpoint's table), one of them another word.
OTHER_VOCABULARY = [*VOCABULARY[:-1], "plot"]
BASE_OPTIONS = {"train_file": "train.tsv", "eval_file": "dev.tsv", "text_column": "sentence"}


def _rows(count, offset=0):
    """SST-2's layout (`sentence<TAB>label`, labels 0/1): glue/sst2 and
    text_classification (with --text_column=sentence) read the same files."""
    rows = ["sentence\tlabel"]
    for index in range(offset, offset + count):
        positive = index % 2 == 0
        word = WORDS[index % 3] if positive else WORDS[3 + index % 3]
        rows.append(f"the film was very {word} .\t{int(positive)}")
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("fingerprint")
    data = root / "data"
    data.mkdir()
    (data / "train.tsv").write_text(_rows(16), encoding="utf-8")
    (data / "train_copy.tsv").write_text(_rows(16), encoding="utf-8")
    (data / "dev.tsv").write_text(_rows(6, offset=16), encoding="utf-8")
    (data / "dev_copy.tsv").write_text(_rows(6, offset=16), encoding="utf-8")
    shutil.copytree(data, root / "data_copy")
    (root / "tfds").mkdir()
    other_vocab = root / "other_vocab.txt"
    other_vocab.write_text("\n".join(OTHER_VOCABULARY) + "\n", encoding="utf-8")
    corpus = root / "corpus.txt"
    sentences = [" ".join(WORDS[i % 11 :] + WORDS[: i % 11]) for i in range(24)]
    corpus.write_text(
        "\n\n".join("\n".join(sentences[i : i + 4]) for i in range(0, 24, 4)) + "\n", "utf-8"
    )
    other_corpus = root / "other_corpus.txt"
    other_corpus.write_text(corpus.read_text("utf-8").replace("film", "plot"), "utf-8")
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", VOCABULARY)
    records = root / "corpus.tfrecord"
    create_pretraining_data(
        str(corpus),
        str(records),
        CreationConfig(
            vocab_file=os.path.join(checkpoint, "vocab.txt"),
            max_seq_length=32,
            max_predictions_per_seq=5,
            dupe_factor=1,
        ),
        num_workers=0,
        progress_interval=1e9,
    )
    bert_config = json.loads((pathlib.Path(checkpoint) / "bert_config.json").read_text())
    bert_config_file = root / "other_bert_config.json"
    bert_config_file.write_text(json.dumps({**bert_config, "intermediate_size": 48}))
    return {
        "root": root,
        "data_dir": str(data),
        "data_copy": str(root / "data_copy"),
        "tfds": str(root / "tfds"),
        "checkpoint": checkpoint,
        "checkpoint_b": helpers.write_tiny_checkpoint(root / "bert_b", VOCABULARY, seed=1),
        "other_vocab": str(other_vocab),
        "corpus": str(corpus),
        "other_corpus": str(other_corpus),
        "records": str(records),
        "bert_config_file": str(bert_config_file),
    }


@pytest.fixture(scope="module", autouse=True)
def one_tokenizer_per_vocabulary():
    """Each vocabulary's tokenizer is built once (its WordPiece model takes 0.3 s, the
    most of a job's preparation here); the fingerprint reads its vocabulary and casing."""
    built = {}
    make_tokenizer = sources.make_tokenizer

    def cached(vocab_file, do_lower_case, **kwargs):
        key = (vocab_file, do_lower_case)
        if key not in built:
            built[key] = make_tokenizer(vocab_file, do_lower_case, **kwargs)
        return built[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources, "make_tokenizer", cached)
        yield


def _resolve(changes, files):
    return changes(files) if callable(changes) else changes


def _assert_refused_naming(job, name):
    with pytest.raises(UserError) as raised:
        job.record_run(write=False)
    message = str(raised.value)
    assert "\n" not in message, message
    assert re.search(rf"(: |, ){re.escape(name)} \S.* -> ", message), message
    assert "Use another --output_dir, or --overwrite_output_dir" in message, message
    return message


# === Fine-tuning: every field of FinetuningConfig ===

# A change of each setting that changes what is learned (a function of the files where it
# names one), and the name the refusal gives it.
FINETUNING_LEARNED = {
    "seed": {"seed": 1},
    "train_batch_size": {"train_batch_size": 4},
    "dtype_policy": {"dtype_policy": "mixed_bfloat16"},
    "mixed_precision": {"mixed_precision": True},
    "batching": {"batching": "padded"},
    "optimizer": {"optimizer": "lamb"},
    "learning_rate": {"learning_rate": 3e-5},
    "lr_schedule": {"lr_schedule": "cosine"},
    "num_warmup_steps": {"num_warmup_steps": 2},
    "warmup_proportion": {"warmup_proportion": 0.2},
    "end_learning_rate": {"end_learning_rate": 1e-6},
    "decay_power": {"decay_power": 2.0},
    "decay_from_step_zero": {"decay_from_step_zero": True},
    "weight_decay": {"weight_decay": 0.0},
    "exclude_embeddings_from_weight_decay": {"exclude_embeddings_from_weight_decay": True},
    "adam_beta_1": {"adam_beta_1": 0.8},
    "adam_beta_2": {"adam_beta_2": 0.99},
    "adam_epsilon": {"adam_epsilon": 1e-8},
    "clip_norm": {"clip_norm": 0.5},
    "gradient_accumulation_steps": {"gradient_accumulation_steps": 2},
    "init_checkpoint": lambda f: {"init_checkpoint": f["checkpoint_b"]},
    "vocab_file": lambda f: {"vocab_file": f["other_vocab"]},
    "do_lower_case": {"do_lower_case": False},
    "task": {"task": "glue/sst2", "task_options": {}},
    "data_dir": lambda f: {"data_dir": f["data_copy"]},
    "tfds_data_dir": lambda f: {"tfds_data_dir": f["tfds"]},
    "max_seq_length": {"max_seq_length": 24},
    "encoding": {"encoding": "latin-1"},
    "task_options": {"task_options": {**BASE_OPTIONS, "train_file": "train_copy.tsv"}},
    "num_train_epochs": {"num_train_epochs": 2.0},
    "num_train_steps": {"num_train_steps": 5},
}
NAMED = {"task_options": "train_file"}

# A change of each setting that does not (the run resumes).
FINETUNING_HARMLESS = {
    "mode": {"mode": "train"},
    "eval_split": {"eval_split": "test"},
    "eval_batch_size": {"eval_batch_size": 8},
    "predict_batch_size": {"predict_batch_size": 8},
    "checkpoint_layouts": {"checkpoint_layouts": ("google", "huggingface")},
    "overwrite_output_dir": {"overwrite_output_dir": True},
    "use_best_model": {"use_best_model": True},
    "export_best": {"export_best": False},
    "distribution_strategy": {"distribution_strategy": "mirrored"},
    "tpu": {"tpu": "local"},
    "num_gpus": {"num_gpus": 0},
    "jit_compile": {"jit_compile": True},
    "steps_per_loop": {"steps_per_loop": 3},
    "checkpoint_every": {"checkpoint_every": 5},
    "checkpoint_every_seconds": {"checkpoint_every_seconds": 0},
    "keep_checkpoints": {"keep_checkpoints": 1},
    "eval_every": {"eval_every": 2},
    "progress": {"progress": "log"},
    "output_dir": {},  # the same directory: what a rerun is
}

# Task options of text_classification, changed the same way (the others' are checked by
# their classification below).
TASK_OPTIONS_LEARNED = {
    "train_file": "train_copy.tsv",
    "input_format": "tsv",
    "delimiter": "tab",
    "label_names": "1,0",
    "regression": True,
    "heldout_seed": 7,
    "label_separator": ";",
    "long_documents": "windows",
    "window_stride": 32,
}
TASK_OPTIONS_HARMLESS = {"eval_file": "dev_copy.tsv", "predict_file": "dev.tsv"}


def _finetuning_config(files, **changes):
    config = helpers.quick_config(
        task="text_classification",
        mode="train_and_eval",
        data_dir=files["data_dir"],
        init_checkpoint=files["checkpoint"],
        output_dir=str(files["root"] / "finetuning_run"),
        max_seq_length=16,
        train_batch_size=8,
        num_train_epochs=3.0,
        task_options=dict(BASE_OPTIONS),
    )
    return dataclasses.replace(config, **changes)


def _prepared(job):
    job.check_inputs()
    job.prepare(None)
    return job


@pytest.fixture(scope="module")
def finetuning_run(files):
    """A recorded fine-tuning run: `run_settings.json` and `task.json` as a run writes
    them before its first step."""
    _prepared(finetuning.FinetuningJob(_finetuning_config(files))).record_run(write=True)
    return files


def test_every_setting_of_every_job_is_classified():
    for config_class in (FinetuningConfig, PretrainingConfig, DistillationConfig):
        assert settings.unclassified_settings(config_class) == [], config_class.__name__


def test_the_finetuning_tables_are_every_field_as_declared():
    fields = {field.name for field in dataclasses.fields(FinetuningConfig)}
    assert set(FINETUNING_LEARNED).isdisjoint(FINETUNING_HARMLESS)
    assert set(FINETUNING_LEARNED) | set(FINETUNING_HARMLESS) == fields, (
        "a new setting: declare setting(affects_result=...) and add it to a table here"
    )
    assert set(FINETUNING_LEARNED) == set(settings.result_settings(FinetuningConfig))


def test_every_task_option_is_classified():
    learned = fingerprint.TASK_OPTIONS_AFFECTING_RESULT
    harmless = fingerprint.TASK_OPTIONS_NOT_AFFECTING_RESULT
    options = registry.all_task_options()
    assert learned.isdisjoint(harmless)
    assert set(options) == learned | harmless, "classify the new task option in fingerprint"
    recorded = fingerprint.task_option_settings({name: o.default for name, o in options.items()})
    assert set(recorded) == set(learned)


@pytest.mark.slow
def test_a_recorded_run_holds_its_settings_and_the_data_digest(finetuning_run):
    saved = fingerprint.read_run_settings(str(finetuning_run["root"] / "finetuning_run"))
    assert saved["learning_rate"] == 5e-3 and saved["train_file"] == "train.tsv"
    assert saved["data_dir"] == os.path.realpath(finetuning_run["data_dir"])
    assert saved["training_data"].startswith("sha256:")
    assert "eval_file" not in saved and "progress" not in saved and "eval_every" not in saved


@pytest.mark.parametrize("name", sorted(FINETUNING_LEARNED))
def test_a_finetuning_rerun_that_learns_otherwise_is_refused_naming_it(finetuning_run, name):
    changes = _resolve(FINETUNING_LEARNED[name], finetuning_run)
    job = _prepared(finetuning.FinetuningJob(_finetuning_config(finetuning_run, **changes)))
    _assert_refused_naming(job, NAMED.get(name, name))


@pytest.mark.parametrize("name", sorted(FINETUNING_HARMLESS))
def test_a_finetuning_rerun_with_a_harmless_change_resumes(finetuning_run, name):
    changes = _resolve(FINETUNING_HARMLESS[name], finetuning_run)
    config = _finetuning_config(finetuning_run, **changes)
    assert name not in fingerprint.config_settings(config)
    _prepared(finetuning.FinetuningJob(config)).record_run(write=False)


@pytest.mark.parametrize("name", sorted(TASK_OPTIONS_LEARNED))
def test_a_task_option_that_learns_otherwise_is_refused_naming_it(finetuning_run, name):
    options = {**BASE_OPTIONS, name: TASK_OPTIONS_LEARNED[name]}
    config = _finetuning_config(finetuning_run, task_options=options)
    _assert_refused_naming(_prepared(finetuning.FinetuningJob(config)), name)


@pytest.mark.parametrize("name", sorted(TASK_OPTIONS_HARMLESS))
def test_a_harmless_task_option_resumes(finetuning_run, name):
    options = {**BASE_OPTIONS, name: TASK_OPTIONS_HARMLESS[name]}
    config = _finetuning_config(finetuning_run, task_options=options)
    _prepared(finetuning.FinetuningJob(config)).record_run(write=False)


def test_other_training_content_under_the_same_name_is_refused(files, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(files["data_dir"], data)
    config = _finetuning_config(files, data_dir=str(data), output_dir=str(tmp_path / "run"))
    _prepared(finetuning.FinetuningJob(config)).record_run(write=True)
    (data / "train.tsv").write_text(_rows(16).replace("very", "quite"), encoding="utf-8")
    message = _assert_refused_naming(_prepared(finetuning.FinetuningJob(config)), "training_data")
    assert "learning_rate" not in message


def test_every_difference_is_named_in_the_one_line(finetuning_run):
    config = _finetuning_config(finetuning_run, learning_rate=3e-5, seed=3, train_batch_size=4)
    message = _assert_refused_naming(_prepared(finetuning.FinetuningJob(config)), "seed")
    assert "learning_rate 0.005 -> 3e-05" in message
    assert "train_batch_size 8 -> 4" in message and "seed 0 -> 3" in message


def test_a_directory_of_an_earlier_version_resumes_and_is_recorded(files, tmp_path):
    """Before run_settings.json, task.json was the fingerprint: such a directory is
    checked as before (its task, state, length and casing), then recorded."""
    output_dir = tmp_path / "old_run"
    config = _finetuning_config(files, output_dir=str(output_dir))
    _prepared(finetuning.FinetuningJob(config)).record_run(write=True)
    os.remove(output_dir / fingerprint.RUN_SETTINGS_FILE)
    other = dataclasses.replace(config, learning_rate=3e-5)  # not known to task.json
    _prepared(finetuning.FinetuningJob(other)).record_run(write=True)
    assert fingerprint.read_run_settings(str(output_dir))["learning_rate"] == 3e-5
    os.remove(output_dir / fingerprint.RUN_SETTINGS_FILE)
    longer = dataclasses.replace(config, max_seq_length=24)
    message = _assert_refused_naming(_prepared(finetuning.FinetuningJob(longer)), "max_seq_length")
    assert "task.json" in message
    # A setting recorded later than the directory's own is not compared.
    saved = json.loads((output_dir / "task.json").read_text("utf-8"))
    assert saved["max_seq_length"] == 16


def test_a_setting_the_directory_did_not_record_is_not_compared(files, tmp_path):
    output_dir = tmp_path / "run"
    config = _finetuning_config(files, output_dir=str(output_dir))
    job = _prepared(finetuning.FinetuningJob(config))
    job.record_run(write=True)
    path = output_dir / fingerprint.RUN_SETTINGS_FILE
    recorded = json.loads(path.read_text("utf-8"))
    del recorded["settings"]["learning_rate"]
    path.write_text(json.dumps(recorded), "utf-8")
    other = dataclasses.replace(config, learning_rate=3e-5)
    _prepared(finetuning.FinetuningJob(other)).record_run(write=False)


# === Distillation: its own fields ===

DISTILLATION_LEARNED = {
    "teacher": lambda f: {"teacher": f["teacher_b"]},
    "student": {"student": "bert_tiny_uncased"},
    "student_layers": {"student_layers": "1"},
    "transfer_file": lambda f: {"transfer_file": f["transfer"]},
    "temperature": {"temperature": 3.0},
    "hard_label_weight": {"hard_label_weight": 0.5},
    "soft_target_weight": {"soft_target_weight": 0.5},
    "hidden_state_weight": {"hidden_state_weight": 1.0},
    "attention_weight": {"attention_weight": 1.0},
    "layer_map": {"layer_map": "0:0"},
}
DISTILLATION_HARMLESS = {"cache_teacher_outputs": {"cache_teacher_outputs": True}}


def _save_teacher(files, name):
    """An untrained fine-tuned directory: what `--teacher` reads (no step is needed to
    check a fingerprint)."""
    from keras_bert_zoo.models import BertEncoder
    from keras_bert_zoo.tasks.saving import save_finetuned

    job = _prepared(finetuning.FinetuningJob(_finetuning_config(files)))
    model = job.task.build_model(BertEncoder.from_bert_config(job.source.bert_config))
    directory = str(files["root"] / name)
    save_finetuned(directory, job.task, model, job.tokenizer)
    return directory


@pytest.fixture(scope="module")
def distillation_run(finetuning_run):
    files = dict(finetuning_run)
    files["teacher"] = _save_teacher(files, "teacher")
    files["teacher_b"] = _save_teacher(files, "teacher_b")
    transfer = files["root"] / "transfer.txt"
    transfer.write_text("the film was fun .\nthe film was dull .\n", encoding="utf-8")
    files["transfer"] = str(transfer)
    _prepared(distillation.DistillationJob(_distillation_config(files))).record_run(write=True)
    return files


def _distillation_config(files, **changes):
    config = _finetuning_config(files, output_dir=str(files["root"] / "distillation_run"))
    fields = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    fields.update(task=None, init_checkpoint=None, teacher=files["teacher"])
    return DistillationConfig(**{**fields, **changes})


def test_the_distillation_tables_are_its_own_fields_as_declared(tmp_path):
    own = {field.name for field in dataclasses.fields(DistillationConfig)} - {
        field.name for field in dataclasses.fields(FinetuningConfig)
    }
    assert set(DISTILLATION_LEARNED) | set(DISTILLATION_HARMLESS) == own
    learned = set(settings.result_settings(DistillationConfig))
    assert set(DISTILLATION_LEARNED) == learned & own
    # The names `run_entries` gives the teacher-output cache are data.teacher_outputs'.
    from keras_bert_zoo.data import teacher_outputs

    config = DistillationConfig(output_dir=str(tmp_path), teacher="teacher")
    entries = distillation.DistillationJob(config).run_entries()
    assert {teacher_outputs.RECORDS_FILE, teacher_outputs.META_FILE} <= set(entries)


@pytest.mark.parametrize("name", sorted(DISTILLATION_LEARNED))
def test_a_distillation_rerun_that_learns_otherwise_is_refused_naming_it(distillation_run, name):
    changes = _resolve(DISTILLATION_LEARNED[name], distillation_run)
    job = _prepared(distillation.DistillationJob(_distillation_config(distillation_run, **changes)))
    _assert_refused_naming(job, name)


@pytest.mark.parametrize("name", sorted(DISTILLATION_HARMLESS))
def test_a_distillation_rerun_with_a_harmless_change_resumes(distillation_run, name):
    changes = _resolve(DISTILLATION_HARMLESS[name], distillation_run)
    job = _prepared(distillation.DistillationJob(_distillation_config(distillation_run, **changes)))
    job.record_run(write=False)


# === Pretraining: its own fields, and the training core's through the same code ===

PRETRAINING_LEARNED = {
    "init_checkpoint": lambda f: {"init_checkpoint": f["checkpoint_b"]},
    "vocab_file": lambda f: {"vocab_file": f["other_vocab"]},
    "do_lower_case": {"do_lower_case": False},
    "input_file": lambda f: {"input_file": f["other_corpus"]},
    "input_mode": lambda f: {"input_mode": "records", "input_file": f["records"]},
    "bert_config_file": lambda f: {"bert_config_file": f["bert_config_file"]},
    "preset": {"preset": "bert_tiny_uncased"},
    "max_seq_length": {"max_seq_length": 24},
    "max_predictions_per_seq": {"max_predictions_per_seq": 4},
    "masked_lm_prob": {"masked_lm_prob": 0.2},
    "short_seq_prob": {"short_seq_prob": 0.2},
    "do_whole_word_mask": {"do_whole_word_mask": True},
    "shuffle_buffer": {"shuffle_buffer": 8},
    "num_train_steps": {"num_train_steps": 7},
    "learning_rate": {"learning_rate": 3e-5},
}
PRETRAINING_HARMLESS = {
    "mode": {},  # eval and export record nothing; train is the only training mode
    "eval_input_file": lambda f: {"eval_input_file": f["records"]},
    "eval_steps": {"eval_steps": 0},
    "eval_batch_size": {"eval_batch_size": 4},
    "checkpoint_layouts": {"checkpoint_layouts": ("google",)},
    "progress": {"progress": "log"},
    "checkpoint_every": {"checkpoint_every": 2},
}


def _pretraining_config(files, **changes):
    return PretrainingConfig(
        **{
            "input_mode": "dynamic_text",
            "input_file": files["corpus"],
            "init_checkpoint": files["checkpoint"],
            "output_dir": str(files["root"] / "pretraining_run"),
            "max_seq_length": 32,
            "max_predictions_per_seq": 5,
            "train_batch_size": 8,
            "num_train_steps": 6,
            "shuffle_buffer": 16,
            "progress": "none",
            **changes,
        }
    )


@pytest.fixture(scope="module")
def pretraining_run(files):
    _prepared(pretraining.PretrainingJob(_pretraining_config(files))).record_run(write=True)
    return files


def test_the_pretraining_tables_cover_its_own_fields_as_declared():
    shared = {field.name for field in dataclasses.fields(FinetuningConfig)}
    own = {field.name for field in dataclasses.fields(PretrainingConfig)} - shared
    assert own <= set(PRETRAINING_LEARNED) | set(PRETRAINING_HARMLESS)
    learned = set(settings.result_settings(PretrainingConfig))
    assert set(PRETRAINING_LEARNED) <= learned and not set(PRETRAINING_HARMLESS) & learned
    # The training core is classified once, for every job.
    core = set(settings.result_settings(TrainingOptions))
    assert core <= learned and core <= set(settings.result_settings(FinetuningConfig))


@pytest.mark.parametrize("name", sorted(PRETRAINING_LEARNED))
def test_a_pretraining_rerun_that_learns_otherwise_is_refused_naming_it(pretraining_run, name):
    changes = _resolve(PRETRAINING_LEARNED[name], pretraining_run)
    job = _prepared(pretraining.PretrainingJob(_pretraining_config(pretraining_run, **changes)))
    _assert_refused_naming(job, name)


@pytest.mark.parametrize("name", sorted(PRETRAINING_HARMLESS))
def test_a_pretraining_rerun_with_a_harmless_change_resumes(pretraining_run, name):
    changes = _resolve(PRETRAINING_HARMLESS[name], pretraining_run)
    config = _pretraining_config(pretraining_run, **changes)
    assert name not in fingerprint.config_settings(config)
    _prepared(pretraining.PretrainingJob(config)).record_run(write=False)


def test_a_pretraining_architecture_change_is_named_with_the_settings(pretraining_run):
    changes = {"bert_config_file": pretraining_run["bert_config_file"], "learning_rate": 1e-3}
    job = _prepared(pretraining.PretrainingJob(_pretraining_config(pretraining_run, **changes)))
    message = _assert_refused_naming(job, "intermediate_size")
    assert "learning_rate 5e-05 -> 0.001" in message and "bert_config_file" in message


# === Starting over ===


def test_clear_run_removes_the_run_and_keeps_other_files(tmp_path):
    for name in ("checkpoints/ckpt-00000003", "finetuned", "train", "eval", "predictions"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "file").write_text("x")
    for name in ("eval_results.json", "task.json", "run_settings.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    job = finetuning.FinetuningJob(FinetuningConfig(output_dir=str(tmp_path)))
    removed = run_dir.clear_run(str(tmp_path), job.run_entries())
    assert removed[0] == "checkpoints"
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
    assert run_dir.clear_run(str(tmp_path), job.run_entries()) == []


def test_a_killed_clear_leaves_no_run_that_resumes(tmp_path, monkeypatch):
    """The checkpoints go first, in one rename: a kill after it leaves no checkpoint to
    resume; the dot-named temporary is what the next run removes."""
    from keras_bert_zoo.utils.atomic import remove_stale_temporaries

    (tmp_path / "checkpoints" / "ckpt-00000003").mkdir(parents=True)
    (tmp_path / "finetuned").mkdir()
    (tmp_path / "run_settings.json").write_text("{}")
    renamed = []
    real_replace = os.replace

    def killed_after_the_first(source, target):
        if renamed:
            raise KeyboardInterrupt
        renamed.append(source)
        real_replace(source, target)

    monkeypatch.setattr(run_dir.os, "replace", killed_after_the_first)
    job = finetuning.FinetuningJob(FinetuningConfig(output_dir=str(tmp_path)))
    with pytest.raises(KeyboardInterrupt):
        run_dir.clear_run(str(tmp_path), job.run_entries())
    monkeypatch.undo()
    assert not (tmp_path / "checkpoints").exists() and (tmp_path / "finetuned").exists()
    (left,) = [name for name in os.listdir(tmp_path) if name.startswith(".")]
    assert os.listdir(tmp_path / left) == ["checkpoints"]
    assert remove_stale_temporaries(str(tmp_path)) == [str(tmp_path / left)]


def test_overwrite_output_dir_is_refused_outside_training(tmp_path):
    from keras_bert_zoo.runners.runner import Runner

    config = FinetuningConfig(output_dir=str(tmp_path), mode="eval", overwrite_output_dir=True)
    with pytest.raises(UserError, match="--overwrite_output_dir starts a training run over"):
        Runner(finetuning.FinetuningJob(config)).run()
