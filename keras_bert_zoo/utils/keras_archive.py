"""Whether two `.keras` files hold the same model: the same architecture, assets and
weights, bit for bit, whenever and by whichever process each was saved.

A run compares its `finetuned/` model with its `best/` one before it stores the weights
once (`runners.run_outputs.link_identical_model_files`); the bytes of two saves of one
model differ, so the files are compared by what loading reads.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np

# Two saves of one model differ in a `.keras` archive's metadata.json (the time of the
# save) and in its weights file, where each layer's `vars` group carries the layer's
# Python object name (`dropout_19` in one process's copy, `dropout_24` in another's),
# which loading never reads (it goes by the layer's path). Neither says anything about
# the model, so two saves are compared without them.
_KERAS_SAVE_TIME_MEMBER = "metadata.json"
_KERAS_OBJECT_NAME_ATTRIBUTE = "name"


def _same_hdf5_content(first, second) -> bool:
    """Whether two open HDF5 files hold the same groups, attributes and arrays (bit for
    bit), one dataset in memory at a time."""
    import h5py

    def objects(root):
        found = {}

        def add(name, item):
            found[name] = item  # returns None: visititems stops at anything else

        root.visititems(add)
        return found

    def same_attributes(a, b):
        ignored = {_KERAS_OBJECT_NAME_ATTRIBUTE} if a.name.endswith("/vars") else set()
        keys = sorted(set(a.attrs) - ignored)
        if keys != sorted(set(b.attrs) - ignored):
            return False
        return all(np.array_equal(a.attrs[key], b.attrs[key]) for key in keys)

    first_objects, second_objects = objects(first), objects(second)
    if sorted(first_objects) != sorted(second_objects) or not same_attributes(first, second):
        return False
    for name, a in first_objects.items():
        b = second_objects[name]
        if isinstance(a, h5py.Dataset) != isinstance(b, h5py.Dataset):
            return False
        if not same_attributes(a, b):
            return False
        if isinstance(a, h5py.Dataset):
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if np.asarray(a[()]).tobytes() != np.asarray(b[()]).tobytes():
                return False
    return True


def same_keras_archive(path: str, other: str) -> bool:
    """Whether two `.keras` files hold the same architecture, assets and weights.

    Args:
        path: a `.keras` file.
        other: another.

    Returns:
        True when every member but the save time is the same (the weights compared as
        HDF5 content, without the layers' Python object names); False otherwise.

    Raises:
        zipfile.BadZipFile: a file is not a zip archive.
        OSError: a file cannot be read.
    """
    import h5py

    with zipfile.ZipFile(path) as first, zipfile.ZipFile(other) as second:
        names = sorted(set(first.namelist()) - {_KERAS_SAVE_TIME_MEMBER})
        if names != sorted(set(second.namelist()) - {_KERAS_SAVE_TIME_MEMBER}):
            return False
        for name in names:
            if name.endswith(".h5"):
                # h5py seeks back and forth, and a zip member rereads itself from its
                # start at each backward seek: 7.8 s for MiniLM's 91 MB weights against
                # 0.27 s from memory. The weights are already in memory several times
                # over (the model, its optimizer's slots) when a run compares them.
                a, b = io.BytesIO(first.read(name)), io.BytesIO(second.read(name))
                with h5py.File(a, "r") as a_file, h5py.File(b, "r") as b_file:
                    if not _same_hdf5_content(a_file, b_file):
                        return False
                continue
            with first.open(name) as a, second.open(name) as b:
                while True:
                    chunk = a.read(1 << 20)
                    if chunk != b.read(1 << 20):
                        return False
                    if not chunk:
                        break
    return True
