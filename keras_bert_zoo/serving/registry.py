"""The export formats by name, and `export`, the one entry point over them.

The registry holds one `exporter.Exporter` per format: the built-in ones listed in
`formats/__init__.py` (one line each), then those other packages declare as entry
points of the group `keras_bert_zoo.serving.formats` (`name = "module:ExporterClass"`
in their packaging metadata), then any `register`ed at run time. `export` resolves the
source once (`sources.py`), picks the exporter of the format and kind, refuses the
options it does not take, and builds. `tools/export_saved_model.py` makes its flags of
the options gathered here (`flag_options`) and knows no format by name.

Example:

```python
from keras_bert_zoo import serving

serving.export("runs/sst2/best", "exports")  # exports/glue_sst2/<next version>/
serving.export("runs/sst2/best", "exports/sst2_onnx", format="onnx")
serving.export(
    serving.PretrainedSource("uncased_L-12_H-768_A-12"),
    "hub/bert",
    kind="hub_encoder_pair",
)
```
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from keras_bert_zoo.serving import sources
from keras_bert_zoo.serving.exporter import Exporter, Option, OptionError
from keras_bert_zoo.utils import extras
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "keras_bert_zoo.serving.formats"
DEFAULT_FORMAT = "saved_model"

_EXPORTERS: dict[str, Exporter] = {}
_loading = False
_loaded = False


def _load(spec: str):
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _load_formats() -> None:
    """Registers the built-in formats, then the entry points' (once)."""
    global _loading, _loaded
    if _loaded or _loading:
        return
    from keras_bert_zoo.serving.formats import EXPORTERS

    _loading = True
    try:
        for spec in EXPORTERS:
            register(_load(spec))
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            register(entry.load())
        _loaded = True
    finally:
        _loading = False


def register(exporter_class: type[Exporter]) -> type[Exporter]:
    """Adds an export format (also a class decorator); registering the same class
    again changes nothing.

    Raises:
        ValueError: another format has its name, or an option of its name that is not
            the same `Option`.
    """
    _load_formats()
    if not (isinstance(exporter_class, type) and issubclass(exporter_class, Exporter)):
        raise TypeError(f"register takes an Exporter subclass, got {exporter_class!r}")
    registered = _EXPORTERS.get(exporter_class.name)
    if registered is not None:
        if type(registered) is exporter_class:
            return exporter_class
        raise ValueError(
            f"export format {exporter_class.name!r}: {exporter_class.__qualname__} and "
            f"{type(registered).__qualname__} both have that name"
        )
    known = {option.name: option for option in _all_options()}
    for option in (exporter_class.output, *exporter_class.options):
        if option.name in known and known[option.name] != option:
            raise ValueError(
                f"export format {exporter_class.name!r}: its option {option.name!r} differs "
                "from the one of the same name another format takes (share the Option)"
            )
    _EXPORTERS[exporter_class.name] = exporter_class()
    return exporter_class


def exporters() -> tuple[Exporter, ...]:
    """Every registered exporter, in registration order (the built-in ones first)."""
    _load_formats()
    return tuple(_EXPORTERS.values())


def formats() -> tuple[str, ...]:
    """The `--format` values, each once, in registration order."""
    return tuple(dict.fromkeys(exporter.format for exporter in exporters()))


def exporter_for(format: str = DEFAULT_FORMAT, kind: str | None = None) -> Exporter:
    """The exporter of `format` (a format or an exporter's name) that exports `kind`
    (None: the one named `format`, else the first of that format).

    Raises:
        OptionError: no such format, or none of its exporters exports `kind`.
    """
    candidates = [e for e in exporters() if format in (e.name, e.format)]
    if not candidates:
        raise OptionError(
            f"{{format}}={format}: no such export format (known: {', '.join(formats())})"
        )
    candidates.sort(key=lambda e: e.name != format)  # the one of that name first
    for exporter in candidates:
        if kind is None or kind in exporter.kinds:
            return exporter
    raise OptionError(f"{{kind}}={kind} has no {{format}}={format} export")


