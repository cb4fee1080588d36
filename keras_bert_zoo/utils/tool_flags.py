"""The tools' flags, readable before TensorFlow loads: a command line checked at once.

A tool defines its flags from the library (`runners.configs`, the task registry, the
export formats), which imports TensorFlow: 10 to 20 s before absl could say that a flag
is misspelt. `tools/flag_definitions.json` holds every tool's flags (name, kind,
default, help, choices, bounds, required), written from the tools' own definitions:

    python -m keras_bert_zoo.utils.tool_flags --write

(tests/tools/test_tool_start.py keeps the file equal to the definitions). A tool run
as a program (`utils.startup`) rebuilds its flags from the file in a `FlagValues` of
its own, with absl's standard flags, and parses the command line there first: a
misspelt flag, a bad value or a missing required flag ends it in a fraction of a
second with one line, `<tool>: error: <absl's message>`, status 1; `--help` lists the
tool's flags and `--helpfull` absl's standard ones too (not those of the libraries
TensorFlow imports: absl's test flags, the TPU client's), status 0. The values parsed
here choose the CPU kernels (`--onednn`, `--jit_compile`); the tool then parses the
same command line again with its real flags.

A tool whose flags other packages extend (entry points: the export formats) is checked
early only when no such package is installed.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from keras_bert_zoo.utils import suggestions

DEFINITIONS_FILE = "flag_definitions.json"
# The flags every tool has from absl itself (app: --help..., --only_check_args, the
# debugger and profiler; logging: --verbosity, --logtostderr...; flags: --flagfile,
# --undefok); other modules' flags (absl.testing, TensorFlow's TPU client) are not ours.
ABSL_MODULES = ("absl.app", "absl.logging", "absl.flags")
HELP_FLAGS = ("help", "helpshort", "helpfull", "helpxml")
# A tool module's optional attribute: the entry-point groups that add flags to it.
PLUGIN_GROUPS_ATTRIBUTE = "FLAG_PLUGIN_GROUPS"
_ALIAS_HELP = re.compile(r"Alias for --(\w+)\.?$")
_REQUIRED_MESSAGE = "must have a value other than None"


# === Describing the tools' flags (run with the real definitions: TensorFlow loaded) ===


def _kind(flag) -> dict[str, Any]:
    """The absl `DEFINE_<kind>` that makes `flag`, with its keyword arguments."""
    from absl import flags

    parser = flag.parser
    if type(flag).__name__ == "_FlagAlias":
        match = _ALIAS_HELP.search(flag.help or "")
        if match is None:
            raise TypeError(f"--{flag.name}: an alias whose help does not name its flag")
        return {"kind": "alias", "original": match.group(1)}
    if isinstance(flag, flags.MultiFlag):
        if isinstance(parser, flags.EnumParser):
            return {"kind": "multi_enum", "enum_values": list(parser.enum_values)}
        for parser_class, kind in (
            (flags.IntegerParser, "multi_integer"),
            (flags.FloatParser, "multi_float"),
        ):
            if isinstance(parser, parser_class):
                return {"kind": kind, **_bounds(parser)}
        if type(parser) is flags.ArgumentParser:
            return {"kind": "multi_string"}
    elif isinstance(flag, flags.BooleanFlag):
        return {"kind": "bool"}
    elif isinstance(flag, flags.EnumFlag):
        return {
            "kind": "enum",
            "enum_values": list(parser.enum_values),
            "case_sensitive": parser.case_sensitive,
        }
    elif isinstance(parser, flags.IntegerParser):
        return {"kind": "integer", **_bounds(parser)}
    elif isinstance(parser, flags.FloatParser):
        return {"kind": "float", **_bounds(parser)}
    elif isinstance(parser, flags.WhitespaceSeparatedListParser):
        return {"kind": "spaceseplist"}
    elif isinstance(parser, flags.ListParser):
        return {"kind": "list"}
    elif type(parser) is flags.ArgumentParser:
        return {"kind": "string"}
    raise TypeError(
        f"--{flag.name}: no early definition for a {type(flag).__name__} with a "
        f"{type(parser).__name__} (add its kind to utils/tool_flags.py)"
    )


def _bounds(parser) -> dict[str, Any]:
    bounds = {}
    for name in ("lower_bound", "upper_bound"):
        if getattr(parser, name, None) is not None:
            bounds[name] = getattr(parser, name)
    return bounds


_MULTI_HELP = ";\n    repeat this option to specify a list of values"


def _given_help(text: str | None, kind: Mapping[str, Any]) -> str | None:
    """The help the flag was defined with: absl adds `<a|b>: ` before an enum's and a
    line after a repeatable flag's (and adds them again when it is defined anew)."""
    if text and kind["kind"].startswith("multi_"):
        text = text.removesuffix(_MULTI_HELP)
    if text and "enum_values" in kind:
        text = text.removeprefix(f"<{'|'.join(kind['enum_values'])}>: ")
    return text


