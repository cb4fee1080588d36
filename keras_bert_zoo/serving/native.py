"""The C++ loader program (`cpp/saved_model_run.cc`): build it, run an export with it.

The program loads a SavedModel with `tensorflow::LoadSavedModel`, the loader TF
Serving calls, after loading the op libraries the export's op manifest lists, and
runs a signature on raw strings: what a TF Serving process does, without Python. It
builds against the headers and `libtensorflow_cc.so.2` / `libtensorflow_framework.so.2`
that the tensorflow wheel ships (one `g++` run, about 20 s of CPU).

Example:

```python
from keras_bert_zoo.serving import native, ops

binary = native.compile_runner("/tmp/saved_model_run")
manifest = ops.read_op_manifest("exports/sst2/1")
outputs = native.run_saved_model(
    binary, "exports/sst2/1", {"sentence": ["a gripping film"]},
    op_libraries=ops.library_paths(manifest),
)
print(outputs["label"])  # [b'1']
```
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence

import numpy as np

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpp", "saved_model_run.cc")

_DTYPES = {
    "float": np.float32,
    "double": np.float64,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}


def compile_command(output_path: str, compiler: str = "g++") -> list[str]:
    """The compiler command line that builds the runner against the installed tensorflow."""
    import tensorflow as tf

    library_dir = os.path.dirname(os.path.abspath(tf.__file__))
    return [
        compiler,
        *tf.sysconfig.get_compile_flags(),
        "-O1",
        SOURCE,
        "-o",
        output_path,
        f"-L{library_dir}",
        # With --as-needed the linker drops libtensorflow_cc, and with it the session
        # factory: LoadSavedModel then fails with "No session factory registered".
        "-Wl,--no-as-needed",
        "-l:libtensorflow_cc.so.2",
        "-l:libtensorflow_framework.so.2",
        f"-Wl,-rpath,{library_dir}",
    ]


def compile_runner(output_path: str, compiler: str = "g++", timeout: float = 600) -> str:
    """Builds the runner at `output_path`; raises RuntimeError with the compiler's output."""
    if shutil.which(compiler) is None:
        raise RuntimeError(f"No C++ compiler {compiler!r} on PATH to build {SOURCE}")
    output_path = os.path.abspath(output_path)
    command = compile_command(output_path, compiler)
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(
            f"Building {SOURCE} failed ({' '.join(command)}):\n{result.stderr[-5000:]}"
        )
    return output_path


def _write_inputs(path: str, inputs: Mapping[str, Sequence]) -> None:
    with open(path, "w", encoding="ascii") as f:
        for key, values in inputs.items():
            for value in values:
                data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
                f.write(f"{key}\t{data.hex()}\n")


def parse_output(text: str) -> dict[str, np.ndarray]:
    """The runner's stdout -> `{output key: numpy array}` (strings as bytes objects)."""
    lines = text.splitlines()
    outputs: dict[str, np.ndarray] = {}
    position = 0
    while position < len(lines):
        header = lines[position].split(" ")
        if header[0] != "output":
            raise ValueError(f"Unexpected runner output line {position + 1}: {lines[position]!r}")
        key, dtype, rank = header[1], header[2], int(header[3])
        shape = tuple(int(dim) for dim in header[4 : 4 + rank])
        count = int(np.prod(shape)) if shape else 1
        values = lines[position + 1 : position + 1 + count]
        if len(values) != count:
            raise ValueError(f"Runner output {key}: {len(values)} values for shape {shape}")
        if dtype == "string":
            array = np.array([bytes.fromhex(value) for value in values], dtype=object)
        elif dtype in _DTYPES:
            array = np.array(
                [float(v) if "float" in dtype or dtype == "double" else int(v) for v in values]
            )
            array = array.astype(_DTYPES[dtype])
        else:
            raise ValueError(f"Runner output {key}: unsupported dtype {dtype}")
        outputs[key] = array.reshape(shape)
        position += 1 + count
    return outputs


def run_saved_model(
    binary: str,
    saved_model_dir: str,
    inputs: Mapping[str, Sequence],
    *,
    signature: str = "serving_default",
    op_libraries: Sequence[str] = (),
    timeout: float = 600,
) -> dict[str, np.ndarray]:
    """Runs `signature` of the export in the C++ runner on `{key: [strings or bytes]}`.

    Raises RuntimeError with the runner's stderr (e.g. "Op type not registered") when
    it fails.
    """
    with tempfile.TemporaryDirectory(prefix="saved_model_run_") as directory:
        inputs_path = os.path.join(directory, "inputs.txt")
        _write_inputs(inputs_path, inputs)
        command = [
            binary,
            f"--saved_model={os.path.abspath(saved_model_dir)}",
            f"--signature={signature}",
            f"--inputs={inputs_path}",
            *(f"--op_library={library}" for library in op_libraries),
        ]
        result = subprocess.run(command, capture_output=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(
            f"{os.path.basename(binary)} exited with {result.returncode}:\n"
            + result.stderr.decode("utf-8", errors="replace")[-5000:]
        )
    return parse_output(result.stdout.decode("ascii"))


def list_signatures(binary: str, saved_model_dir: str, op_libraries: Sequence[str] = ()) -> str:
    """The runner's `--list` output: the signatures as the C++ loader sees them."""
    command = [
        binary,
        f"--saved_model={os.path.abspath(saved_model_dir)}",
        "--list",
        *(f"--op_library={library}" for library in op_libraries),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"{os.path.basename(binary)} --list failed:\n{result.stderr[-5000:]}")
    return result.stdout
