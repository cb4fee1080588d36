"""What an export format is: an `Exporter`, the `Option`s it takes, and its refusals.

An exporter builds one format from a loaded `sources.ModelSource` and verifies it
before the export appears (`formats/`: `saved_model`, `hub_pair`, `litert`, `onnx`).
It knows nothing of flags or of the other formats: it declares the kinds of model it
exports, where it writes (`output`) and its other options, each an `Option` with its
default and help, from which `tools/export_saved_model.py` defines its flags
(`registry.py` gathers them). A refusal that needs no model (an option of another
format, a missing output) is an `OptionError`, one line.

Example, a format in a few lines (registered with `registry.register`, or by a line in
`formats/__init__.py`, or by a package's `keras_bert_zoo.serving.formats` entry point):

```python
import json, os
from keras_bert_zoo import serving

class ReferenceAnswers(serving.Exporter):
    name = "reference_answers"
    title = "reference answers"
    summary = "the Keras model's answers to the warmup texts, as JSON"
    kinds = ("task", "encoder", "masked_lm")
    output = serving.OUTPUT_DIR
    options = (serving.OVERWRITE,)

    def export(self, source, output, *, overwrite):
        reference = serving.reference_run(source.task, source.model, source.preprocessor)
        with serving.publish_directory(output, overwrite=overwrite) as directory:
            with open(os.path.join(directory, "answers.json"), "w") as f:
                json.dump({k: v.tolist() for k, v in reference.outputs.items()}, f)
        return output
```
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from keras_bert_zoo.utils.errors import UserError

_NAMED = re.compile(r"\{(\w+)\}")


class OptionError(UserError):
    """Options an export refuses, in one line, before anything loads.

    The message names options as `{name}` in `template`: `str()` writes them as the
    keywords of `serving.export` (`raw_text`), `as_flags()` as the tool's flags
    (`--raw_text`), so both say the same thing in their own words.

    Args:
        template: str. The message, each option name in braces.
    """

    def __init__(self, template: str):
        self.template = template
        super().__init__(self.spelled(lambda name: name))

    def spelled(self, spell: Callable[[str], str]) -> str:
        """The message with each `{name}` written as `spell(name)`."""
        return _NAMED.sub(lambda match: spell(match.group(1)), self.template)

    def as_flags(self) -> str:
        """The message with the options written as flags (`--name`)."""
        return self.spelled(lambda name: f"--{name}")


@dataclasses.dataclass(frozen=True)
class Option:
    """One keyword option of an export, and the flag the export tool makes of it.

    Attributes:
        name: str. The keyword of `serving.export` and the flag's name.
        default: its value when not given (the flag's default too).
        help: str. The flag's help.
        type: the flag's type: `str`, `int`, `bool` or `list` (of strings).
        choices: tuple of str, or None. The values it takes (an enum flag).
        flag: bool. Whether the tool has a flag for it (False for Python values such as
            a dict of warmup texts).
    """

    name: str
    default: Any
    help: str
    type: type = str
    choices: tuple[str, ...] | None = None
    flag: bool = True


class Exporter:
    """One export format: builds an export of a loaded source and verifies it before it
    appears. Stateless: the registry makes one instance of each class.

    A subclass sets the class attributes and implements `export` (and `report`, what
    the tool prints); `check` adds refusals that need no model.

    Attributes:
        name: str. The registry's key: `serving.export(..., format=name)`.
        format: str. The `--format` it answers to (default `name`). Exporters may share
            one, told apart by their `kinds`: the TF Hub pair is `--format=saved_model
            --kind=hub_encoder_pair`.
        title: str. What it writes, in messages (`"LiteRT"`).
        summary: str. One line of the `--format` help.
        kinds: tuple of str. The kinds of model it exports (`sources.KINDS`).
        output: Option. Where it writes: the second argument of `serving.export`.
        options: tuple of Option. Its other options (keywords of `export`).
        refusals: `{option name: OptionError template}`: why it refuses an option of
            another format, when the general "not for" message would not say.
        extra: str or None. The package extra it needs (`utils.extras`), checked
            before the model loads.
    """

    name: ClassVar[str]
    format: ClassVar[str | None] = None
    title: ClassVar[str]
    summary: ClassVar[str] = ""
    kinds: ClassVar[tuple[str, ...]]
    output: ClassVar[Option]
    options: ClassVar[tuple[Option, ...]] = ()
    refusals: ClassVar[Mapping[str, str]] = {}
    extra: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.format is None and "name" in cls.__dict__:
            cls.format = cls.name

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """The names of everything it takes: its output, then its options."""
        return (cls.output.name, *(option.name for option in cls.options))

    def check(self, values: Mapping[str, Any], *, kind: str | None, source) -> None:
        """Raises `OptionError` for option values it refuses whatever the model (the
        registry has checked the names). Default: none.

        Args:
            values: every option's value, the output's included.
            kind: the kind of model asked for (None: the source's own).
            source: the source, not loaded yet (`sources.py`).
        """

    def export(self, source, output: str, **options) -> Any:
        """Writes the export of `source` (a `sources.ModelSource`) to `output`, verified.

        Args:
            source: the loaded model, its task (servable) and tokenizer.
            output: str. Where it writes (what `self.output` names).
            **options: every option of `self.options` (defaults filled in).

        Returns:
            What was written (the format's own record of it).
        """
        raise NotImplementedError(f"{type(self).__name__}.export")

    def report(self, result) -> str:
        """What `tools/export_saved_model.py` prints of `result`."""
        return f"exported {self.title} to {result}"
