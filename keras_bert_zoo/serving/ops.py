"""The ops an exported graph needs beyond core TensorFlow: found, recorded, checked.

A SavedModel that uses a tensorflow-text op loads only where that op is registered:
in Python after `import tensorflow_text`, in C++ (and TF Serving) after the op's
shared library is loaded or linked in. TF Serving builds link one pinned
tensorflow-text, and a graph needing an op that build lacks fails with "Op type not
registered", the most common BERT serving failure. So every export records what it
needs in `assets.extra/custom_ops.json`:

```json
{
  "tensorflow_version": "2.21.0",
  "tensorflow_text_version": "2.21.1",
  "custom_ops": [
    {"op": "FastWordpieceTokenizeWithOffsets", "package": "tensorflow-text",
     "library": "tensorflow_text/python/ops/_fast_wordpiece_tokenizer.so"},
    ...
  ],
  "libraries": ["tensorflow_text/python/ops/_fast_wordpiece_tokenizer.so", ...],
  "core_ops": ["AddV2", ...]
}
```

An op is *core* when `tf.raw_ops` has it (the ops every TensorFlow build, TF Serving
included, registers); it belongs to tensorflow-text when one of the op libraries that
the tensorflow_text package ships registers it (each library's own op list, read from
TensorFlow's loader). Any other op is listed with `"package": null`. Library paths
are relative to the site-packages directory holding `tensorflow_text`, so
`os.path.join(site_packages, library)` is the file to load.

Example:

```python
from keras_bert_zoo.serving import ops

manifest = ops.read_op_manifest("export/sst2/1")
print(ops.format_op_manifest(manifest))
print(ops.check_op_manifest(manifest))  # [] when this process can run the export
```
"""

from __future__ import annotations

import functools
import glob
import json
import os
from typing import Any

import tensorflow as tf

from keras_bert_zoo.utils.atomic import write_json_atomically
from keras_bert_zoo.utils.errors import UserError

EXTRA_DIRECTORY = "assets.extra"
OP_MANIFEST_FILE = "custom_ops.json"
TENSORFLOW_TEXT = "tensorflow-text"


def _saved_model_proto(saved_model_dir: str):
    from tensorflow.core.protobuf import saved_model_pb2

    path = os.path.join(saved_model_dir, "saved_model.pb")
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{saved_model_dir}: no saved_model.pb (not a SavedModel)")
    proto = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(path, "rb") as f:
        proto.ParseFromString(f.read())
    return proto


def graph_op_names(saved_model_dir: str) -> set[str]:
    """Every op type the SavedModel's graphs use: nodes of the graph and of every
    function in its library (calls of library functions by name excluded)."""
    names: set[str] = set()
    for meta_graph in _saved_model_proto(saved_model_dir).meta_graphs:
        library = meta_graph.graph_def.library
        functions = {function.signature.name for function in library.function}
        names.update(node.op for node in meta_graph.graph_def.node)
        for function in library.function:
            names.update(node.op for node in function.node_def)
        names -= functions
    return names


@functools.lru_cache(maxsize=1)
def tensorflow_text_op_libraries() -> dict[str, str]:
    """`{op name: library path relative to site-packages}` for every op library the
    installed tensorflow_text package ships.

    Each library's op list comes from TensorFlow's own loader (`TF_LoadLibrary`
    returns the ops the library registered, also when it was loaded before).
    """
    import tensorflow_text
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    package_dir = os.path.dirname(os.path.abspath(tensorflow_text.__file__))
    site_packages = os.path.dirname(package_dir)
    libraries: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(package_dir, "**", "*.so"), recursive=True)):
        handle = pywrap_tf_session.TF_LoadLibrary(path)
        try:
            op_list = op_def_pb2.OpList()
            op_list.ParseFromString(pywrap_tf_session.TF_GetOpList(handle))
        finally:
            pywrap_tf_session.TF_DeleteLibraryHandle(handle)
        relative = os.path.relpath(path, site_packages).replace(os.sep, "/")
        for op in op_list.op:
            libraries.setdefault(op.name, relative)
    return libraries


def _is_registered(op_name: str) -> bool:
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op_name) is not None


