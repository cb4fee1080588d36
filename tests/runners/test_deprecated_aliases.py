"""The names users called before the runners moved keep working for one release, with a
`DeprecationWarning` naming the new home (the README's API-changes table)."""

import importlib

import pytest

ALIASES = [
    ("keras_bert_zoo.tasks.finetuning", "run_finetuning", "keras_bert_zoo.runners.finetuning"),
    ("keras_bert_zoo.tasks.finetuning", "FinetuningConfig", "keras_bert_zoo.runners.finetuning"),
    ("keras_bert_zoo.tasks.finetuning", "define_flags", "keras_bert_zoo.runners.finetuning"),
    ("keras_bert_zoo.tasks.finetuning", "run_demo", "keras_bert_zoo.runners.demo"),
    ("keras_bert_zoo.tasks.finetuning", "demo_config", "keras_bert_zoo.runners.demo"),
    ("keras_bert_zoo.pretraining.run", "run_pretraining", "keras_bert_zoo.runners.pretraining"),
    ("keras_bert_zoo.pretraining.run", "PretrainingConfig", "keras_bert_zoo.runners.pretraining"),
    ("keras_bert_zoo.pretraining", "run_pretraining", "keras_bert_zoo.runners.pretraining"),
    ("keras_bert_zoo.pretraining", "PretrainingResult", "keras_bert_zoo.runners.pretraining"),
    ("keras_bert_zoo.tasks.entity_metrics", "entities", "keras_bert_zoo.tasks.tagging.metrics"),
    ("keras_bert_zoo.runners.finetuning", "json_safe", "keras_bert_zoo.utils.atomic"),
    (
        "keras_bert_zoo.runners.finetuning",
        "remove_stale_temporaries",
        "keras_bert_zoo.utils.atomic",
    ),
    ("keras_bert_zoo.runners.finetuning", "make_tokenizer", "keras_bert_zoo.runners.sources"),
    ("keras_bert_zoo.runners.finetuning", "save_run_model", "keras_bert_zoo.runners.run_outputs"),
    ("keras_bert_zoo.runners.finetuning", "eval_record", "keras_bert_zoo.runners.run_outputs"),
    (
        "keras_bert_zoo.runners.finetuning",
        "huggingface_label_config",
        "keras_bert_zoo.runners.run_outputs",
    ),
    ("keras_bert_zoo.tasks.run_outputs", "save_run_model", "keras_bert_zoo.runners.run_outputs"),
    ("keras_bert_zoo.tasks.run_outputs", "create_task", "keras_bert_zoo.runners.run_outputs"),
    (
        "keras_bert_zoo.tasks.run_outputs",
        "link_identical_model_files",
        "keras_bert_zoo.runners.run_outputs",
    ),
    ("keras_bert_zoo.tasks.base", "Task", "keras_bert_zoo.tasks.task"),
    ("keras_bert_zoo.tasks.base", "TaskOption", "keras_bert_zoo.tasks.task"),
    ("keras_bert_zoo.tasks.base", "Servable", "keras_bert_zoo.tasks.servable"),
    ("keras_bert_zoo.tasks.base", "SERVING_API_ANSWERS", "keras_bert_zoo.tasks.servable"),
    ("keras_bert_zoo.tasks.base", "SOFT_CLASSES", "keras_bert_zoo.tasks.distillation"),
    ("keras_bert_zoo.tasks.base", "TRANSFER_EXAMPLE_ID", "keras_bert_zoo.tasks.distillation"),
    ("keras_bert_zoo.tasks.base", "register_task", "keras_bert_zoo.tasks.registry"),
    ("keras_bert_zoo.tasks.base", "all_task_options", "keras_bert_zoo.tasks.registry"),
    ("keras_bert_zoo.tasks.base", "training_dataset_fn", "keras_bert_zoo.tasks.datasets"),
    ("keras_bert_zoo.tasks.base", "predict", "keras_bert_zoo.tasks.prediction"),
    ("keras_bert_zoo.tasks.base", "outputs_by_batch", "keras_bert_zoo.tasks.prediction"),
]


@pytest.mark.parametrize(("old_module", "name", "new_module"), ALIASES)
def test_old_names_warn_and_are_the_new_objects(old_module, name, new_module):
    old = importlib.import_module(old_module)
    with pytest.warns(DeprecationWarning, match=f"{name} moved to {new_module}"):
        value = getattr(old, name)
    assert value is getattr(importlib.import_module(new_module), name)


def test_renamed_and_unknown_names():
    from keras_bert_zoo.pretraining import run
    from keras_bert_zoo.runners import sources

    with pytest.warns(DeprecationWarning, match="is_pretraining_run_dir"):
        assert run.is_run_dir is sources.is_pretraining_run_dir
    from keras_bert_zoo.runners import finetuning as finetuning_runner
    from keras_bert_zoo.runners import run_outputs

    with pytest.warns(DeprecationWarning, match="runners.run_outputs.export_task_checkpoint"):
        assert finetuning_runner.export_checkpoint is run_outputs.export_task_checkpoint
    from keras_bert_zoo.tasks import finetuning

    with pytest.raises(AttributeError, match="no_such_name"):
        finetuning.no_such_name  # noqa: B018


