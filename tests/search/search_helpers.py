"""What the search tests share: a tiny vocabulary, a tiny random checkpoint directory
(`vocab.txt` + the encoder's weights: what `open_embedder` reads as a plain BERT,
mean-pooled and normalised) and the vectors restated in numpy from its encoder."""

from __future__ import annotations

import pathlib

import numpy as np

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + (
    "the a cat dog kitten sat slept on mat sofa ran far away stock market fell shares "
    "dropped news guitar music played stage river bank money water query passage :"
).split()
SEQUENCE_LENGTH = 16


def tiny_encoder(seed: int):
    """bert_tiny's shape (2 layers of 128) over `VOCABULARY`, with seeded weights large
    enough that different texts get clearly different vectors."""
    from keras_bert_zoo import BertConfig
    from keras_bert_zoo.models import BertEncoder

    config = BertConfig.from_preset("bert_tiny_uncased").replace(vocab_size=len(VOCABULARY))
    encoder = BertEncoder.from_bert_config(config)
    rng = np.random.default_rng(seed)
    for variable in encoder.weights:
        value = 0.3 * rng.standard_normal(tuple(variable.shape)) + ("gamma" in variable.path)
        variable.assign(value.astype("float32"))
    return encoder


def write_checkpoint(directory: pathlib.Path, seed: int = 5):
    """A plain BERT checkpoint directory (Hugging Face layout, `vocab.txt`); returns
    `(path, encoder)`."""
    from keras_bert_zoo.checkpoints import save_pretrained

    directory.mkdir(parents=True, exist_ok=True)
    vocab_file = directory.parent / f"{directory.name}_vocab.txt"
    vocab_file.write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    encoder = tiny_encoder(seed)
    save_pretrained(encoder, str(directory), format="huggingface", vocab_file=str(vocab_file))
    return str(directory), encoder


def mean_pooled_unit_vectors(encoder, texts, sequence_length: int = SEQUENCE_LENGTH):
    """float64 vectors of `texts`, one text at a time: the encoder on its real tokens
    alone (no padding), their mean, L2-normalised."""
    import tensorflow as tf

    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

    preprocessor = BertPreprocessor(
        BertTokenizer(VOCABULARY, lowercase=True), sequence_length=sequence_length
    )
    vectors = []
    for text in texts:
        packed = {k: v.numpy() for k, v in preprocessor(tf.constant([text])).items()}
        length = int(packed["input_mask"].sum())
        real = {k: v[:, :length] for k, v in packed.items()}
        tokens = encoder(real, training=False)["sequence_output"].numpy()[0].astype(np.float64)
        mean = tokens.mean(axis=0)
        vectors.append(mean / np.linalg.norm(mean))
    return np.stack(vectors)


def save_pair_classifier(root: pathlib.Path, directory: pathlib.Path, seed: int = 3):
    """A two-text `text_classification` task (labels 0 and 1) over `VOCABULARY`, a
    tiny model of random weights, saved as a fine-tuned directory at `directory`.
    Returns `(task, model, tokenizer)`."""
    from keras_bert_zoo import tasks
    from keras_bert_zoo.text import BertTokenizer

    data_dir = root / f"{directory.name}_data"
    data_dir.mkdir(parents=True)
    rows = ["text\ttext_pair\tlabel", "the cat\ta kitten\t1", "the cat\tstock market\t0"]
    (data_dir / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = tasks.create_task(
        "text_classification",
        data_dir=str(data_dir),
        max_seq_length=SEQUENCE_LENGTH * 2,
        text_pair_column="text_pair",
    )
    task.read("train")
    model = task.build_model(tiny_encoder(seed))
    rng = np.random.default_rng(seed)
    for variable in model.weights:  # the head too: scores that differ pair by pair
        if "seed_generator" not in variable.path:
            value = 0.3 * rng.standard_normal(tuple(variable.shape)) + ("gamma" in variable.path)
            variable.assign(value.astype(variable.dtype))
    tokenizer = BertTokenizer(VOCABULARY, lowercase=True)
    tasks.save_finetuned(str(directory), task, model, tokenizer)
    return task, model, tokenizer


def unit_rows(x):
    """Rows scaled to norm 1."""
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute_force_negatives(anchors, candidates, positive_scores, excluded, settings):
    """The mining rules restated: every candidate scored in float64 and sorted (ties in
    candidate order), the excluded dropped, then `skip_top`, `max_score` and `margin`
    applied in turn; a row's first `num_negatives`, or None when fewer are left."""
    cosines = unit_rows(anchors).astype(np.float64) @ unit_rows(candidates).astype(np.float64).T
    mined = []
    for row, scores in enumerate(cosines):
        ranked = [c for c in np.argsort(-scores, kind="stable") if c not in excluded[row]]
        kept = []
        for rank, candidate in enumerate(ranked):
            score = scores[candidate]
            if rank < settings.skip_top:
                continue
            if settings.max_score is not None and score > settings.max_score:
                continue
            if settings.margin is not None and score > positive_scores[row] - settings.margin:
                continue
            kept.append(int(candidate))
        mined.append(
            kept[: settings.num_negatives] if len(kept) >= settings.num_negatives else None
        )
    return mined
