"""Deprecated module path: the SavedModel export moved to `formats/saved_model.py`, the
pieces every format shares to `common.py`, padding-free serving to `padding_free.py`,
`signature_schema` to `signatures.py`, and `export_saved_model`, `export_finetuned`,
`export_pretrained` became `serving.export` (`registry.py`; the old functions in
`deprecated.py`). The old names keep working for one release, with a
`DeprecationWarning`.

`keras_bert_zoo.serving.export` is also the name of the package's `export` function:
importing this module rebinds the package's attribute to it, so for this release the
module is callable and calls that function.
"""

import inspect
import sys
import types
import warnings

from keras_bert_zoo.serving.registry import export as _export
from keras_bert_zoo.utils.deprecation import moved_names

_moved = moved_names(
    __name__,
    [
        "keras_bert_zoo.serving.layout",
        "keras_bert_zoo.serving.common",
        "keras_bert_zoo.serving.padding_free",
        "keras_bert_zoo.serving.signatures",
        "keras_bert_zoo.serving.formats.saved_model",
        "keras_bert_zoo.serving.deprecated",
    ],
    renamed={"EXPORT_DESCRIPTION_FILE": ("keras_bert_zoo.serving.common", "DESCRIPTION_FILE")},
)


def __getattr__(name: str):
    # Deprecated before the move: the list of classes became a capability each class
    # declares; the tuple is derived from the declarations when asked for.
    if name == "PADDING_FREE_MODELS":
        from keras_bert_zoo.models.head_model import head_models_with
        from keras_bert_zoo.serving.padding_free import PADDING_FREE_CAPABILITY

        warnings.warn(
            "keras_bert_zoo.serving.export.PADDING_FREE_MODELS is deprecated: read a "
            "model's supports_padding_free_inference; it will be removed in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return head_models_with(PADDING_FREE_CAPABILITY)
    return _moved(name)


class _CallableModule(types.ModuleType):
    """This module, callable as `serving.export` (see the module docstring)."""

    __signature__ = inspect.signature(_export)

    def __call__(self, *args, **kwargs):
        return _export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