def op_manifest(saved_model_dir: str) -> dict[str, Any]:
    """The manifest (see the module docstring) of the SavedModel in `saved_model_dir`.

    Raises `ValueError` naming any op that no library loaded in this process registers
    (the export could not run here either).
    """
    import tensorflow_text

    names = graph_op_names(saved_model_dir)
    libraries = tensorflow_text_op_libraries()
    unregistered = sorted(
        name for name in names if name not in libraries and not _is_registered(name)
    )
    if unregistered:
        raise UserError(
            f"{saved_model_dir}: the graph uses ops no loaded library registers: {unregistered}"
        )
    custom, core = [], []
    for name in sorted(names):
        if name in libraries:
            custom.append({"op": name, "package": TENSORFLOW_TEXT, "library": libraries[name]})
        elif hasattr(tf.raw_ops, name):
            core.append(name)
        else:
            custom.append({"op": name, "package": None, "library": None})
    needed = sorted({entry["library"] for entry in custom if entry["library"]})
    return {
        "tensorflow_version": tf.__version__,
        # None: the graph needs no tensorflow-text op (a `tokenizer_ops="core"` export).
        "tensorflow_text_version": tensorflow_text.__version__ if needed else None,
        "custom_ops": custom,
        "libraries": needed,
        "core_ops": core,
    }


def manifest_path(saved_model_dir: str) -> str:
    return os.path.join(saved_model_dir, EXTRA_DIRECTORY, OP_MANIFEST_FILE)


def write_op_manifest(saved_model_dir: str) -> dict[str, Any]:
    """Computes the manifest and writes it to `assets.extra/custom_ops.json`."""
    manifest = op_manifest(saved_model_dir)
    write_json_atomically(manifest_path(saved_model_dir), manifest)
    return manifest


def read_op_manifest(saved_model_dir: str) -> dict[str, Any]:
    path = manifest_path(saved_model_dir)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"{saved_model_dir}: no {EXTRA_DIRECTORY}/{OP_MANIFEST_FILE} (not written by "
            "keras_bert_zoo.serving; ops.op_manifest(dir) computes it from the graph)"
        )
    with tf.io.gfile.GFile(path, "r") as f:
        try:
            manifest = json.load(f)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}: not valid JSON ({error})") from error
    for key in ("tensorflow_version", "tensorflow_text_version", "custom_ops", "libraries"):
        if key not in manifest:
            raise UserError(f"{path}: missing field {key!r}")
    return manifest


def library_paths(manifest: dict[str, Any], site_packages: str | None = None) -> list[str]:
    """Absolute paths of the manifest's op libraries in this environment's (or
    `site_packages`') tensorflow_text."""
    if site_packages is None:
        import tensorflow_text

        site_packages = os.path.dirname(os.path.dirname(os.path.abspath(tensorflow_text.__file__)))
    return [os.path.join(site_packages, library) for library in manifest["libraries"]]


def check_op_manifest(manifest: dict[str, Any]) -> list[str]:
    """Problems running an export with this manifest in this process, as sentences:
    custom ops not registered here, and a tensorflow / tensorflow-text version that
    differs from the one the export was saved with. Empty when all is well."""
    problems = []
    missing = sorted(
        entry["op"] for entry in manifest["custom_ops"] if not _is_registered(entry["op"])
    )
    if missing:
        problems.append(
            f"ops not registered in this process: {missing} (load {manifest['libraries']} "
            "or import tensorflow_text)"
        )
    try:
        import tensorflow_text

        text_version = tensorflow_text.__version__
    except ImportError:
        text_version = None
    if manifest["libraries"] and text_version != manifest["tensorflow_text_version"]:
        problems.append(
            f"saved with tensorflow-text {manifest['tensorflow_text_version']}, this process "
            f"has {text_version or 'none'}"
        )
    if tf.__version__ != manifest["tensorflow_version"]:
        problems.append(
            f"saved with tensorflow {manifest['tensorflow_version']}, this process has "
            f"{tf.__version__}"
        )
    return problems


def format_op_manifest(manifest: dict[str, Any]) -> str:
    """Human-readable lines: versions, then each non-core op and its library."""
    text_version = manifest["tensorflow_text_version"]
    lines = [
        f"saved with tensorflow {manifest['tensorflow_version']}, "
        + (f"tensorflow-text {text_version}" if text_version else "tensorflow-text not needed"),
    ]
    custom = manifest["custom_ops"]
    if not custom:
        lines.append("ops outside core TensorFlow: none")
    else:
        lines.append(f"ops outside core TensorFlow ({len(custom)}):")
        for entry in custom:
            origin = (
                f"{entry['package']} {entry['library']}"
                if entry["package"]
                else "unknown library (not core TensorFlow, not tensorflow-text)"
            )
            lines.append(f"  {entry['op']:<36} {origin}")
    if "core_ops" in manifest:
        lines.append(f"core TensorFlow ops: {len(manifest['core_ops'])}")
    return "\n".join(lines)
