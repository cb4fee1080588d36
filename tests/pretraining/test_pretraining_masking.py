"""text.masking: the original's masked count, 80/10/10, specials, whole words, seeds.

References are independent of the code under test: the count formula in Python
(round half to even, as the original's ``int(round(...))``), binomial tolerances,
chi-square uniformity (scipy), and a pure-Python restatement of the original's
whole-word loop run on the same random order.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from pretraining_synthetic import VOCAB
from scipy import stats

from keras_bert_zoo.text.masking import (
    PretrainingMasker,
    StatelessMaskValuesChooser,
    WholeWordBudgetSelector,
)

CLS, SEP, MASK = VOCAB.index("[CLS]"), VOCAB.index("[SEP]"), VOCAB.index("[MASK]")
WORD_IDS = [i for i, t in enumerate(VOCAB) if not t.startswith("[") and not t.startswith("##")]
PIECE_IDS = [i for i, t in enumerate(VOCAB) if t.startswith("##")]


def random_rows(count, seed=0, min_len=1, max_len=200, pieces=0.0):
    """[CLS] A [SEP] B [SEP] rows of random ids; `pieces`: share of ## continuations."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        length_a = int(rng.integers(min_len, max_len))
        length_b = int(rng.integers(1, max(2, max_len // 4)))

        def segment(n):
            ids = rng.choice(WORD_IDS, n)
            continuation = rng.random(n) < pieces
            continuation[0] = continuation[0] and rng.random() < 0.3  # may start with ##
            return np.where(continuation, rng.choice(PIECE_IDS, n), ids).tolist()

        rows.append([CLS] + segment(length_a) + [SEP] + segment(length_b) + [SEP])
    return rows


def run(masker, rows, seed=(1, 2)):
    masked, positions, labels = masker(
        tf.ragged.constant(rows, tf.int32), tf.constant(seed, tf.int64)
    )
    return masked.to_list(), positions.to_list(), labels.to_list()


def expected_count(length, prob, max_predictions):
    return min(max_predictions, max(1, int(round(length * prob))))


@pytest.mark.parametrize("prob, max_predictions", [(0.15, 20), (0.2, 76), (0.5, 7)])
def test_count_formula_specials_and_labels(vocab_file, prob, max_predictions):
    masker = PretrainingMasker(vocab_file, max_predictions, prob)
    rows = random_rows(1500, seed=3)
    masked, positions, labels = run(masker, rows)
    for row, new, chosen, label in zip(rows, masked, positions, labels, strict=True):
        candidates = len(row) - 3
        assert len(chosen) == min(expected_count(len(row), prob, max_predictions), candidates)
        assert chosen == sorted(set(chosen))
        assert all(row[p] not in (CLS, SEP) for p in chosen)
        assert label == [row[p] for p in chosen]
        # Positions not chosen keep their id; [CLS]/[SEP] never change.
        untouched = set(range(len(row))) - set(chosen)
        assert all(new[i] == row[i] for i in untouched)


def test_80_10_10_within_binomial_tolerance(vocab_file):
    masker = PretrainingMasker(vocab_file, 20, 0.15)
    rows = random_rows(4000, seed=4)
    masked, positions, _ = run(masker, rows)
    outcomes = {"mask": 0, "random": 0, "kept": 0}
    replacement_ids = []
    for row, new, chosen in zip(rows, masked, positions, strict=True):
        for p in chosen:
            if new[p] == MASK:
                outcomes["mask"] += 1
            elif new[p] == row[p]:
                outcomes["kept"] += 1
            else:
                outcomes["random"] += 1
                replacement_ids.append(new[p])
    n = sum(outcomes.values())
    v = len(VOCAB)
    # A random id may equal the original (kept) or be [MASK] itself.
    expected = {"mask": 0.8 + 0.1 / v, "random": 0.1 * (1 - 2 / v), "kept": 0.1 + 0.1 / v}
    for name, p in expected.items():
        sigma = np.sqrt(n * p * (1 - p))
        assert abs(outcomes[name] - n * p) < 5 * sigma, (name, outcomes, n)
    # Random replacements are uniform over the whole vocabulary (specials included).
    counts = np.bincount(replacement_ids, minlength=v)
    assert np.delete(counts, MASK).min() > 0
    assert stats.chisquare(np.delete(counts, MASK)).pvalue > 1e-4


def test_positions_are_uniform(vocab_file):
    masker = PretrainingMasker(vocab_file, 20, 0.15)
    rows = random_rows(6000, seed=5, min_len=40, max_len=41)  # same A length
    rows = [r[:43] + [SEP] for r in rows]  # 44 tokens: [CLS] 40 [SEP] 1 [SEP]
    _, positions, _ = run(masker, rows)
    counts = np.bincount([p for chosen in positions for p in chosen], minlength=44)
    assert counts[0] == counts[41] == counts[43] == 0
    assert stats.chisquare(np.delete(counts, [0, 41, 43])).pvalue > 1e-4


def original_whole_word_choice(words, order, budget):
    """The original loop over candidate words in a given order (restated)."""
    chosen = []
    for word in order:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(words[word]) > budget:
            continue
        chosen.extend(words[word])
    return sorted(chosen)


def test_whole_word_skip_rule_matches_the_original_loop(vocab_file):
    """Same random order as the selector, the original's loop restated: same choice."""
    masker = PretrainingMasker(vocab_file, 5, 0.3, whole_word_mask=True)
    rows = random_rows(400, seed=6, max_len=40, pieces=0.6)
    ids = tf.ragged.constant(rows, tf.int32)
    words = masker.words(ids)
    seed = tf.constant([7, 8], tf.int64)
    selector = WholeWordBudgetSelector(5, 0.3, [CLS, SEP], seed)
    chosen_words = selector.get_selection_mask(words, 1).to_list()
    # The selector's keys: one uniform per word, ranked ascending (stable).
    keys = tf.random.stateless_uniform(tf.shape(words.values.row_lengths()), seed).numpy()
    sizes = words.row_lengths(axis=2).to_list()
    flat_word = 0
    skipped_some = 0
    for row, row_sizes, chosen in zip(rows, sizes, chosen_words, strict=True):
        starts = np.cumsum([0] + row_sizes[:-1])
        groups = [list(range(s, s + n)) for s, n in zip(starts, row_sizes, strict=True)]
        row_keys = keys[flat_word : flat_word + len(groups)]
        flat_word += len(groups)
        candidates = [w for w, g in enumerate(groups) if row[g[0]] not in (CLS, SEP)]
        order = sorted(candidates, key=lambda w: (row_keys[w], w))
        budget = expected_count(len(row), 0.3, 5)
        expected = original_whole_word_choice(groups, order, budget)
        got = sorted(p for w, g in enumerate(groups) if chosen[w] for p in g)
        assert got == expected
        prefix = 0
        for w in order:  # rows where the loop skipped a word and went on
            if prefix + len(groups[w]) > budget:
                skipped_some += prefix < budget
                break
            prefix += len(groups[w])
    assert skipped_some > 20


def test_whole_word_masks_every_piece_and_never_crosses_specials(vocab_file):
    masker = PretrainingMasker(vocab_file, 20, 0.15, whole_word_mask=True)
    rows = random_rows(1500, seed=8, pieces=0.5)
    _, positions, _ = run(masker, rows)
    multi_piece = 0
    for row, chosen in zip(rows, positions, strict=True):
        chosen = set(chosen)
        assert len(chosen) <= expected_count(len(row), 0.15, 20)
        for p in chosen:
            # The word of p: back to its first piece, forward over ## pieces; a ##
            # piece right after [CLS]/[SEP] starts a word (documented deviation).
            start = p
            while VOCAB[row[start]].startswith("##") and row[start - 1] not in (CLS, SEP):
                start -= 1
            end = p + 1
            while end < len(row) and VOCAB[row[end]].startswith("##"):
                end += 1
            assert set(range(start, end)) <= chosen
            multi_piece += end - start > 1
    assert multi_piece > 1000


def test_words_grouping(vocab_file):
    masker = PretrainingMasker(vocab_file, whole_word_mask=True)
    ka, ne = VOCAB.index("ka"), VOCAB.index("ne")
    piece = VOCAB.index("##lo")
    row = [CLS, piece, ka, piece, piece, SEP, piece, ne, SEP]
    words = masker.words(tf.ragged.constant([row, [CLS, ka, SEP, ne, SEP]], tf.int32))
    assert words.to_list()[0] == [[CLS], [piece], [ka, piece, piece], [SEP], [piece], [ne], [SEP]]
    assert words.to_list()[1] == [[CLS], [ka], [SEP], [ne], [SEP]]


def test_same_seed_same_masks_other_seed_other_masks(vocab_file):
    masker = PretrainingMasker(vocab_file, 20, 0.15, whole_word_mask=True)
    rows = random_rows(200, seed=9, pieces=0.4)
    first, second = run(masker, rows, (5, 6)), run(masker, rows, (5, 6))
    assert first == second
    assert run(masker, rows, (5, 7))[1] != first[1]


def test_bad_settings_are_refused(vocab_file, tmp_path):
    with pytest.raises(ValueError, match="masked_lm_prob"):
        PretrainingMasker(vocab_file, masked_lm_prob=0.0)
    with pytest.raises(ValueError, match="max_predictions_per_seq"):
        PretrainingMasker(vocab_file, max_predictions_per_seq=0)
    with pytest.raises(ValueError, match=r"lacks \['\[MASK\]'\]"):
        PretrainingMasker([t for t in VOCAB if t != "[MASK]"])


def test_single_token_path_equals_tensorflow_text_mask_language_model(vocab_file):
    """Single tokens are masked on flat values (for speed), not through
    tf_text.mask_language_model: with the same selector and values chooser, both give
    the same masked ids, positions and labels, including empty and short rows."""
    masker = PretrainingMasker(vocab_file, 20, 0.15)
    rows = random_rows(400, seed=11) + [[CLS, SEP, SEP], [CLS, WORD_IDS[0], SEP, SEP]]
    ids = tf.ragged.constant(rows, tf.int32)
    seed = tf.constant([3, 4], tf.int64)
    ours = masker(ids, seed)
    selector_seed, chooser_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    selector = WholeWordBudgetSelector(20, 0.15, [CLS, SEP], selector_seed)
    chooser = StatelessMaskValuesChooser(len(VOCAB), MASK, chooser_seed)
    reference = tf_text.mask_language_model(ids, selector, chooser, axis=1)
    for got, expected in zip(ours, reference, strict=True):
        assert got.to_list() == expected.to_list()
    # Not vacuous: every row but the one without candidates has a prediction.
    assert sum(1 for row in ours[1].to_list() if row) == len(rows) - 1
