"""The registry of export formats: a new format is one class registered, and the export
tool offers it (`--format`, its options as flags) without knowing it by name.

A toy format, `ReferenceAnswers`, writes the Keras model's flat outputs on the ids of
the warmup texts (the reference every real format is checked against) as `.npz`. It is
registered in-process with `serving.register` and, as another package would, through
an entry point of the group `keras_bert_zoo.serving.formats` (a `.dist-info` on the
child process's path); both export through tools/export_saved_model.py. The refusals
the tool prints come from the exporters (`OptionError`), the same words as the library's
with flags for keywords.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import child_process
import numpy as np
import pytest
from absl import app

from keras_bert_zoo import serving
from keras_bert_zoo.serving import registry, signatures

serving_helpers = child_process.import_by_path(
    "kbz_tests_serving_helpers", pathlib.Path(__file__).resolve().parent / "serving_helpers.py"
)

# The toy format: what a plugin package holds (a file, plus one entry point line).
TOY_FORMAT = textwrap.dedent(
    """
    import os

    import numpy as np

    from keras_bert_zoo import serving


    class ReferenceAnswers(serving.Exporter):
        name = "reference_answers"
        title = "reference answers"
        summary = "the Keras model's outputs on the warmup texts' ids (.npz)"
        kinds = ("task", "encoder", "masked_lm")
        output = serving.OUTPUT_DIR
        options = (serving.OVERWRITE,)

        def export(self, source, output_dir, *, overwrite):
            run = serving.reference_run(source.task, source.model, source.task_preprocessor())
            with serving.publish_directory(output_dir, overwrite=overwrite) as directory:
                np.savez(os.path.join(directory, "ids.npz"), **run.ids)
                np.savez(os.path.join(directory, "outputs.npz"), **run.outputs)
            return output_dir
    """
)


@pytest.fixture(scope="module")
def toy_module(tmp_path_factory):
    """The toy format as a package on disk with its entry point: `(its directory, the
    module imported here)`."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "toy_reference_format.py").write_text(TOY_FORMAT, encoding="utf-8")
    info = root / "toy_reference_format-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toy-reference-format\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\n"
        "reference_answers = toy_reference_format:ReferenceAnswers\n",
        encoding="utf-8",
    )
    module = child_process.import_by_path("toy_reference_format", root / "toy_reference_format.py")
    return root, module


@pytest.fixture
def isolated_registry(monkeypatch):
    """The registry as it is, restored after the test (registrations do not leak)."""
    registry.exporters()  # the built-in formats loaded first
    monkeypatch.setattr(registry, "_EXPORTERS", dict(registry._EXPORTERS))


@pytest.fixture(scope="module")
def finetuned_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetuned")
    _, model, _ = serving_helpers.save_tiny_classifier(root, root / "run", seed=31)
    return str(root / "run"), model


def _assert_reference_of(model, output_dir):
    """The toy export holds the ids of the warmup texts and the model's outputs on them."""
    with np.load(os.path.join(output_dir, "ids.npz")) as ids:
        ids = dict(ids)
    with np.load(os.path.join(output_dir, "outputs.npz")) as outputs:
        outputs = dict(outputs)
    assert len(ids["input_word_ids"]) == len(serving.DEFAULT_WARMUP_TEXTS)
    expected = signatures.flatten_outputs(model(ids, training=False))
    assert sorted(outputs) == sorted(expected) == ["logits"]
    np.testing.assert_allclose(outputs["logits"], expected["logits"], atol=1e-6)


def test_the_built_in_formats_and_how_a_format_and_kind_pick_an_exporter():
    assert serving.formats()[:3] == ("saved_model", "litert", "onnx")
    names = [exporter.name for exporter in serving.exporters()]
    assert names[:4] == ["saved_model", "hub_pair", "litert", "onnx"]
    assert serving.exporter_for("saved_model").name == "saved_model"
    assert serving.exporter_for("saved_model", "hub_encoder_pair").name == "hub_pair"
    assert serving.exporter_for("hub_pair").name == "hub_pair"
    with pytest.raises(serving.OptionError) as raised:
        serving.exporter_for("litert", "hub_encoder_pair")
    assert str(raised.value) == "kind=hub_encoder_pair has no format=litert export"
    assert raised.value.as_flags() == "--kind=hub_encoder_pair has no --format=litert export"
    with pytest.raises(serving.OptionError, match="format=coreml: no such export format"):
        serving.exporter_for("coreml")


def test_refusals_name_the_options_and_the_formats_that_take_them():
    source = serving.FinetunedSource("unused")

    def refusal(format, given, kind="task", **values):
        exporter = serving.exporter_for(format, kind)
        values.setdefault(exporter.output.name, "out")
        with pytest.raises(serving.OptionError) as raised:
            registry.check_options(exporter, given, values, kind=kind, source=source)
        return raised.value.as_flags()

    assert refusal("onnx", ["raw_text"]) == "--raw_text goes with --format=litert (ONNX takes ids)"
    assert refusal("litert", ["export_base", "model_name"]) == (
        "--export_base, --model_name: SavedModel options, not for LiteRT exports"
    )
    assert refusal("saved_model", ["quantize"]) == (
        "--quantize: LiteRT / ONNX options, not for SavedModel exports"
    )
    assert refusal("litert", [], output_dir=None) == "LiteRT exports need --output_dir"
    pretrained = serving.PretrainedSource("unused")
    exporter = serving.exporter_for("saved_model", "encoder")
    values = {"export_base": "b", "model_name": None}
    with pytest.raises(serving.OptionError) as raised:
        registry.check_options(exporter, [], values, kind="encoder", source=pretrained)
    assert raised.value.as_flags() == "--kind=encoder needs --model_name"


