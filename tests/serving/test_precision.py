"""`precision`: the export computes in bfloat16 when asked (or on native hardware with
`auto`) from weights rounded once. That a bfloat16 export answers like the float32
model within bfloat16's rounding, and says so, is checked for every task family in
test_export.py (`test_every_family_exports_in_bfloat16_answering_as_float32`)."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.serving import precision


@pytest.mark.parametrize(
    ("flags", "gpus", "expected"),
    [
        ({"avx2", "avx512f", "avx512_bf16"}, [], "bfloat16"),
        ({"avx2", "amx_bf16", "amx_tile"}, [], "bfloat16"),
        ({"avx2", "avx512f", "avx512_vnni"}, [], "float32"),
        (set(), [], "float32"),
        (set(), ["GPU:0"], "bfloat16"),
    ],
)
def test_auto_picks_bfloat16_where_it_is_native(flags, gpus, expected):
    assert precision.resolve_precision("auto", flags=flags, gpus=gpus) == expected
    assert precision.resolve_precision("float32", flags=flags, gpus=gpus) == "float32"
    assert precision.resolve_precision("bfloat16", flags=flags, gpus=gpus) == "bfloat16"


def test_cpu_flags_read_proc_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\n", encoding="utf-8")
    assert precision.cpu_flags(str(info)) == {"fpu", "avx2", "avx512_bf16"}
    assert precision.cpu_flags(str(tmp_path / "missing")) == set()
    with pytest.raises(ValueError, match="auto, float32, bfloat16"):
        precision.resolve_precision("fp8")


def _round_to_bfloat16(values):
    """float32 -> the nearest bfloat16 (ties to even), as float32: a numpy restatement."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def test_bfloat16_copy_stores_the_encoder_weights_rounded_once(helpers):
    """The encoder's weights are stored in bfloat16 (no per-call casts of float32
    kernels), each the float32 value rounded to nearest even; the head's final Dense
    stays float32; the caller's model is untouched."""
    task = tasks.create_task("glue/sst2", max_seq_length=24)
    vocabulary = helpers.sentence_fixtures.VOCABULARY
    model = helpers.randomize(task.build_model(helpers.tiny_encoder(len(vocabulary))), 5)
    encoder_paths = {variable.path for variable in model.encoder.weights}
    copy_ = precision.model_in_precision(model, "bfloat16")
    assert copy_ is not model and model.compute_dtype == "float32"
    assert len(copy_.weights) == len(model.weights)
    dtypes = set()
    for original, stored in zip(model.weights, copy_.weights, strict=True):
        value = np.asarray(tf.cast(stored.value, tf.float32))
        if original.path in encoder_paths:
            assert stored.dtype == "bfloat16", original.path
            np.testing.assert_array_equal(value, _round_to_bfloat16(original.numpy()))
        else:
            assert stored.dtype == "float32", original.path
            np.testing.assert_array_equal(value, original.numpy())
        dtypes.add(stored.dtype)
    assert dtypes == {"bfloat16", "float32"}
    assert precision.model_in_precision(model, "float32") is model
