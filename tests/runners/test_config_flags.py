"""Each setting is written once: every flag of `run_finetuning` and `run_pretraining` is
a config field (or a task option), defined from it with its help, and read back into
the same field.

References: the dataclass fields and the `TaskOption` declarations themselves (what the
flags must be generated from), and absl's parser (what a user's command line gives).
"""

import dataclasses
import pathlib
import re
import warnings

import pytest
from absl import flags

from keras_bert_zoo import tasks
from keras_bert_zoo.runners import configs, finetuning, pretraining
from keras_bert_zoo.training.options import TrainingOptions
from keras_bert_zoo.utils import deprecation, settings

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _help(flag) -> str:
    """The help as written: absl prefixes an enum's choices (`<a|b>: `) and says that a
    repeatable flag repeats."""
    written = re.sub(r"^<[^>]*>: ", "", flag.help)
    return re.sub(r";\s+repeat this option to specify a list of values$", "", written)


JOBS = {
    "run_finetuning": (finetuning.define_flags, configs.FinetuningConfig),
    "run_pretraining": (pretraining.define_flags, pretraining.PretrainingConfig),
    "run_distillation": (configs.define_distillation_flags, configs.DistillationConfig),
}
# The fields that are no flag of a job: gathered from other flags, or decided by the
# teacher (distillation).
NOT_FLAGS = {
    "run_finetuning": {"task_options"},
    "run_pretraining": set(),
    "run_distillation": {"task_options", *configs.DISTILLATION_EXCLUDED},
}


@pytest.mark.parametrize("tool", sorted(JOBS))
def test_every_flag_comes_from_a_config_field_with_its_help(tool):
    define_flags, config_class = JOBS[tool]
    flag_values = flags.FlagValues()
    define_flags(flag_values)
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    options = tasks.all_task_options() if tool != "run_pretraining" else {}
    # A renamed flag's old name is an alias of the field's flag, for one release.
    old_names = settings.old_flag_names(config_class)
    assert old_names == {
        "export_formats": "checkpoint_layouts",
        "packed_sequences": "batching",
    }, tool
    defined = set(flag_values) - set(old_names)
    assert defined, tool
    for name in defined:
        flag = flag_values[name]
        if name in options:
            assert _help(flag) == f"[task option] {options[name].help}", name
            assert flag.default == options[name].default, name
            continue
        assert name in fields, f"{tool}: --{name} is no field of {config_class.__name__}"
        help_text = settings.field_metadata(config_class, name)["help"]
        assert help_text and _help(flag) == help_text, name
        default = settings.field_default(config_class, name)
        expected = list(default) if isinstance(default, tuple) else default
        assert flag.default == expected, name
    # Every field is a flag, except the settings gathered from other flags.
    assert set(fields) - defined == NOT_FLAGS[tool]
    # The training core's fields are flags of both jobs, with their help.
    for name in settings.flag_names(TrainingOptions):
        assert _help(flag_values[name]) == settings.field_metadata(TrainingOptions, name)["help"]


def test_a_redeclared_default_keeps_the_base_help_and_the_job_default():
    flag_values = flags.FlagValues()
    finetuning.define_flags(flag_values)
    flag_values(["run_finetuning", "--checkpoint_layouts=google", "--mode=export", "--seed=3"])
    config = finetuning.config_from_flags(flag_values)
    assert config.warmup_proportion == 0.1 != TrainingOptions.warmup_proportion
    assert flag_values["warmup_proportion"].help == (
        "Fraction of the run used for warmup when --num_warmup_steps is unset."
    )
    assert config.checkpoint_layouts == ("google",) and config.mode == "export"
    assert config.seed == 3


def test_a_default_every_job_shares_is_declared_once():
    # The training core's default, not redeclared by a job: google-research/bert's 5e-5.
    for config_class in (
        configs.FinetuningConfig,
        configs.PretrainingConfig,
        configs.DistillationConfig,
    ):
        assert settings.field_default(config_class, "learning_rate") == 5e-5
        assert "learning_rate" not in vars(config_class), config_class.__name__


def test_the_job_binaries_define_no_flag_of_their_own():
    # The tools only call the job's define_flags: no flag is written twice.
    for tool in JOBS:
        source = (ROOT / "tools" / f"{tool}.py").read_text(encoding="utf-8")
        assert "DEFINE_" not in source, tool
    package = ROOT / "keras_bert_zoo"
    defining = sorted(
        str(path.relative_to(ROOT))
        for path in package.rglob("*.py")
        if "flags.DEFINE_" in path.read_text(encoding="utf-8")
        or 'f"DEFINE_' in path.read_text(encoding="utf-8")
    )
    # One "define once" helper defines every flag of the package; tool_flags replays the
    # definitions recorded in tools/flag_definitions.json (kept equal to the tools' by
    # tests/tools/test_tool_start.py) to check a command line before TensorFlow loads.
    assert defining == ["keras_bert_zoo/utils/settings.py", "keras_bert_zoo/utils/tool_flags.py"]