# Names with one meaning each (issue 44): sequence packing in its own package, the
# records' full scan where records are read, checkpoint layouts named as such.
# (old module, old name, new module, new name)
RENAMED = [
    ("keras_bert_zoo.models.packing", "pack_batch", "keras_bert_zoo.models.sequence_packing.batch"),
    (
        "keras_bert_zoo.models.packing",
        "PACKED_ROW_KEYS",
        "keras_bert_zoo.models.sequence_packing.batch",
    ),
    (
        "keras_bert_zoo.models.packed",
        "packed_outputs",
        "keras_bert_zoo.models.sequence_packing.forward",
    ),
    (
        "keras_bert_zoo.models.packed",
        "packed_loss_fn",
        "keras_bert_zoo.models.sequence_packing.forward",
    ),
    (
        "keras_bert_zoo.models.packed",
        "check_supported",
        "keras_bert_zoo.models.sequence_packing.forward",
    ),
    ("keras_bert_zoo.data.packing", "packed_dataset_fn", "keras_bert_zoo.data.sequence_packing"),
    ("keras_bert_zoo.data.packing", "packed_dataset", "keras_bert_zoo.data.sequence_packing"),
    ("keras_bert_zoo.data.packing", "pack_batch", "keras_bert_zoo.data.sequence_packing"),
    (
        "keras_bert_zoo.data.packing",
        "SEQUENCE_IDS",
        "keras_bert_zoo.models.sequence_packing.batch",
    ),
    (
        "keras_bert_zoo.pretraining.writer",
        "verify_pretraining_records",
        "keras_bert_zoo.data.pretraining_records",
    ),
]
RENAMED = [(old, name, new, name) for old, name, new in RENAMED] + [
    (
        "keras_bert_zoo.utils.run_layout",
        "EXPORT_FORMATS",
        "keras_bert_zoo.utils.run_layout",
        "CHECKPOINT_LAYOUTS",
    ),
    (
        "keras_bert_zoo.runners.run_dir",
        "EXPORT_FORMATS",
        "keras_bert_zoo.utils.run_layout",
        "CHECKPOINT_LAYOUTS",
    ),
    (
        "keras_bert_zoo.runners.finetuning",
        "EXPORT_FORMATS",
        "keras_bert_zoo.utils.run_layout",
        "CHECKPOINT_LAYOUTS",
    ),
    (
        "keras_bert_zoo.runners.pretraining",
        "EXPORT_FORMATS",
        "keras_bert_zoo.utils.run_layout",
        "CHECKPOINT_LAYOUTS",
    ),
    (
        "keras_bert_zoo.runners.run_dir",
        "check_export_formats",
        "keras_bert_zoo.runners.run_dir",
        "check_checkpoint_layouts",
    ),
]


@pytest.mark.parametrize(("old_module", "name", "new_module", "new_name"), RENAMED)
def test_renamed_names_warn_with_their_removal_and_are_the_new_objects(
    old_module, name, new_module, new_name
):
    from keras_bert_zoo.utils.deprecation import REMOVAL

    old = importlib.import_module(old_module)
    with pytest.warns(DeprecationWarning, match=f"{name} moved to {new_module}.{new_name}") as w:
        value = getattr(old, name)
    assert REMOVAL in str(w[0].message) and "next release" in REMOVAL
    assert value is getattr(importlib.import_module(new_module), new_name)


def test_the_removal_is_dated_for_the_release_after_this_one():
    import pathlib
    import re

    from keras_bert_zoo.utils import deprecation

    # The version as setup.py reads it (keras_bert_zoo/version.py), read here as text.
    version_file = pathlib.Path(__file__).resolve().parents[2] / "keras_bert_zoo" / "version.py"
    version = re.search(
        r'__version__ = "(\d+)\.(\d+)\.\d+"', version_file.read_text(encoding="utf-8")
    )
    assert deprecation.REMOVAL_RELEASE == f"{version[1]}.{int(version[2]) + 1}.0"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", deprecation.REMOVAL_DATE)


def test_save_run_model_takes_export_formats_as_checkpoint_layouts(tmp_path, monkeypatch):
    import os

    from keras_bert_zoo.runners import run_outputs
    from keras_bert_zoo.utils.run_layout import FINETUNED_DIR

    monkeypatch.setattr(run_outputs, "save_finetuned", lambda *args: None)
    arguments = dict(task=None, model=None, tokenizer=None, step=None, eval_results=None)
    with pytest.warns(DeprecationWarning, match=r"export_formats=\) is checkpoint_layouts="):
        exports = run_outputs.save_run_model(str(tmp_path), **arguments, export_formats=())
    assert exports == {"keras": os.path.join(str(tmp_path), FINETUNED_DIR)}
    with pytest.raises(TypeError, match="both"):
        run_outputs.save_run_model(
            str(tmp_path), **arguments, export_formats=(), checkpoint_layouts=()
        )
