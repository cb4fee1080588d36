"""The installed all-MiniLM-L6-v2 as `sentence_embedding` starts from it: its vectors
through the task's predict path (`run_finetuning(mode="predict")` on the raw
checkpoint, the pooling and normalization read from its `modules.json`) equal
sentence-transformers' `encode(..., normalize_embeddings=True)` on real sentences (the
Lee news corpus gensim ships) within 1e-5.
"""

import json
import os
import re

import numpy as np
import pytest

from keras_bert_zoo.checkpoints.installed import resolve_installed_checkpoint
from keras_bert_zoo.runners.finetuning import FinetuningConfig, run_finetuning

MINILM = "all-MiniLM-L6-v2"


def lee_sentences(count: int) -> list[str]:
    """The first `count` sentences of gensim's `lee_background.cor` (news stories no one
    here wrote), each of 5 words or more."""
    import gensim

    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", "lee_background.cor")
    with open(path, encoding="latin-1") as f:
        text = " ".join(f.read().split())
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text)]
    return [s for s in sentences if len(s.split()) >= 5][:count]


@pytest.mark.slow
def test_minilm_vectors_through_the_predict_path_equal_sentence_transformers(tmp_path):
    import sentence_transformers

    directory = resolve_installed_checkpoint(MINILM)
    texts = lee_sentences(40)
    assert len(texts) == 40
    path = tmp_path / "texts.txt"
    path.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    result = run_finetuning(
        FinetuningConfig(
            task="sentence_embedding",
            mode="predict",
            init_checkpoint=MINILM,
            output_dir=str(tmp_path / "out"),
            predict_batch_size=16,
            progress="none",
            task_options={"predict_file": str(path)},
        )
    )
    state = result.task.state()
    assert (state["pooling"], state["normalize"], result.task.max_seq_length) == ("mean", True, 256)
    (found,) = (tmp_path / "out").rglob("embeddings_test.npy")
    vectors = np.load(found)
    records = [json.loads(line) for line in open(found.with_suffix(".jsonl"), encoding="utf-8")]
    assert [record["text"] for record in records] == texts
    reference = sentence_transformers.SentenceTransformer(directory, device="cpu").encode(
        texts, normalize_embeddings=True, batch_size=16, convert_to_numpy=True
    )
    assert vectors.shape == reference.shape == (40, 384)
    np.testing.assert_allclose(vectors, reference, atol=1e-5)
