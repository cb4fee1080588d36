"""BERT checkpoints: google-research/bert TF1 and Hugging Face layouts, one naming inside.

- `naming.py`: the table of weight names in both layouts and the reshapes between them.
- `google.py`: `bert_model.ckpt.*` + `bert_config.json` (read and write).
- `huggingface.py`: `model.safetensors` / `pytorch_model.bin` + `config.json`.
- `loader.py`: `from_pretrained`, `load_weights`, `save_pretrained`.
"""

from keras_bert_zoo.checkpoints.loader import (
    CheckpointInfo,
    LoadReport,
    checkpoint_tensors,
    convert_checkpoint,
    detect_format,
    from_pretrained,
    load_weights,
    read_checkpoint_info,
    save_pretrained,
)
from keras_bert_zoo.checkpoints.naming import CheckpointError

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "LoadReport",
    "checkpoint_tensors",
    "convert_checkpoint",
    "detect_format",
    "from_pretrained",
    "load_weights",
    "read_checkpoint_info",
    "save_pretrained",
]