def _is_required(flag) -> bool:
    return any(_REQUIRED_MESSAGE in str(getattr(v, "message", "")) for v in flag.validators)


def describe(flag_values, names=None) -> list[dict[str, Any]]:
    """The flags `names` of `flag_values` (default: every flag defined outside absl,
    TensorFlow and Keras) as the JSON records `rebuild` defines again, sorted by name."""
    if names is None:
        names = [
            flag.name
            for module, module_flags in flag_values.flags_by_module_dict().items()
            if module.split(".")[0] not in ("absl", "tensorflow", "keras")
            for flag in module_flags
        ]
    records = []
    for name in sorted(set(names)):
        flag = flag_values[name]
        if name != flag.name:  # a short name: described with its flag
            continue
        kind = _kind(flag)
        record = {"name": flag.name, **kind, "help": _given_help(flag.help, kind)}
        if record["kind"] != "alias":
            default = flag.default
            record["default"] = list(default) if isinstance(default, tuple) else default
        if flag.short_name:
            record["short_name"] = flag.short_name
        if _is_required(flag):
            record["required"] = True
        json.dumps(record)  # a default that JSON cannot hold fails here, by name
        records.append(record)
    return records


def describe_tool(path: str) -> dict[str, Any]:
    """The flags `path` (a tool's file) defines, read by importing it in this process;
    its flags are removed from absl's global `FLAGS` afterwards. Flags of absl's,
    TensorFlow's or Keras' own modules that the import defined are not the tool's."""
    from absl import flags

    before = set(flags.FLAGS)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"_keras_bert_zoo_flags_of_{name}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        libraries = {
            flag.name
            for module_name, module_flags in flags.FLAGS.flags_by_module_dict().items()
            if module_name.split(".")[0] in ("absl", "tensorflow", "keras")
            for flag in module_flags
        }
        return {
            "flags": describe(flags.FLAGS, set(flags.FLAGS) - before - libraries),
            "plugin_groups": list(getattr(module, PLUGIN_GROUPS_ATTRIBUTE, ())),
        }
    finally:
        flags.FLAGS.unparse_flags()
        for flag_name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, flag_name)


def describe_tools(tools_dir: str) -> dict[str, Any]:
    """`{tool: describe_tool(...)}` of every tool in `tools_dir` (`[a-z]*.py`)."""
    names = sorted(
        name[:-3] for name in os.listdir(tools_dir) if re.fullmatch(r"[a-z][a-z0-9_]*\.py", name)
    )
    return {name: describe_tool(os.path.join(tools_dir, f"{name}.py")) for name in names}


def definitions_text(tools_dir: str) -> str:
    """The text of `flag_definitions.json` for the tools of `tools_dir`."""
    return json.dumps(describe_tools(tools_dir), indent=1, sort_keys=True) + "\n"


# === Before TensorFlow: the command line against the recorded flags ===


