"""The synthetic corpus of the pretraining-data tests (imported by conftest and tests).

Words are built from a small syllable set, so that the vocabulary (specials,
syllables, ``##`` syllables, punctuation) tokenizes every word into known pieces:
multi-piece words exercise whole-word masking, and the tokenization is the same for
our ``BertTokenizer`` and the port's pure-Python one.
"""

import numpy as np

SYLLABLES = [
    "ka", "lo", "mi", "ne", "ru", "ta", "so", "vi", "de", "pa",
    "gu", "fe", "bo", "zi", "ha", "jo", "wu", "ce", "xa", "yo",
]  # fmt: skip
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = SPECIALS + SYLLABLES + ["##" + s for s in SYLLABLES] + [".", ","]


def synthetic_word(rng):
    return "".join(rng.choice(SYLLABLES, size=int(rng.integers(1, 4))))


def synthetic_documents(num_documents, seed=0, max_sentences=12, max_words=22):
    """Documents (lists of sentences) of random syllable words."""
    rng = np.random.default_rng(seed)
    documents = []
    for _ in range(num_documents):
        sentences = []
        for _ in range(int(rng.integers(1, max_sentences + 1))):
            words = [synthetic_word(rng) for _ in range(int(rng.integers(2, max_words + 1)))]
            sentences.append(" ".join(words).capitalize() + " .")
        documents.append(sentences)
    return documents


def write_corpus(path, documents, extra_blank_lines=False):
    with open(path, "w", encoding="utf-8") as f:
        for document in documents:
            f.write("\n".join(document) + "\n\n")
            if extra_blank_lines:
                f.write("\n\n")
    return str(path)


def unmasked_ids(input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
    """input ids with the original ids put back at the masked positions (numpy)."""
    ids = np.array(input_ids, copy=True)
    real = np.asarray(masked_lm_weights) > 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], real.shape)
    ids[rows[real], np.asarray(masked_lm_positions)[real]] = np.asarray(masked_lm_ids)[real]
    return ids
