"""Loading a checkpoint into a model: a pure plan with structured problems, a formatter for
them, and the all-or-nothing assignment.

`plan_load` matches every weight of the model to a checkpoint tensor through the naming
table (`naming.py`; task heads through their models' `checkpoint_heads`) and checks
every shape, reading no tensor. `format_load_problems` words what it found.
`apply_plan` reads and converts every tensor before it assigns the first variable.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping

from keras_bert_zoo.checkpoints import naming
from keras_bert_zoo.checkpoints._files import TensorSource
from keras_bert_zoo.checkpoints.info import CheckpointInfo
from keras_bert_zoo.checkpoints.naming import CheckpointError, WeightName
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.models import BertEncoder, EncoderHeadModel

logger = logging.getLogger(__name__)


# === Which weights a model has ===


def encoder_of(model) -> BertEncoder:
    if isinstance(model, BertEncoder):
        return model
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, BertEncoder):
        raise TypeError(
            f"{type(model).__name__} is neither a BertEncoder nor a model with a BertEncoder "
            "`encoder` attribute"
        )
    return encoder


def _head_models(cls=EncoderHeadModel):
    for subclass in cls.__subclasses__():
        yield subclass
        yield from _head_models(subclass)


def _known_head_names(fmt: str) -> set[str]:
    """Every head tensor name a checkpoint of `fmt` may hold, used by the model or not."""
    return {
        row.source_name(fmt)
        for model_class in _head_models()
        for head in model_class.checkpoint_heads
        for row in naming.head_weight_names(head)
    }


def checkpoint_heads(model) -> tuple:
    return () if isinstance(model, BertEncoder) else getattr(model, "checkpoint_heads", ())


def model_weights(model, fmt: str, name_overrides: Mapping[str, str] | None = None):
    """`[(WeightName, variable)]` for every weight of `model` the naming table covers.

    The encoder's rows come from the table; a task model's heads from its
    `checkpoint_heads` declaration.

    Returns:
        `(pairs, uncovered)`: the table rows bound to the model's variables, and the
        model's variables that no row covers (custom heads).
    """
    encoder = encoder_of(model)
    rows = naming.encoder_weight_names(encoder.num_layers)
    for head in checkpoint_heads(model):
        rows += naming.head_weight_names(head)
    rows = naming.apply_overrides(rows, fmt, name_overrides)
    pairs = []
    for row in rows:
        owner = encoder if row.owner == "encoder" else model
        pairs.append((row, naming.resolve_attribute(owner, row.attribute)))
    covered = {id(variable) for _, variable in pairs}
    uncovered = [v for v in model.weights if id(v) not in covered]
    return pairs, uncovered


# === Loading: a plan, its problems, then the assignment ===


@dataclasses.dataclass
class LoadReport:
    """What `load_weights` did. Names are checkpoint names as spelled in the file."""

    loaded: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)
    unexpected: list[str] = dataclasses.field(default_factory=list)
    mismatched: list[str] = dataclasses.field(default_factory=list)
    unused_heads: list[str] = dataclasses.field(default_factory=list)
    new_heads: list[str] = dataclasses.field(default_factory=list)
    skipped_bookkeeping: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """One short line for logs: counts, and the names only where they matter (a
        head that starts from random weights, a tensor missing or not matching)."""
        parts = [f"{len(self.loaded)} tensors loaded"]
        for what, names in (
            ("new heads (random weights)", self.new_heads),
            ("heads in the checkpoint not used", self.unused_heads),
            ("missing", self.missing),
            ("mismatched", self.mismatched),
            ("unexpected", self.unexpected),
        ):
            if names:
                shown = ", ".join(names[:3]) + (f", ... ({len(names)})" if len(names) > 3 else "")
                parts.append(f"{what}: {shown}")
        return "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class MissingTensor:
    """A weight of the model that the checkpoint lacks (`shape` as it would be stored)."""

    row: WeightName
    name: str
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class UnexpectedTensor:
    """A checkpoint tensor that no weight of the model takes."""

    name: str
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ShapeMismatch:
    """A checkpoint tensor whose shape is not what the model's weight needs."""

    row: WeightName
    name: str
    checkpoint_shape: tuple[int, ...]
    expected_shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ConfigMismatch:
    """A config field that shapes cannot reveal but that changes the math."""

    field: str
    model_value: object
    checkpoint_value: object