def read_definitions(tools_dir: str) -> dict[str, Any] | None:
    """The recorded definitions beside the tools, or None when the file is missing."""
    try:
        with open(os.path.join(tools_dir, DEFINITIONS_FILE), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


class HelpRequested(Exception):
    """Raised while parsing when `--help`, `--helpshort`, `--helpfull` or `--helpxml`
    is met (absl's own help flags print and exit there too)."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


def _help_flag(name: str, help_text: str, short_name=None):
    from absl import flags

    class HelpFlag(flags.BooleanFlag):
        def parse(self, argument):
            if self.parser.parse(argument):
                raise HelpRequested(self.name)

    return HelpFlag(name, False, help_text, short_name=short_name)


def rebuild(records: Sequence[Mapping[str, Any]], module_name: str):
    """A new `FlagValues` with `records`' flags (under `module_name`), absl's standard
    flags (copies: parsing here leaves absl's global `FLAGS` alone) and the help flags."""
    from absl import app, flags
    from absl import logging as absl_logging  # noqa: F401 (defines --verbosity...)

    app.define_help_flags()
    flag_values = flags.FlagValues()
    by_module = flags.FLAGS.flags_by_module_dict()
    for module in ABSL_MODULES:
        for flag in by_module.get(module, ()):
            if flag.name not in HELP_FLAGS and flag.name not in flag_values:
                flags.DEFINE_flag(copy.deepcopy(flag), flag_values, module_name=module)
    for name, text, short in (
        ("help", "show this help", "?"),
        ("helpshort", "show usage only for this module", None),
        ("helpfull", "show full help", None),
        ("helpxml", "like --helpfull, but generates XML output", None),
    ):
        flags.DEFINE_flag(_help_flag(name, text, short), flag_values, module_name="absl.app")
    aliases = []
    for record in records:
        record = dict(record)
        name, kind = record.pop("name"), record.pop("kind")
        required = record.pop("required", False)
        if kind == "alias":
            aliases.append((name, record["original"], record.get("help")))
            continue
        define = getattr(flags, f"DEFINE_{kind}")
        define(
            name=name,
            default=record.pop("default"),
            help=record.pop("help"),
            flag_values=flag_values,
            module_name=module_name,
            **record,
        )
        if required:
            flags.mark_flag_as_required(name, flag_values=flag_values)
    for name, original, help_text in aliases:
        flags.DEFINE_alias(name, original, flag_values=flag_values, module_name=module_name)
        flag_values[name].help = help_text
    return flag_values


def has_plugins(groups: Sequence[str]) -> bool:
    """Whether an installed package adds to one of these entry-point groups."""
    if not groups:
        return False
    import importlib.metadata

    return any(importlib.metadata.entry_points(group=group) for group in groups)


def help_text(flag_values, module_name: str, usage: str, full: bool) -> str:
    """absl's `--help` / `--helpfull` text: `usage`, then the tool's flags (`--help`),
    or those and absl's standard flags (`--helpfull`)."""
    if full:
        flags_text = flag_values.get_help()
    else:
        flags_text = flag_values.module_help(module_name)
        flags_text += "\n\nTry --helpfull to get a list of all flags."
    return f"{usage.rstrip()}\n\nflags:\n\n{flags_text}\n"


def check_command_line(
    tool: str,
    program: str,
    tools_dir: str,
    argv: Sequence[str],
    usage: str,
    *,
    known_only: bool = False,
):
    """Parses `argv` against `tool`'s recorded flags; returns the parsed `FlagValues`,
    or None when they cannot be checked early (no file, or plugins extend the tool).

    Ends the process on a mistake (`<program>: error: <message>`, status 1) and on a
    help flag (the help on stdout, status 0).
    """
    from absl import flags

    definitions = read_definitions(tools_dir)
    if definitions is None or tool not in definitions:
        return None
    entry = definitions[tool]
    if has_plugins(entry.get("plugin_groups", ())):
        return None
    flag_values = rebuild(entry["flags"], module_name=tool)
    try:
        flag_values(list(argv), known_only=known_only)
    except HelpRequested as requested:
        out = sys.stdout
        if requested.kind == "helpxml":
            flag_values.write_help_in_xml_format(out)
        else:
            full = requested.kind in ("helpfull",)
            out.write(help_text(flag_values, tool, usage, full=full))
        out.flush()
        sys.exit(0)
    except flags.Error as error:
        sys.stdout.flush()
        # One line: absl writes one line a missing required flag.
        message = suggestions.with_suggestion("; ".join(str(error).splitlines()))
        print(f"{program}: error: {message}", file=sys.stderr)
        sys.exit(1)
    return flag_values


def main(argv: Sequence[str]) -> int:
    """`python -m keras_bert_zoo.utils.tool_flags [--write|--check] [tools_dir]`."""
    arguments = [a for a in argv[1:] if not a.startswith("--")]
    tools_dir = arguments[0] if arguments else os.path.join(os.getcwd(), "tools")
    text = definitions_text(tools_dir)
    path = os.path.join(tools_dir, DEFINITIONS_FILE)
    if "--write" in argv:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}")
        return 0
    with open(path, encoding="utf-8") as f:
        same = f.read() == text
    print(f"{path}: {'up to date' if same else 'out of date: run with --write'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
