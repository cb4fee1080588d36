"""The package's floors, read from the source: which parts of `keras_bert_zoo` import which.

Every module under `keras_bert_zoo/` is parsed (never imported: no TensorFlow, a second
to run) and every import in it counts, wherever it is: module level, inside a function
(the lazy imports that keep tools fast are still knowledge of the module imported), and
`importlib.import_module("keras_bert_zoo....")` with a literal name, and the modules a
deprecated alias forwards to (`utils.deprecation.moved_names(__name__, [...])`).

The rules (README.md, "Architecture"):

- `layers/` and `models/` know nothing of files, flags or tf.data: they import only the
  floors below them (`inputs.py`, `config.py` for `models/`, `layers/`), never `data/`,
  `checkpoints/`, `utils/`, `text/`, the loops or the package root, and not absl.
- `layers/` and `models/` may use two modules of `utils/` that know nothing of files
  either (`GROUND_MODULES`): `utils.errors` (the `UserError` their argument checks
  raise) and `utils.deprecation` (the aliases of their moved names).
- `data/` and `pretraining/` (the input pipelines) are below the loops: no `training/`,
  `tasks/`, `serving/` or `runners/`; `data/` (reading records and text) is below
  `pretraining/` (making them): it never imports `pretraining/`.
- `tasks/` (the task contract and the task families) imports neither `serving/` nor
  `runners/`: exporting and running jobs are above the tasks.
- `training/` (the loop every job shares) imports no task (`tasks/`, `pretraining/`),
  nor `serving/`, nor `runners/`: it never branches on what it trains. Nor does it know
  a model, a checkpoint layout or an input pipeline (`models/`, `checkpoints/`, `data/`):
  the job passes the loss function, the batches' transformation and the initial weights.
  It may save a model for inference (`TRAINING_MODEL_MODULES`: the best export), and
  `trainer.py` not even that. No absl: the binaries define the flags from
  `TrainingOptions`.
- `runners/` (the jobs behind `tools/run_*.py`) is the top floor: nothing in the package
  outside `runners/` imports it (`tools/` may).
- `search/` (embedding a corpus, its index, re-ranking, hard negatives) sits above
  `tasks/` and `serving/` (it embeds with their models and exports) and below
  `runners/`: nothing in the package but `runners/` imports it (`tools/` may).
- `utils/` is the ground floor: it imports nothing of the package but `utils/` itself (a
  helper that needs `models/` or `text/` lives with them).
- `config.py` imports `utils/` and nothing above it: no `models/`, `text/`, `data/`,
  `checkpoints/`, loops or the package root. It validates `hidden_act` and the head
  size with two modules of `layers/` (`CONFIG_LAYERS_MODULES`, which import only
  Keras), named one by one.
- No import cycle: no module of the package reaches itself through the imports of the
  package's modules, lazy ones included.

One exception, listed by name and temporary: the deprecated aliases of the names that
moved to `runners/` (`DEPRECATED_ALIASES`, removed in the next release with the README's
API-changes table) forward to it when an old name is used.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

PACKAGE = "keras_bert_zoo"
ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / PACKAGE
ROOT_AREA = PACKAGE  # `keras_bert_zoo/__init__.py`, the public API above the subpackages

# Modules whose `moved_names` aliases may reach up a floor, for one release.
DEPRECATED_ALIASES = {
    "keras_bert_zoo/tasks/finetuning.py",
    "keras_bert_zoo/tasks/run_outputs.py",
    "keras_bert_zoo/pretraining/run.py",
    "keras_bert_zoo/pretraining/__init__.py",
}

# The modules of `utils/` below every floor, `layers/` and `models/` included: an error
# class and the deprecated-alias helper, pure Python that knows no file, flag or tf.data.
GROUND_MODULES = frozenset({"keras_bert_zoo.utils.errors", "keras_bert_zoo.utils.deprecation"})

# What training/ may use of models/: saving a model without its optimizer (the default
# best export, `training.evaluation`), which knows no model class.
TRAINING_MODEL_MODULES = frozenset({"keras_bert_zoo.models.model_files"})

# The modules of `layers/` that `config.py` validates its fields with.
CONFIG_LAYERS_MODULES = frozenset(
    {"keras_bert_zoo.layers.activations", "keras_bert_zoo.layers.attention"}
)


@dataclasses.dataclass(frozen=True)
class Import:
    path: str  # relative to the repository root
    line: int
    statement: str  # the import as written (normalized by `ast.unparse`)
    target: str  # the dotted module it reaches


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str
    applies_to: frozenset[str] | None  # the areas whose modules it checks; None: every area
    why: str
    allowed: frozenset[str] | None = None  # the only areas it may import (besides its own)
    forbidden: frozenset[str] = frozenset()  # areas it may not import
    forbidden_external: frozenset[str] = frozenset()  # top-level third-party packages
    allowed_modules: frozenset[str] = frozenset()  # modules it may import, by name

    def applies(self, area: str) -> bool:
        return self.applies_to is None or area in self.applies_to

    def breaks(self, area: str, imported: Import) -> bool:
        if imported.target.split(".")[0] == PACKAGE:
            target_area = area_of(imported.target)
            if target_area == area or imported.target in self.allowed_modules:
                return False
            if self.allowed is not None and target_area not in self.allowed:
                return True
            return target_area in self.forbidden
        return imported.target.split(".")[0] in self.forbidden_external


_LOOPS = frozenset({"training", "tasks", "serving", "runners"})
# The floors above `search/`, which alone may import it.
_ABOVE_SEARCH = frozenset({"search", "runners"})


def _package_areas() -> frozenset[str]:
    """Every area of the package: its subpackages, its top-level modules and the root."""
    areas = {ROOT_AREA}
    for path in PACKAGE_DIR.iterdir():
        if path.is_dir() and (path / "__init__.py").is_file():
            areas.add(path.name)
        elif path.suffix == ".py" and path.stem != "__init__":
            areas.add(path.stem)
    return frozenset(areas)


RULES = [
    Rule(
        name="layers",
        applies_to=frozenset({"layers"}),
        allowed=frozenset({"inputs"}),
        forbidden_external=frozenset({"absl"}),
        allowed_modules=GROUND_MODULES,
        why=(
            "layers/ know nothing of files, flags or tf.data: they import only inputs.py "
            "(and GROUND_MODULES)"
        ),
    ),
    Rule(
        name="models",
        applies_to=frozenset({"models"}),
        allowed=frozenset({"inputs", "config", "layers"}),
        forbidden_external=frozenset({"absl"}),
        allowed_modules=GROUND_MODULES,
        why=(
            "models/ know nothing of files, flags or tf.data: they import only inputs.py, "
            "config.py, layers/ and GROUND_MODULES (no data/, checkpoints/, other utils/, "
            "text/, loops or the package root)"
        ),
    ),
    Rule(
        name="input_pipelines",
        applies_to=frozenset({"data", "pretraining"}),
        forbidden=_LOOPS,
        why=(
            "data/ and pretraining/ are the input pipelines, below the loops: no training/, "
            "tasks/, serving/ or runners/ (a pretraining job belongs in runners/)"
        ),
    ),
    Rule(
        name="data_below_pretraining",
        applies_to=frozenset({"data"}),
        forbidden=frozenset({"pretraining"}),
        why=(
            "data/ reads records and text; pretraining/ makes them, on top of data/: data/ "
            "never imports pretraining/ (a reader it needs lives in data/)"
        ),
    ),
    Rule(
        name="tasks",
        applies_to=frozenset({"tasks"}),
        forbidden=frozenset({"serving", "runners"}),
        why=(
            "tasks/ imports neither serving/ nor runners/ (a job that trains and exports "
            "belongs in runners/)"
        ),
    ),
    Rule(
        name="training",
        applies_to=frozenset({"training"}),
        forbidden=frozenset(
            {"tasks", "pretraining", "serving", "runners", "models", "checkpoints", "data"}
        ),
        forbidden_external=frozenset({"absl"}),
        allowed_modules=TRAINING_MODEL_MODULES,
        why=(
            "training/ imports no task (tasks/, pretraining/), nor serving/, nor runners/, "
            "and knows no model, checkpoint layout or input pipeline (models/ but "
            "TRAINING_MODEL_MODULES, checkpoints/, data/: the job passes its loss function "
            "and initial weights), nor absl"
        ),
    ),
    Rule(
        name="utils",
        applies_to=frozenset({"utils"}),
        allowed=frozenset(),
        why=(
            "utils/ is the ground floor: it imports nothing of the package but utils/ itself "
            "(a helper that needs models/ or text/ lives with them)"
        ),
    ),
    Rule(
        name="config",
        applies_to=frozenset({"config"}),
        allowed=frozenset({"utils"}),
        allowed_modules=CONFIG_LAYERS_MODULES,
        why=(
            "config.py imports utils/ and nothing above it (no layers/ beyond "
            "CONFIG_LAYERS_MODULES, no models/, text/, data/, checkpoints/, loops or the "
            "package root)"
        ),
    ),
    Rule(
        name="search_below_runners",
        applies_to=_package_areas() - _ABOVE_SEARCH,
        forbidden=frozenset({"search"}),
        why=(
            "search/ sits above tasks/ and serving/ and below runners/: nothing in the "
            "package but runners/ imports it (and tools/)"
        ),
    ),
    Rule(
        name="runners_on_top",
        applies_to=None,  # runners/ importing runners/ is its own area: allowed
        forbidden=frozenset({"runners"}),
        why="nothing in the package imports runners/ but runners/ itself (and tools/)",
    ),
]


def area_of(module: str) -> str:
    """`keras_bert_zoo.models.packed` -> `models`; `keras_bert_zoo.config` -> `config`;
    `keras_bert_zoo` -> `keras_bert_zoo` (the root package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT_AREA


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module
    # Relative: `from . import x` in `a/b/c.py` is relative to `a.b`.
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: pathlib.Path) -> list[Import]:
    """Every import in the file, at any depth, with the module each one reaches."""
    return imports_in(
        path.read_text(encoding="utf-8"),
        module=_module_name(path),
        is_package=path.name == "__init__.py",
        relative=str(path.relative_to(ROOT)),
    )


