"""Which BERT checkpoint a path holds: its layout, config, weight files and vocabulary."""

from __future__ import annotations

import dataclasses
import os

from keras_bert_zoo.checkpoints import google, huggingface
from keras_bert_zoo.checkpoints._files import TensorSource
from keras_bert_zoo.checkpoints.installed import resolve_installed_checkpoint
from keras_bert_zoo.checkpoints.naming import GOOGLE, HUGGINGFACE, CheckpointError
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.utils.errors import UserError

_FORMAT_ALIASES = {
    "google": GOOGLE,
    "tf1": GOOGLE,
    "huggingface": HUGGINGFACE,
    "hf": HUGGINGFACE,
}


def normalize_format(fmt) -> str:
    if fmt not in _FORMAT_ALIASES:
        raise UserError(f"format must be 'google' or 'huggingface', got {fmt!r}")
    return _FORMAT_ALIASES[fmt]


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """What a checkpoint directory holds.

    Attributes:
        format: `"google"` or `"huggingface"`.
        path: the path given.
        config: the `BertConfig` read from the config file.
        config_file: path of `bert_config.json` / `config.json`.
        weights_files: the checkpoint prefix (Google) or weight files (Hugging Face).
        vocab_file: path of `vocab.txt`, or None.
    """

    format: str
    path: str
    config: BertConfig
    config_file: str
    weights_files: tuple[str, ...]
    vocab_file: str | None

    def open_tensors(self) -> TensorSource:
        if self.format == GOOGLE:
            return google.GoogleTensorSource(self.weights_files[0])
        return huggingface.HuggingFaceTensorSource(self.weights_files)

    @property
    def weights_description(self) -> str:
        if self.format == GOOGLE:
            return self.weights_files[0] + ".{index,data-*}"
        return ", ".join(self.weights_files)


def detect_format(path) -> str:
    """`"google"` or `"huggingface"`, from the files present at `path`."""
    path = os.fspath(path)
    if huggingface.is_huggingface_checkpoint(path):
        return HUGGINGFACE
    if google.is_google_checkpoint(path):
        return GOOGLE
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise CheckpointError(f"{path}: no such file or directory")
    present = sorted(os.listdir(path)) if os.path.isdir(path) else [os.path.basename(path)]
    raise CheckpointError(
        f"{path}: not a recognised BERT checkpoint. Expected bert_config.json + *.ckpt.index "
        f"(google-research/bert) or config.json + model.safetensors / pytorch_model.bin "
        f"(Hugging Face); found {present}"
    )


def read_checkpoint_info(path, format: str | None = None) -> CheckpointInfo:
    """Finds the config, weights and vocabulary of a checkpoint and reads its config.

    `path` may name a checkpoint an installed package ships (`checkpoints.installed`,
    e.g. `all-MiniLM-L6-v2`)."""
    path = resolve_installed_checkpoint(os.fspath(path))
    fmt = detect_format(path) if format is None else normalize_format(format)
    layout = google if fmt == GOOGLE else huggingface
    files = layout.find_checkpoint(path)
    weights_files = (files.prefix,) if fmt == GOOGLE else files.weights_files
    return CheckpointInfo(
        fmt,
        os.fspath(path),
        layout.read_config(files),
        files.config_file,
        weights_files,
        files.vocab_file,
    )