def _page(title: str) -> str:
    """The docs/ page whose `# ` title is `title`."""
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if text.splitlines()[0] == f"# {title}":
            return text
    raise AssertionError(f"no page of docs/ is titled {title!r}")


def _flags_in(section: str, tool: str) -> set[str]:
    """The flags the section's prose names, and those its commands give `tool`."""
    named, inside, commands = set(), False, []
    for line in section.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            named |= set(re.findall(r"(?<![\w-])--([a-z][a-z0-9_]*)", line))
        elif commands and commands[-1].endswith("\\"):
            commands[-1] = commands[-1][:-1] + line
        else:
            commands.append(line)
    for command in commands:
        if f"tools/{tool}.py" in command:
            named |= set(re.findall(r"(?<![\w-])--([a-z][a-z0-9_]*)", command))
    return named - {"help", "helpfull"}


@pytest.mark.parametrize(
    ("tool", "titles"),
    [
        ("run_finetuning", ("Fine-tuning", "Training on several machines")),
        ("run_pretraining", ("Pretraining",)),
        ("run_distillation", ("Distillation",)),
    ],
)
def test_every_flag_the_readme_names_is_a_flag_of_the_job(tool, titles):
    define_flags, _ = JOBS[tool]
    flag_values = flags.FlagValues()
    define_flags(flag_values)
    known = set(flag_values) | {f"no{name}" for name in flag_values}
    for title in titles:
        named = _flags_in(_page(title), tool)
        assert named and named <= known, (title, sorted(named - known))


# === --checkpoint_layouts, formerly --export_formats ===


@pytest.mark.parametrize("tool", sorted(JOBS))
def test_both_spellings_of_checkpoint_layouts_give_the_field(tool, caplog, monkeypatch):
    monkeypatch.setattr(settings, "_warned_old_names", set())
    define_flags, config_class = JOBS[tool]
    read = {
        "run_finetuning": finetuning.config_from_flags,
        "run_pretraining": pretraining.config_from_flags,
        "run_distillation": configs.config_from_distillation_flags,
    }[tool]
    configs_read = {}
    for flag in ("checkpoint_layouts", "export_formats"):
        flag_values = flags.FlagValues()
        define_flags(flag_values)
        flag_values([tool, f"--{flag}=google", f"--{flag}=huggingface"])
        with caplog.at_level("WARNING", logger=settings.__name__):
            caplog.clear()
            configs_read[flag] = read(flag_values)
            settings.flag_values_of(config_class, flag_values)  # read again: no new warning
        lines = [r.getMessage() for r in caplog.records if r.name == settings.__name__]
        if flag == "checkpoint_layouts":
            assert lines == []
        else:
            # One line, once, saying what replaces it and when it goes.
            assert lines == [
                "--export_formats is deprecated: it is --checkpoint_layouts now; the old name "
                f"will be removed in {deprecation.REMOVAL}"
            ]
            assert "\n" not in lines[0] and "next release" in lines[0]
    for config in configs_read.values():
        assert config.checkpoint_layouts == ("google", "huggingface")
    assert "--checkpoint_layouts" in flag_values["export_formats"].help
    assert deprecation.REMOVAL_RELEASE in flag_values["export_formats"].help


def test_the_old_flag_name_given_only_is_what_the_run_was_given():
    flag_values = flags.FlagValues()
    finetuning.define_flags(flag_values)
    flag_values(["run_finetuning", "--export_formats=huggingface", "--seed=3"])
    given = finetuning.explicit_flag_values(flag_values)
    assert given["checkpoint_layouts"] == ("huggingface",) and "export_formats" not in given


def test_the_old_field_name_works_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="export_formats is checkpoint_layouts now"):
        config = configs.FinetuningConfig(export_formats=("google",))
    assert config.checkpoint_layouts == ("google",)
    with pytest.warns(DeprecationWarning, match=deprecation.REMOVAL_DATE):
        assert config.export_formats == ("google",)
    # The new name alone warns of nothing, and replace() knows only the new field.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert configs.PretrainingConfig().checkpoint_layouts == ("google", "huggingface")
        assert dataclasses.replace(config, seed=4).checkpoint_layouts == ("google",)
    assert "export_formats" not in {field.name for field in dataclasses.fields(config)}
    with pytest.raises(TypeError, match="both export_formats= and"):
        configs.FinetuningConfig(export_formats=("google",), checkpoint_layouts=())