def imports_in(source: str, *, module: str, is_package: bool, relative: str) -> list[Import]:
    found = []
    for node in ast.walk(ast.parse(source, filename=relative)):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source_module = _resolve_from(node, module, is_package)
            # `from keras_bert_zoo import serving` reaches the subpackage, while
            # `from keras_bert_zoo import BertConfig` reaches the package root.
            targets = [
                f"{source_module}.{alias.name}"
                if _is_module(f"{source_module}.{alias.name}")
                else source_module
                for alias in node.names
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets = [node.args[0].value]
        elif _called_name(node) == "moved_names":
            targets = [
                constant.value
                for constant in ast.walk(node)
                if isinstance(constant, ast.Constant)
                and isinstance(constant.value, str)
                and constant.value.startswith(PACKAGE + ".")
            ]
        for target in dict.fromkeys(targets):
            found.append(Import(relative, node.lineno, ast.unparse(node), target))
    return sorted(found, key=lambda i: i.line)  # `ast.walk` is breadth first


def _called_name(node) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else None


def _is_alias(imported: Import) -> bool:
    return imported.path in DEPRECATED_ALIASES and imported.statement.startswith("moved_names(")


def _package_modules() -> list[pathlib.Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def _area_of_file(path: pathlib.Path) -> str:
    return area_of(_module_name(path))


@pytest.fixture(scope="module")
def all_imports() -> dict[pathlib.Path, list[Import]]:
    return {path: imports_of(path) for path in _package_modules()}


def test_the_scan_sees_the_imports_it_must(all_imports):
    # Guards against a vacuous pass (a rename, a resolution bug): imports known to exist.
    reached = {
        (_area_of_file(path), area_of(i.target))
        for path, found in all_imports.items()
        for i in found
        if i.target.split(".")[0] == PACKAGE
    }
    assert {("models", "layers"), ("models", "inputs"), ("training", "models")} <= reached
    for area in ("layers", "models", "data", "tasks", "training", "serving", "pretraining"):
        assert (PACKAGE_DIR / area / "__init__.py").is_file(), area


def test_every_import_form_is_seen():
    source = "\n".join(
        [
            "import keras_bert_zoo.runners.finetuning",
            "from keras_bert_zoo import serving, BertConfig",
            "from keras_bert_zoo.serving.export import export_finetuned",
            "from ..data import packing",
            "from . import saving",
            "def f():",
            "    from keras_bert_zoo import training",
            "    return importlib.import_module('keras_bert_zoo.runners')",
        ]
    )
    found = imports_in(
        source, module="keras_bert_zoo.tasks.base", is_package=False, relative="tasks/base.py"
    )
    assert [(i.line, i.target) for i in found] == [
        (1, "keras_bert_zoo.runners.finetuning"),
        (2, "keras_bert_zoo.serving"),
        (2, "keras_bert_zoo"),
        (3, "keras_bert_zoo.serving.export"),
        (4, "keras_bert_zoo.data.packing"),
        (5, "keras_bert_zoo.tasks.saving"),
        (7, "keras_bert_zoo.training"),
        (8, "keras_bert_zoo.runners"),
    ]
    in_package = imports_in(
        "from . import base", module="keras_bert_zoo.tasks", is_package=True, relative="x"
    )
    assert [i.target for i in in_package] == ["keras_bert_zoo.tasks.base"]
    tasks_rule = next(rule for rule in RULES if rule.name == "tasks")
    broken = [i.target for i in found if tasks_rule.breaks("tasks", i)]
    assert broken == [
        "keras_bert_zoo.runners.finetuning",
        "keras_bert_zoo.serving",
        "keras_bert_zoo.serving.export",
        "keras_bert_zoo.runners",
    ]


def test_the_utils_and_config_rules_catch_what_they_must():
    rules = {rule.name: rule for rule in RULES}
    # What utils/model_files.py did before it moved to models/: a lazy import.
    lazy = imports_in(
        "def load():\n    import keras_bert_zoo.models\n",
        module="keras_bert_zoo.utils.model_files",
        is_package=False,
        relative="keras_bert_zoo/utils/model_files.py",
    )
    assert [rules["utils"].breaks("utils", i) for i in lazy] == [True]
    found = imports_in(
        "\n".join(
            [
                "from keras_bert_zoo.utils.atomic import write_json_atomically",
                "from keras_bert_zoo.layers.activations import check_activation",
                "from keras_bert_zoo.layers.heads import ClassificationHead",
                "from keras_bert_zoo.text import BertTokenizer",
                "from keras_bert_zoo.models import BertEncoder",
            ]
        ),
        module="keras_bert_zoo.config",
        is_package=False,
        relative="keras_bert_zoo/config.py",
    )
    assert [i.target for i in found if rules["config"].breaks("config", i)] == [
        "keras_bert_zoo.layers.heads",
        "keras_bert_zoo.text",
        "keras_bert_zoo.models",
    ]


def test_the_training_rule_catches_the_trainer_s_old_edges():
    rules = {rule.name: rule for rule in RULES}
    # What trainer.py did before the job passed its loss function and initial weights.
    found = imports_in(
        "\n".join(
            [
                "from keras_bert_zoo.data import packing",
                "from keras_bert_zoo.models import head_positions, packed",
                "from keras_bert_zoo.models.model_files import save_inference_model",
                "from keras_bert_zoo.utils import interrupts",
                "from absl import flags",
                "def _initialize(model, path):",
                "    from keras_bert_zoo.checkpoints import load_weights",
            ]
        ),
        module="keras_bert_zoo.training.trainer",
        is_package=False,
        relative="keras_bert_zoo/training/trainer.py",
    )
    assert [i.target for i in found if rules["training"].breaks("training", i)] == [
        "keras_bert_zoo.data.packing",
        "keras_bert_zoo.models.head_positions",
        "keras_bert_zoo.models.packed",
        "absl",
        "keras_bert_zoo.checkpoints",
    ]


def test_the_trainer_imports_no_model_checkpoint_or_input_pipeline(all_imports):
    # Stricter than the training rule: not even the model saving its parts may do.
    trainer = PACKAGE_DIR / "training" / "trainer.py"
    reached = {area_of(i.target) for i in all_imports[trainer] if i.target.startswith(PACKAGE)}
    assert "training" in reached  # the scan saw its imports
    assert not reached & {"models", "checkpoints", "data"}, sorted(reached)


def test_the_data_and_ground_rules_catch_what_they_must():
    rules = {rule.name: rule for rule in RULES}
    # The edge data/ had before `verify_pretraining_records` moved down: a lazy import.
    old_edge = imports_in(
        "def diagnose_records():\n"
        "    from keras_bert_zoo.pretraining.writer import verify_pretraining_records\n",
        module="keras_bert_zoo.data.pretraining_records",
        is_package=False,
        relative="keras_bert_zoo/data/pretraining_records.py",
    )
    assert [rules["data_below_pretraining"].breaks("data", i) for i in old_edge] == [True]
    # pretraining/ reading records through data/ is the direction the floors run.
    assert not any(
        rule.breaks("pretraining", i)
        for rule in RULES
        if rule.applies("pretraining")
        for i in imports_in(
            "from keras_bert_zoo.data.pretraining_records import verify_pretraining_records",
            module="keras_bert_zoo.pretraining",
            is_package=True,
            relative="keras_bert_zoo/pretraining/__init__.py",
        )
    )
    # models/ may raise `UserError` and alias its moved names, and use no other utils/.
    found = imports_in(
        "\n".join(
            [
                "from keras_bert_zoo.utils.errors import UserError",
                "from keras_bert_zoo.utils.deprecation import moved_names",
                "from keras_bert_zoo.utils.atomic import atomic_path",
            ]
        ),
        module="keras_bert_zoo.models.sequence_packing.batch",
        is_package=False,
        relative="keras_bert_zoo/models/sequence_packing/batch.py",
    )
    assert [i.target for i in found if rules["models"].breaks("models", i)] == [
        "keras_bert_zoo.utils.atomic"
    ]


def test_the_search_rule_catches_what_it_must():
    rule = next(rule for rule in RULES if rule.name == "search_below_runners")
    assert {"tasks", "serving", "models", "utils", ROOT_AREA} <= rule.applies_to
    assert not rule.applies("search") and not rule.applies("runners")
    for area in ("tasks", "serving"):
        found = imports_in(
            "def f():\n    from keras_bert_zoo.search.index import load_index\n",
            module=f"keras_bert_zoo.{area}.x",
            is_package=False,
            relative=f"keras_bert_zoo/{area}/x.py",
        )
        assert [rule.breaks(area, i) for i in found] == [True]
    # search/ reading the tasks and the exports is the direction the floors run.
    upward = imports_in(
        "from keras_bert_zoo.tasks.saving import load_finetuned\n"
        "from keras_bert_zoo.serving.loading import load_served_model\n",
        module="keras_bert_zoo.search.embedders",
        is_package=False,
        relative="keras_bert_zoo/search/embedders.py",
    )
    assert not any(r.breaks("search", i) for r in RULES if r.applies("search") for i in upward)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_floors(rule, all_imports):
    offending = []
    for path, found in all_imports.items():
        area = _area_of_file(path)
        if not rule.applies(area):
            continue
        offending += [
            f"  {i.path}:{i.line}: {i.statement}"
            for i in found
            if rule.breaks(area, i) and not _is_alias(i)
        ]
    # One line per statement, however many of its names break the rule.
    offending = list(dict.fromkeys(offending))
    assert not offending, f"{rule.why}. Offending imports:\n" + "\n".join(offending)


def test_the_deprecated_aliases_are_the_only_exception_and_reach_runners(all_imports):
    aliases = {i.path: i.target for found in all_imports.values() for i in found if _is_alias(i)}
    assert set(aliases) == DEPRECATED_ALIASES
    assert all(target.startswith(f"{PACKAGE}.runners.") for target in aliases.values())


def import_graph(all_imports) -> dict[str, set[str]]:
    """`{module: the package's modules it imports}`, every import counted (lazy ones
    too) but the forwards of the deprecated aliases. A module's parent packages, which
    Python imports before it, are not edges: every package imports its own modules."""
    graph = {}
    for path, found in all_imports.items():
        module = _module_name(path)
        graph[module] = {
            i.target
            for i in found
            if i.target.split(".")[0] == PACKAGE
            and i.target != module
            and _is_module(i.target)
            and not _is_alias(i)
        }
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles of `graph`, each as the path `[a, b, ..., a]`: one for each edge that closes
    a loop in a depth-first walk, so an empty list means there is none."""
    cycles, done = [], set()
    for root in sorted(graph):
        if root in done:
            continue
        path, on_path = [root], {root}
        stack = [iter(sorted(graph.get(root, ())))]
        while stack:
            target = next(stack[-1], None)
            if target is None:
                stack.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif target in on_path:
                cycles.append(path[path.index(target) :] + [target])
            elif target not in done:
                path.append(target)
                on_path.add(target)
                stack.append(iter(sorted(graph.get(target, ()))))
    return cycles


def test_the_cycle_search_sees_a_lazy_cycle():
    # `base` imports `saving` inside a function only; `saving` imports `base`.
    base = imports_in(
        "def f():\n    from keras_bert_zoo.tasks.saving import task_description\n",
        module="keras_bert_zoo.tasks.base",
        is_package=False,
        relative="keras_bert_zoo/tasks/base.py",
    )
    saving = imports_in(
        "from keras_bert_zoo.tasks.base import Task",
        module="keras_bert_zoo.tasks.saving",
        is_package=False,
        relative="keras_bert_zoo/tasks/saving.py",
    )
    graph = import_graph(
        {
            PACKAGE_DIR / "tasks" / "base.py": base,
            PACKAGE_DIR / "tasks" / "saving.py": saving,
            PACKAGE_DIR / "inputs.py": [],
        }
    )
    assert import_cycles(graph) == [
        ["keras_bert_zoo.tasks.base", "keras_bert_zoo.tasks.saving", "keras_bert_zoo.tasks.base"]
    ]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"b"}}) == []
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == [["b", "c", "b"]]


def test_no_import_cycle(all_imports):
    graph = import_graph(all_imports)
    assert "keras_bert_zoo.tasks.saving" in graph["keras_bert_zoo.runners.finetuning"]
    cycles = import_cycles(graph)
    assert not cycles, "Import cycles (lazy imports count):\n" + "\n".join(
        "  " + " -> ".join(cycle) for cycle in cycles
    )
