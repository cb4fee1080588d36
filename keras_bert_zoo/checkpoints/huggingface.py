"""Hugging Face BERT checkpoints: `config.json`, `vocab.txt`, `model.safetensors`.

Reads `model.safetensors` (or sharded `model.safetensors.index.json`) with the
safetensors numpy API, so torch is not needed. `pytorch_model.bin` is read only with
`torch.load(weights_only=True)` when torch is importable. Names are normalized on the
way in: the `bert.` prefix of task models is dropped, old `LayerNorm.gamma/beta` become
`LayerNorm.weight/bias`, the `embeddings.position_ids` buffer and the tied MLM decoder
duplicates are skipped (the duplicates are checked against what they duplicate).

Example:

```python
from keras_bert_zoo.checkpoints import huggingface

files = huggingface.find_checkpoint("all-MiniLM-L6-v2")
source = huggingface.HuggingFaceTensorSource(files.weights_files)
print(source.names[:3])
```
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from keras_bert_zoo.checkpoints._files import TensorSource, copy_vocab
from keras_bert_zoo.checkpoints.naming import (
    HF_BUFFERS,
    HF_TIED_ALIASES,
    CheckpointError,
)
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically
from keras_bert_zoo.utils.errors import UserError

CONFIG_NAME = "config.json"
VOCAB_NAME = "vocab.txt"
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
PYTORCH_NAME = "pytorch_model.bin"
PYTORCH_INDEX_NAME = "pytorch_model.bin.index.json"
PREFIX = "bert."
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


@dataclasses.dataclass(frozen=True)
class HuggingFaceCheckpointFiles:
    """Where the parts of a Hugging Face BERT directory are.

    Attributes:
        directory: the directory.
        weights_files: the weight file(s), shards in index order.
        config_file: path of `config.json`, or None when absent.
        vocab_file: path of `vocab.txt`, or None when absent.
    """

    directory: str
    weights_files: tuple[str, ...]
    config_file: str | None
    vocab_file: str | None


def is_huggingface_checkpoint(path) -> bool:
    path = os.fspath(path)
    if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, CONFIG_NAME)):
        return False
    return any(
        os.path.isfile(os.path.join(path, name))
        for name in (
            SAFETENSORS_NAME,
            SAFETENSORS_INDEX_NAME,
            PYTORCH_NAME,
            PYTORCH_INDEX_NAME,
        )
    )


def _shards(index_file) -> tuple[str, ...]:
    try:
        with open(index_file, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{index_file}: not a valid shard index: {error}") from error
    directory = os.path.dirname(index_file)
    return tuple(os.path.join(directory, name) for name in dict.fromkeys(weight_map.values()))


def find_checkpoint(path) -> HuggingFaceCheckpointFiles:
    """Resolves a Hugging Face model directory (safetensors preferred over .bin)."""
    directory = os.path.abspath(os.fspath(path))
    if not os.path.isdir(directory):
        raise CheckpointError(f"{directory}: not a directory")

    def present(name):
        return os.path.isfile(os.path.join(directory, name))

    if present(SAFETENSORS_NAME):
        weights = (os.path.join(directory, SAFETENSORS_NAME),)
    elif present(SAFETENSORS_INDEX_NAME):
        weights = _shards(os.path.join(directory, SAFETENSORS_INDEX_NAME))
    elif present(PYTORCH_NAME):
        weights = (os.path.join(directory, PYTORCH_NAME),)
    elif present(PYTORCH_INDEX_NAME):
        weights = _shards(os.path.join(directory, PYTORCH_INDEX_NAME))
    else:
        raise CheckpointError(
            f"{directory}: no {SAFETENSORS_NAME}, {SAFETENSORS_INDEX_NAME}, {PYTORCH_NAME} or "
            f"{PYTORCH_INDEX_NAME} (found {sorted(os.listdir(directory))})"
        )
    config_file = os.path.join(directory, CONFIG_NAME)
    vocab_file = os.path.join(directory, VOCAB_NAME)
    return HuggingFaceCheckpointFiles(
        directory=directory,
        weights_files=weights,
        config_file=config_file if os.path.isfile(config_file) else None,
        vocab_file=vocab_file if os.path.isfile(vocab_file) else None,
    )


def read_config(files: HuggingFaceCheckpointFiles) -> BertConfig:
    if files.config_file is None:
        raise CheckpointError(f"{files.directory}: no {CONFIG_NAME}")
    try:
        return BertConfig.from_hf_json(files.config_file)
    except (ValueError, TypeError, OSError) as error:
        raise CheckpointError(f"{files.config_file}: cannot read the config: {error}") from error


def normalize_name(name: str) -> str:
    """A state-dict name in the table's spelling (no `bert.`, LayerNorm weight/bias)."""
    name = name.removeprefix(PREFIX)
    if ".LayerNorm." in name or name.startswith("LayerNorm."):
        if name.endswith(".gamma"):
            name = name[: -len("gamma")] + "weight"
        elif name.endswith(".beta"):
            name = name[: -len("beta")] + "bias"
    return name