def _all_options() -> list[Option]:
    return [
        option
        for exporter in _EXPORTERS.values()
        for option in (exporter.output, *exporter.options)
    ]


def flag_options() -> tuple[Option, ...]:
    """Every option of a registered exporter that is a flag, once each, in
    registration order: the flags `tools/export_saved_model.py` defines."""
    _load_formats()
    unique = {option.name: option for option in reversed(_all_options()) if option.flag}
    return tuple(reversed(unique.values()))


def check_options(
    exporter: Exporter,
    given: Iterable[str],
    values: Mapping[str, Any],
    *,
    kind: str | None,
    source,
) -> None:
    """Refuses, in one line (`OptionError`), what `exporter` cannot export before
    anything loads: an option it does not take (naming the formats that do), a
    missing output, and the values its `check` refuses.

    Args:
        exporter: the chosen exporter.
        given: the names of the options the caller gave (flags given on the command
            line; keywords passed to `export`).
        values: the value of each of the exporter's options, its output's included.
        kind: the kind asked for.
        source: the source, not loaded yet.
    """
    takes = exporter.option_names()
    foreign = [name for name in given if name not in takes]
    for name in foreign:
        if name in exporter.refusals:
            raise OptionError(exporter.refusals[name])
    if foreign:
        owners = [e.title for e in exporters() if set(foreign) & set(e.option_names())]
        whose = f"{' / '.join(dict.fromkeys(owners))} options" if owners else "unknown options"
        named = ", ".join(f"{{{name}}}" for name in foreign)
        raise OptionError(f"{named}: {whose}, not for {exporter.title} exports")
    if values.get(exporter.output.name) is None:
        raise OptionError(f"{exporter.title} exports need {{{exporter.output.name}}}")
    if exporter.extra is not None:
        extras.require(exporter.extra, f"the {exporter.title} export")
    exporter.check(values, kind=kind, source=source)


def export(
    source, output: str, *, format: str = DEFAULT_FORMAT, kind: str | None = None, **options
):
    """Exports `source` in `format` to `output`.

    Args:
        source: a `sources.FinetunedSource`, `PretrainedSource` or `ModelSource`, or
            a fine-tuned directory or `tasks.FinetunedModel` (a `FinetunedSource`).
        output: str. Where the export goes: the TF Serving base directory of a
            SavedModel (it writes `output/MODEL_NAME/VERSION`), the directory of the
            others (the exporter's `output` option says which).
        format: str. A registered format (`formats()`: `saved_model`, `litert`,
            `onnx`, ...) or an exporter's name (`hub_pair`).
        kind: str. What to export of the source (`sources.KINDS`): default the
            source's own (`task` for a fine-tuned model, `encoder` for a checkpoint).
        **options: the exporter's options (`exporter_for(format, kind).options`; the
            others keep their defaults).

    Returns:
        The exporter's record of the export (`ExportedModel`, `PortableExport`,
        `HubPairExport`, ...).

    Raises:
        OptionError: an option the format does not take, a kind it does not export.
        FileExistsError: the export exists and `overwrite` is false.
    """
    source = sources.as_source(source)
    kind = kind or source.default_kind
    sources.check_kind(source, kind)
    exporter = exporter_for(format, kind)
    values = {option.name: option.default for option in exporter.options}
    values.update(options)
    check_options(
        exporter, options, {**values, exporter.output.name: output}, kind=kind, source=source
    )
    where = getattr(source, "checkpoint_dir", None) or getattr(source, "finetuned", None)
    if isinstance(where, str | os.PathLike):  # a directory to read (not a model in memory)
        with stage(logger, "Loading %s (%s)", os.fspath(where), kind):
            loaded = source.load(kind)
    else:
        loaded = source.load(kind)
    with stage(logger, "Exporting %s as %s", kind, exporter.title, every=0):
        return exporter.export(loaded, output, **values)