@dataclasses.dataclass
class LoadPlan:
    """What loading a checkpoint into a model would do; made without reading a tensor.

    Attributes:
        info: the checkpoint.
        model_description: how messages name the model.
        assignments: `(row, variable, checkpoint name)` for every weight to load.
        missing, unexpected, mismatched, config_mismatches: the problems.
        new_heads: task heads the checkpoint has none of (kept as initialized).
        unused_heads: head tensors of the checkpoint the model has no head for.
        skipped: optimizer slots, counters and buffers of the checkpoint.
        uncovered: the model's variables outside the naming table.
        layer_hint: a sentence when the checkpoint's layer count differs from the model's.
    """

    info: CheckpointInfo
    model_description: str
    assignments: list[tuple[WeightName, object, str]]
    missing: list[MissingTensor]
    unexpected: list[UnexpectedTensor]
    mismatched: list[ShapeMismatch]
    config_mismatches: list[ConfigMismatch]
    new_heads: list[str]
    unused_heads: list[str]
    skipped: list[str]
    uncovered: list
    layer_hint: str | None


_LAYER_INDEX = re.compile(r"(?:^|[/.])layer[._](\d+)[/.]")


def _layer_hint(source: TensorSource, num_layers: int, config_file: str) -> str | None:
    indices = {int(m.group(1)) for n in source.names if (m := _LAYER_INDEX.search(n))}
    if indices and max(indices) + 1 != num_layers:
        return (
            f"the checkpoint holds encoder layers 0..{max(indices)} ({max(indices) + 1} "
            f"layers) but the model has num_layers={num_layers} (config: {config_file})"
        )
    return None


def _config_mismatches(model, checkpoint_config: BertConfig) -> list[ConfigMismatch]:
    ours = encoder_of(model).bert_config
    return [
        ConfigMismatch(field, getattr(ours, field), getattr(checkpoint_config, field))
        for field in ("hidden_act", "layer_norm_epsilon", "num_heads")
        if getattr(ours, field) != getattr(checkpoint_config, field)
    ]


def plan_load(
    model,
    info: CheckpointInfo,
    source: TensorSource,
    *,
    name_overrides: Mapping[str, str] | None = None,
    model_description: str | None = None,
) -> LoadPlan:
    """Matches every weight of `model` to a tensor of `source` (names and shapes only).

    Pure: reads no tensor and changes no variable. `format_load_problems` words the
    problems it finds; `load_weights` acts on it.
    """
    fmt = info.format
    pairs, uncovered = model_weights(model, fmt, name_overrides)
    assignments, missing, mismatched = [], [], []
    for row, variable in pairs:
        name = row.source_name(fmt)
        expected = naming.source_shape(row.layout, fmt, variable.shape)
        if name not in source:
            missing.append(MissingTensor(row, name, expected))
        elif tuple(source.shape(name)) != expected:
            mismatched.append(
                ShapeMismatch(row, source.display_name(name), tuple(source.shape(name)), expected)
            )
        else:
            assignments.append((row, variable, name))

    # A task head the checkpoint has none of is a fresh head for fine-tuning.
    new_heads = []
    for head in checkpoint_heads(model):
        rows = [row for row, _ in pairs if row.owner == head.attribute]
        absent = [m for m in missing if m.row.owner == head.attribute]
        if not head.required and len(absent) == len(rows):
            new_heads.append(head.attribute)
    missing = [m for m in missing if m.row.owner not in new_heads]

    used = {row.source_name(fmt) for row, _ in pairs}
    known_heads = _known_head_names(fmt)
    unused_heads, unexpected = [], []
    for name in source.names:
        if name in used:
            continue
        if name in known_heads:
            unused_heads.append(source.display_name(name))
        else:
            unexpected.append(UnexpectedTensor(source.display_name(name), source.shape(name)))

    return LoadPlan(
        info=info,
        model_description=model_description or f"{type(model).__name__} {model.name!r}",
        assignments=assignments,
        missing=missing,
        unexpected=unexpected,
        mismatched=mismatched,
        config_mismatches=_config_mismatches(model, info.config),
        new_heads=new_heads,
        unused_heads=unused_heads,
        skipped=list(source.skipped),
        uncovered=uncovered,
        layer_hint=_layer_hint(source, encoder_of(model).num_layers, info.config_file),
    )


