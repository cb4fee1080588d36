"""Renamed settings keep their old names for one release (`utils.deprecation`,
`utils.settings.setting(..., old_names=...)`), every warning dated by `REMOVAL`.

References: a toy dataclass of the test's own, and absl's parser.
"""

import dataclasses
import logging
import warnings
from typing import ClassVar

import pytest
from absl import flags

from keras_bert_zoo.utils import deprecation, settings


@dataclasses.dataclass
class Options(metaclass=deprecation.RenamedFields):
    RENAMED_FIELDS: ClassVar = {"old_layouts": "layouts"}
    layouts: tuple[str, ...] = settings.setting(
        (), help="Layouts.", choices=("a", "b"), old_names=("old_layouts",)
    )
    steps: int = settings.setting(1, help="Steps.")


def test_the_old_field_name_warns_and_reaches_the_new_one():
    with pytest.warns(DeprecationWarning, match=r"Options\.old_layouts is layouts now") as w:
        options = Options(old_layouts=("a",))
    assert options.layouts == ("a",) and deprecation.REMOVAL in str(w[0].message)
    with pytest.warns(DeprecationWarning):
        options.old_layouts = ("b",)
    assert options.layouts == ("b",)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert dataclasses.replace(options, steps=2) == Options(layouts=("b",), steps=2)
        assert [field.name for field in dataclasses.fields(Options)] == ["layouts", "steps"]


def test_the_old_flag_name_is_an_alias_that_warns_once_in_one_line(caplog, monkeypatch):
    monkeypatch.setattr(settings, "_warned_old_names", set())
    flag_values = flags.FlagValues()
    settings.define_flags(Options, flag_values)
    assert settings.old_flag_names(Options) == {"old_layouts": "layouts"}
    flag_values(["tool", "--old_layouts=b", "--steps=3"])
    with caplog.at_level(logging.WARNING, logger=settings.__name__):
        assert settings.flag_values_of(Options, flag_values) == {"layouts": ("b",), "steps": 3}
        settings.flag_values_of(Options, flag_values, given_only=True)
    assert [record.getMessage() for record in caplog.records] == [
        f"--old_layouts is deprecated: it is --layouts now; the old name will be removed in "
        f"{deprecation.REMOVAL}"
    ]


def test_the_removal_names_the_next_release_and_a_date():
    assert deprecation.REMOVAL.startswith("the next release (")
    assert deprecation.REMOVAL_RELEASE in deprecation.REMOVAL
    assert deprecation.REMOVAL_DATE in deprecation.REMOVAL
