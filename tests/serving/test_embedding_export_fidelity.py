"""Fidelity (issue 46): the installed all-MiniLM-L6-v2 exported as a
`sentence_embedding`, loaded in a fresh process with TensorFlow only (no
keras_bert_zoo), answers sentence-transformers' own
`SentenceTransformer.encode(..., normalize_embeddings=True)` vectors within 1e-5 on
real movie-review sentences (gensim's `pang_lee_polarity.cor`: text no one here wrote).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import child_process
import numpy as np
import pytest

from keras_bert_zoo import serving
from keras_bert_zoo.checkpoints.installed import INSTALLED_CHECKPOINTS

TOLERANCE = 1e-5
SENTENCES = 30

_CHILD = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf

    request = json.loads(sys.stdin.read())
    loaded = tf.saved_model.load(request["path"])
    answer = loaded.signatures["serving_default"](sentence=tf.constant(request["sentences"]))
    print(json.dumps({
        "signatures": sorted(loaded.signatures),
        "embedding": answer["embedding"].numpy().tolist(),
        "dtype": answer["embedding"].dtype.name,
        "modules": sorted(m for m in sys.modules if m.startswith("keras_bert_zoo")),
    }))
    """
)


def _review_sentences(count: int) -> list[str]:
    import gensim

    path = pathlib.Path(gensim.__file__).parent / "test" / "test_data" / "pang_lee_polarity.cor"
    lines = path.read_text("latin-1").splitlines()
    return [line.split(" ", 1)[1].strip() for line in lines if line.strip()][:count]


@pytest.fixture(scope="module")
def minilm_dir():
    return INSTALLED_CHECKPOINTS["all-MiniLM-L6-v2"].path()


@pytest.fixture(scope="module")
def minilm_export(tmp_path_factory):
    """The installed MiniLM exported by its installed name, its defaults (the length and
    pooling of its sentence-transformers files)."""
    return serving.export(
        serving.PretrainedSource("all-MiniLM-L6-v2"),
        str(tmp_path_factory.mktemp("minilm_export")),
        kind="sentence_embedding",
        model_name="minilm",
        verify=False,  # compared with sentence-transformers in a fresh process below
    )


@pytest.mark.slow
def test_minilm_export_in_a_fresh_process_equals_sentence_transformers(
    minilm_export, minilm_dir, monkeypatch
):
    sentences = _review_sentences(SENTENCES)
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps({"path": minilm_export.path, "sentences": sentences}),
        capture_output=True,
        text=True,
        env=child_process.environment(),
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    child = json.loads(completed.stdout.splitlines()[-1])
    assert child["modules"] == []  # TensorFlow alone answered
    assert child["signatures"] == ["serve_ids", "serving_default"]  # no prompt, no prompted
    assert child["dtype"] == "float32"
    got = np.array(child["embedding"])

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the installed directory only
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(minilm_dir, device="cpu")
    want = reference.encode(sentences, normalize_embeddings=True, convert_to_numpy=True)
    assert got.shape == want.shape == (SENTENCES, 384)
    np.testing.assert_allclose(got, want, atol=TOLERANCE, rtol=0)

    task = minilm_export.description["task"]
    assert task["task_name"] == "sentence_embedder"
    assert (task["pooling"], task["normalize"]) == ("mean", True)
    assert task["max_seq_length"] == reference.max_seq_length == 256