def _fmt_shape(shape) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def format_load_problems(plan: LoadPlan) -> str:
    """The plan's problems, one indented section per kind (empty when there are none)."""
    info = plan.info
    missing = [f"{m.name} (-> {m.row.name}, shape {_fmt_shape(m.shape)})" for m in plan.missing]
    unexpected = [f"{u.name} {_fmt_shape(u.shape)}" for u in plan.unexpected]
    mismatched = [
        f"{m.name} (-> {m.row.name}): checkpoint has {_fmt_shape(m.checkpoint_shape)}, "
        f"{plan.model_description} expects {_fmt_shape(m.expected_shape)} "
        f"(config: {info.config_file})"
        for m in plan.mismatched
    ]
    config = [
        f"{c.field}: the model has {c.model_value!r}, {info.config_file} says "
        f"{c.checkpoint_value!r}"
        for c in plan.config_mismatches
    ]
    sections = [
        f"  {title}: {len(lines)}\n" + "\n".join(f"    {line}" for line in lines)
        for title, lines in (
            ("missing from the checkpoint (the model has them)", missing),
            ("unexpected in the checkpoint (the model has no such weight)", unexpected),
            ("shape mismatch", mismatched),
            ("config mismatch", config),
        )
        if lines
    ]
    if plan.layer_hint and (missing or unexpected):
        sections.append(f"  hint: {plan.layer_hint}")
    return "\n".join(sections)


def _describe(plan: LoadPlan) -> str:
    info = plan.info
    return (
        f"checkpoint {info.weights_description} ({info.format} layout, config "
        f"{info.config_file}) into {plan.model_description}"
    )


def apply_plan(
    model,
    info: CheckpointInfo,
    *,
    allow_partial: bool,
    name_overrides: Mapping[str, str] | None,
    model_description: str | None = None,
) -> LoadReport:
    """Plans, refuses (or warns), then reads everything and assigns it: see `load_weights`."""
    source = info.open_tensors()
    plan = plan_load(
        model, info, source, name_overrides=name_overrides, model_description=model_description
    )
    problems = format_load_problems(plan)
    if plan.config_mismatches or (problems and not allow_partial):
        raise CheckpointError(
            f"Cannot load {_describe(plan)}:\n"
            + problems
            + "\nNo variable was changed"
            + ("." if plan.config_mismatches else "; pass allow_partial=True to load the rest.")
        )
    if problems:
        logger.warning("Partial load of %s; skipped:\n%s", _describe(plan), problems)

    # Read and convert everything before the first assignment.
    values, loaded = [], []
    for row, variable, name in plan.assignments:
        array = source.read(name)
        if array.dtype.kind not in "fiu":
            raise CheckpointError(
                f"{source.file(name)}: tensor {source.display_name(name)!r} has dtype "
                f"{array.dtype}, expected a float tensor. No variable was changed."
            )
        values.append(
            (variable, naming.from_source(row.layout, info.format, array, variable.shape))
        )
        loaded.append(source.display_name(name))
    for variable, value in values:
        variable.assign(value)

    _log_what_was_left(plan)
    return LoadReport(
        loaded=loaded,
        missing=[m.name for m in plan.missing],
        unexpected=[u.name for u in plan.unexpected],
        mismatched=[m.name for m in plan.mismatched],
        unused_heads=plan.unused_heads,
        new_heads=plan.new_heads,
        skipped_bookkeeping=plan.skipped,
    )


def _log_what_was_left(plan: LoadPlan) -> None:
    if plan.new_heads:
        logger.warning(
            "%s: no weights for %s in %s; kept their random initialization (train them).",
            plan.model_description,
            plan.new_heads,
            plan.info.weights_description,
        )
    if plan.unused_heads:
        logger.info("Ignored head weights the model does not use: %s", plan.unused_heads)
    if plan.skipped:
        logger.info(
            "Skipped %d optimizer/bookkeeping tensors and buffers (e.g. %s)",
            len(plan.skipped),
            plan.skipped[:3],
        )
    if plan.uncovered:
        logger.warning(
            "%s: variables outside the BERT naming table kept their initialization: %s",
            plan.model_description,
            [v.path for v in plan.uncovered],
        )