def test_a_name_or_an_option_registered_twice_differently_is_refused(isolated_registry, toy_module):
    _, module = toy_module
    serving.register(module.ReferenceAnswers)
    serving.register(module.ReferenceAnswers)  # the same class again: nothing changes

    class Impostor(module.ReferenceAnswers):
        pass

    with pytest.raises(ValueError, match="both have that name"):
        serving.register(Impostor)

    class OwnOverwrite(module.ReferenceAnswers):
        name = "other_answers"
        options = (serving.Option("overwrite", True, "Always."),)

    with pytest.raises(ValueError, match="option 'overwrite' differs"):
        serving.register(OwnOverwrite)


def test_a_format_registered_in_process_exports_through_the_tool(
    isolated_registry, toy_module, finetuned_dir, load_tool, tmp_path, capsys
):
    _, module = toy_module
    serving.register(module.ReferenceAnswers)
    directory, model = finetuned_dir
    with load_tool("export_saved_model") as tool:
        flags = tool.flags.FLAGS
        try:
            flags(["tool", f"--finetuned_dir={directory}", "--format=reference_answers"])
            with pytest.raises(app.UsageError, match="^reference answers exports need --output"):
                tool.main(["tool"])
            flags.unparse_flags()
            flags(
                [
                    "tool",
                    f"--finetuned_dir={directory}",
                    "--format=reference_answers",
                    f"--output_dir={tmp_path / 'toy'}",
                ]
            )
            tool.main(["tool"])
        finally:
            flags.unparse_flags()
    assert capsys.readouterr().out == f"exported reference answers to {tmp_path / 'toy'}\n"
    _assert_reference_of(model, tmp_path / "toy")
    # And in Python: the same exporter through `serving.export`.
    serving.export(directory, str(tmp_path / "python"), format="reference_answers")
    _assert_reference_of(model, tmp_path / "python")


@pytest.mark.slow
def test_a_plugin_format_is_found_through_its_entry_point(toy_module, finetuned_dir, tmp_path):
    """Another package's format, declared as an entry point: the tool, run as a user
    runs it, lists it and exports with it, and refuses the flags it does not take."""
    plugin_dir, _ = toy_module
    directory, model = finetuned_dir
    env = child_process.environment()
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), env["PYTHONPATH"]])

    def tool(*args):
        return subprocess.run(
            [sys.executable, "tools/export_saved_model.py", f"--finetuned_dir={directory}", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=child_process.REPO_ROOT,
            timeout=300,
        )

    exported = tool("--format=reference_answers", f"--output_dir={tmp_path / 'toy'}")
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert exported.stdout == f"exported reference answers to {tmp_path / 'toy'}\n"
    _assert_reference_of(model, tmp_path / "toy")
    refused = tool("--format=reference_answers", "--output_dir=x", "--quantize=dynamic_int8")
    # One line, as any mistake in the input (absl printed the flags' help before it).
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused
    assert "--format: <saved_model|litert|onnx|reference_answers>" not in refused.stderr
    assert refused.stderr.splitlines()[-1] == (
        "export_saved_model: error: --quantize: LiteRT / ONNX options, not for reference "
        "answers exports"
    )
    assert not (child_process.REPO_ROOT / "x").exists()


OLD_EXPORT_NAMES = {
    "keras_bert_zoo.serving": [
        "export_saved_model",
        "export_finetuned",
        "export_pretrained",
        "export_hub_encoder_pair",
        "export_pretrained_hub_pair",
        "export_litert",
        "export_finetuned_litert",
        "export_pretrained_litert",
        "export_onnx",
        "export_finetuned_onnx",
        "export_pretrained_onnx",
    ],
    "keras_bert_zoo.serving.export": ["export_saved_model", "serving_preprocessor"],
    "keras_bert_zoo.serving.litert": ["export_litert", "convert"],
    "keras_bert_zoo.serving.onnx_export": ["export_onnx", "convert"],
    "keras_bert_zoo.serving.hub": ["export_hub_encoder_pair", "is_hub_pair"],
    "keras_bert_zoo.serving.portable": ["load_portable_model", "export_finetuned_with"],
}


@pytest.mark.parametrize("module_name", sorted(OLD_EXPORT_NAMES))
def test_the_old_names_keep_working_for_a_release_with_a_warning(module_name):
    import importlib

    module = importlib.import_module(module_name)
    for name in OLD_EXPORT_NAMES[module_name]:
        with pytest.warns(DeprecationWarning, match=f"{module_name}.{name} moved to"):
            assert callable(getattr(module, name))
    # The old module path of the SavedModel export is the package's `export` too: it
    # calls the function, with its refusals.
    with pytest.raises(serving.OptionError, match="raw_text goes with format=litert"):
        serving.export("nowhere", "out", format="onnx", raw_text=True)