def _read_bfloat16(path, header_name) -> np.ndarray:
    """numpy has no bfloat16: reads a BF16 safetensors entry as float32 from the raw bytes."""
    with open(path, "rb") as f:
        header_size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_size))
        entry = header[header_name]
        start, end = entry["data_offsets"]
        f.seek(8 + header_size + start)
        raw = np.frombuffer(f.read(end - start), dtype="<u2")
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def _torch_state_dict(path):
    try:
        import torch
    except ImportError as error:
        raise CheckpointError(
            f"{path}: reading pytorch_model.bin needs torch, which is not installed. Install "
            "torch, or convert the checkpoint to model.safetensors (e.g. with transformers' "
            "save_pretrained(safe_serialization=True))."
        ) from error
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise CheckpointError(
            f"{path}: cannot read the PyTorch checkpoint (corrupted, truncated, or not a "
            f"plain state dict loadable with weights_only=True): {type(error).__name__}: {error}"
        ) from error
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a state dict, got {type(state).__name__}")
    arrays = {}
    for name, tensor in state.items():
        tensor = tensor.detach().cpu()
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        arrays[name] = tensor.numpy()
    return arrays


class HuggingFaceTensorSource(TensorSource):
    """The weights of one Hugging Face BERT checkpoint, under normalized names."""

    def __init__(self, weights_files):
        super().__init__()
        self._original: dict[str, str] = {}  # normalized -> name in the file
        self._torch: dict[str, dict[str, np.ndarray]] = {}
        self._safetensors: dict[str, object] = {}
        for path in weights_files:
            path = os.fspath(path)
            for original, shape in self._open(path):
                name = normalize_name(original)
                if name in HF_BUFFERS:
                    self.skipped.append(original)
                    continue
                if name in self._shapes:
                    raise CheckpointError(
                        f"{path}: {original!r} duplicates {self._original[name]!r} "
                        f"(in {self._files[name]})"
                    )
                self._shapes[name] = shape
                self._files[name] = path
                self._original[name] = original
        self._check_tied_aliases()

    def _open(self, path):
        if not os.path.isfile(path):
            raise CheckpointError(f"{path}: weight file does not exist")
        if path.endswith(".bin"):
            arrays = _torch_state_dict(path)
            self._torch[path] = arrays
            return [(name, tuple(array.shape)) for name, array in arrays.items()]
        from safetensors import safe_open

        try:
            handle = safe_open(path, framework="np")
            entries = [
                (name, tuple(handle.get_slice(name).get_shape()))
                for name in handle.keys()  # noqa: SIM118 - safe_open is not iterable
            ]
        except Exception as error:  # SafetensorError does not derive from a public class
            raise CheckpointError(
                f"{path}: cannot read the safetensors file (corrupted or truncated): "
                f"{type(error).__name__}: {error}"
            ) from error
        self._safetensors[path] = handle
        return entries

    def _check_tied_aliases(self):
        for alias, target in HF_TIED_ALIASES.items():
            if alias not in self._shapes:
                continue
            if target in self._shapes and not np.array_equal(self.read(alias), self.read(target)):
                raise CheckpointError(
                    f"{self._files[alias]}: {self._original[alias]!r} differs from "
                    f"{self.display_name(target)!r}; an untied masked-LM decoder is not supported"
                )
            if target not in self._shapes:
                # Only the duplicate was saved: offer it under the canonical spelling.
                self._shapes[target] = self._shapes.pop(alias)
                self._files[target] = self._files.pop(alias)
                self._original[target] = self._original.pop(alias)
                continue
            self.skipped.append(self._original[alias])
            del self._shapes[alias], self._files[alias]

    def display_name(self, name) -> str:
        return self._original.get(name, name)

    def read(self, name) -> np.ndarray:
        path, original = self._files[name], self._original[name]
        if path in self._torch:
            return self._torch[path][original]
        handle = self._safetensors[path]
        try:
            array = handle.get_tensor(original)
            # With ml_dtypes registered (TensorFlow does it) BF16 comes back as bfloat16.
            return array.astype(np.float32) if array.dtype.name == "bfloat16" else array
        except TypeError:
            if handle.get_slice(original).get_dtype() == "BF16":
                return _read_bfloat16(path, original)
            raise
        except Exception as error:
            raise self._unreadable(name, error) from error


