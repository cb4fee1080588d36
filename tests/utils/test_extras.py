"""A use that needs an optional extra says which, in one line, before anything loads
(issue 61): at a tool before TensorFlow, in the API before the model."""

import importlib.metadata
import re
import subprocess
import sys

import child_process
import pytest

from keras_bert_zoo.utils import extras, installation

# A process where these modules are not installed: a finder ahead of every other raises
# ModuleNotFoundError for them (TensorFlow among them, so that a tool which loaded it
# before answering would end in a traceback instead).
_SITECUSTOMIZE = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""


def _without(tmp_path, *modules) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(blocked=set(modules)))
    env = child_process.environment()
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    return env


def _distribution_extras() -> dict[str, set[str]]:
    """{extra: distribution names} of the installed keras_bert_zoo's metadata."""
    found: dict[str, set[str]] = {}
    for requirement in importlib.metadata.requires("keras_bert_zoo"):
        marker = re.search(r"""extra\s*==\s*["']([\w-]+)["']""", requirement)
        if marker:
            name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
            found.setdefault(marker.group(1), set()).add(name.lower().replace("_", "-"))
    return found


def test_the_table_of_extras_is_setup_pys():
    declared = _distribution_extras()
    for extra, packages in extras.EXTRAS.items():
        assert {distribution for distribution, _ in packages} == declared[extra], extra
    for extra in extras.EXTRAS:
        assert extras.missing(extra) == [], extra  # the test extra installs all of them


_TOOL_CASES = {
    "onnx_export": (
        "export_saved_model",
        ["--finetuned_dir=run", "--format=onnx", "--output_dir=out"],
        "--format=onnx",
        "onnx",
        "tf2onnx",
    ),
    "onnx_run": (
        "saved_model_run",
        ["--saved_model=exports/m/model.onnx", "--input=text=a"],
        "--saved_model=exports/m/model.onnx",
        "onnx",
        "onnxruntime",
    ),
    "faiss": (
        "index_corpus",
        ["--model=m", "--corpus_file=c.jsonl", "--output_dir=out", "--index=approximate"],
        "--index=approximate",
        "search",
        "faiss",
    ),
    "beam": (
        "create_pretraining_data",
        ["--engine=beam", "--input_file=a.txt", "--vocab_file=v", "--output_file=out"],
        "--engine=beam",
        "beam",
        "apache_beam",
    ),
}


@pytest.mark.parametrize("case", list(_TOOL_CASES))
def test_a_tool_names_the_missing_extra_in_one_line_before_tensorflow(tmp_path, case):
    tool, arguments, use, extra, blocked = _TOOL_CASES[case]
    distribution = next(d for d, module in extras.EXTRAS[extra] if module == blocked)
    done = subprocess.run(
        [sys.executable, str(child_process.REPO_ROOT / "tools" / f"{tool}.py"), *arguments],
        capture_output=True,
        text=True,
        env=_without(tmp_path, blocked, "tensorflow"),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [
        f"{tool}: error: {use} needs the {extra!r} extra ({distribution} not installed): "
        + installation.install_extra_command(extra)
    ], done.stderr[-3000:]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["site"]  # nothing written


def test_the_api_refuses_an_onnx_export_before_loading_the_model(tmp_path, monkeypatch):
    from keras_bert_zoo import serving

    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # import tf2onnx: ImportError
    with pytest.raises(extras.MissingExtraError) as raised:
        # A directory that does not exist: loading it would fail otherwise.
        serving.export(str(tmp_path / "no_run"), str(tmp_path / "out"), format="onnx")
    assert str(raised.value) == (
        "the ONNX export needs the 'onnx' extra (tf2onnx not installed): "
        + installation.install_extra_command("onnx")
    )
    assert not (tmp_path / "out").exists()


def test_the_approximate_index_names_the_search_extra(monkeypatch):
    from keras_bert_zoo.search import index

    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(
        extras.MissingExtraError, match=r"'search' extra \(faiss-cpu not installed\)"
    ):
        index._faiss()