def write_checkpoint(
    path,
    tensors: dict[str, np.ndarray],
    config: BertConfig | None = None,
    vocab_file=None,
    architecture: str = "BertModel",
    extra_config: dict | None = None,
) -> str:
    """Writes a Hugging Face BERT directory atomically.

    Args:
        path: output directory.
        tensors: state-dict name -> array (names exactly as they should appear).
        config: written as `config.json` when given.
        vocab_file: copied as `vocab.txt` when given.
        architecture: the `architectures` entry of `config.json`.
        extra_config: more `config.json` keys (e.g. `num_labels`).

    Returns:
        The path of the written `model.safetensors`.
    """
    from safetensors.numpy import save_file

    if not tensors:
        raise UserError("write_checkpoint: no tensors to write")
    with atomic_directory(path) as temp_dir:
        save_file(
            {name: np.ascontiguousarray(array) for name, array in tensors.items()},
            os.path.join(temp_dir, SAFETENSORS_NAME),
            metadata={"format": "pt"},
        )
        if config is not None:
            data = config.to_hf_dict()
            data["architectures"] = [architecture]
            data.update(extra_config or {})
            write_json_atomically(os.path.join(temp_dir, CONFIG_NAME), data)
        copy_vocab(vocab_file, temp_dir)
    return os.path.join(os.path.abspath(os.fspath(path)), SAFETENSORS_NAME)


# === What transformers reads beside the weights ===


def tokenizer_config(lowercase: bool | None, model_max_length: int) -> dict:
    """`tokenizer_config.json`: what transformers' `BertTokenizer` needs to tokenize as
    ours does (the casing; accents stripped with lower-casing, as BERT's
    `BasicTokenizer`), and the longest input."""
    return {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": bool(lowercase),
        "strip_accents": None,
        "model_max_length": int(model_max_length),
    }


def label_config(label_names, num_classes: int | None, problem_type: str | None) -> dict:
    """`config.json` keys of a classification head: `id2label` / `label2id` when there
    is one name per output (`num_classes`), and the head's `problem_type`
    (`single_label_classification`, `multi_label_classification`, `regression`)."""
    update = {}
    if num_classes and problem_type is not None:
        update["problem_type"] = problem_type
    if not num_classes or not label_names or len(label_names) != int(num_classes):
        return update
    return {
        **update,
        "id2label": {str(i): str(name) for i, name in enumerate(label_names)},
        "label2id": {str(name): i for i, name in enumerate(label_names)},
    }
