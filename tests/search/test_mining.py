"""Hard negatives: the mined negatives equal a brute-force restatement of the rules
(every candidate scored in float64 and sorted, the rules applied in order), never a
positive or a repeat of one, with the margin, the score limit and the rank window
respected; the pairs and the written triplets as files."""

import csv
import json

import numpy as np
import pytest
import search_helpers

from keras_bert_zoo.search import mining
from keras_bert_zoo.tasks.sentence.readers import InputFileError
from keras_bert_zoo.utils.errors import UserError


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    candidates = rng.standard_normal((120, 12)).astype(np.float32)
    positives = rng.integers(0, 120, 40)
    anchors = candidates[positives] + 0.6 * rng.standard_normal((40, 12)).astype(np.float32)
    cosines = np.sum(
        search_helpers.unit_rows(anchors).astype(np.float64)
        * search_helpers.unit_rows(candidates[positives]),
        axis=1,
    )
    # Each anchor's positive and a second, random one: neither may come back.
    excluded = [{int(p), int(q)} for p, q in zip(positives, rng.integers(0, 120, 40), strict=True)]
    return anchors, candidates, cosines, excluded


@pytest.mark.parametrize(
    "settings",
    [
        mining.MiningSettings(3),
        mining.MiningSettings(2, skip_top=5),
        mining.MiningSettings(4, margin=0.1),
        mining.MiningSettings(2, max_score=0.3, skip_top=1),
        # More than the first search's depth survives none of the rules: it widens.
        mining.MiningSettings(5, max_score=-0.2),
    ],
    ids=["plain", "skip_top", "margin", "max_score", "widened"],
)
def test_negatives_equal_the_brute_force_restatement(problem, settings):
    anchors, candidates, cosines, excluded = problem
    got = mining.mine_hard_negatives(anchors, candidates, cosines, excluded, settings)
    want = search_helpers.brute_force_negatives(anchors, candidates, cosines, excluded, settings)
    assert got == want
    found = [row for row in got if row is not None]
    assert len(found) >= 30  # the rules leave most rows their negatives
    scores = search_helpers.unit_rows(anchors) @ search_helpers.unit_rows(candidates).T
    for row, negatives in enumerate(got):
        if negatives is None:
            continue
        assert not set(negatives) & excluded[row]
        assert len(set(negatives)) == settings.num_negatives
        if settings.margin is not None:
            assert (scores[row, negatives] <= cosines[row] - settings.margin + 1e-6).all()
        if settings.max_score is not None:
            assert (scores[row, negatives] <= settings.max_score + 1e-6).all()


def test_a_row_left_with_too_few_candidates_is_none(problem):
    anchors, candidates, cosines, excluded = problem
    got = mining.mine_hard_negatives(
        anchors[:2], candidates[:6], cosines[:2], [{0, 1, 2}, set()], mining.MiningSettings(4)
    )
    assert got[0] is None and len(got[1]) == 4


class _TableEmbedder:
    """Vectors looked up by text (a stand-in model: the mining reads only `embed` and
    the prompts)."""

    query_prompt = document_prompt = None

    def __init__(self, vectors):
        self.vectors = vectors

    def embed(self, texts, *, prompt=None, what="texts"):
        return np.stack([self.vectors[(prompt or "") + text] for text in texts])


def test_mine_pairs_excludes_every_positive_of_an_anchor_and_repeated_texts():
    vectors = {
        "q": np.array([1.0, 0.0, 0.0]),
        "p1": np.array([0.9, 0.1, 0.0]),
        "p2": np.array([0.95, 0.05, 0.0]),  # q's second positive: never its negative
        "q2": np.array([0.0, 1.0, 0.0]),
        "n1": np.array([0.8, 0.3, 0.0]),
        "n2": np.array([0.5, 0.5, 0.2]),
    }
    pairs = mining.PairsFile(("q", "q", "q2", "q2"), ("p1", "p2", "n1", "n2"), (2, 3, 4, 5), "x")
    rows, dropped = mining.mine_pairs(_TableEmbedder(vectors), pairs, mining.MiningSettings(1))
    assert dropped == 0
    assert [(r.anchor, r.positive, r.negatives) for r in rows] == [
        ("q", "p1", ("n1",)),
        ("q", "p2", ("n1",)),
        ("q2", "n1", ("p1",)),  # p2 scores below p1 for q2
        ("q2", "n2", ("p1",)),
    ]
    # A corpus of candidates: a text equal to the anchor is no negative either.
    rows, _ = mining.mine_pairs(
        _TableEmbedder(vectors), pairs, mining.MiningSettings(2), candidates=["q", "p2", "n2", "n1"]
    )
    assert rows[0].negatives == ("n1", "n2")


def test_pairs_file_and_triplets(tmp_path):
    pairs_file = tmp_path / "pairs.tsv"
    pairs_file.write_text("anchor\tpositive\tscore\nq one\tp one\t1\nq two\tp two\t0\n")
    pairs = mining.read_pairs(str(pairs_file))
    assert pairs.anchors == ("q one", "q two") and pairs.lines == (2, 3)
    rows = [mining.MinedRow("a", "p", ("n1", "n2")), mining.MinedRow('a "q"', "p,x", ("m", "o"))]
    for name in ("out.tsv", "out.csv", "out.jsonl"):
        path = str(tmp_path / name)
        mining.write_triplets(path, rows, 2)
        if name.endswith(".jsonl"):
            read = [json.loads(line) for line in open(path)]
        else:
            with open(path, newline="") as f:
                read = list(csv.DictReader(f, delimiter="\t" if name.endswith(".tsv") else ","))
        assert read[1] == {
            "anchor": 'a "q"',
            "positive": "p,x",
            "negative_1": "m",
            "negative_2": "o",
        }, name
    with pytest.raises(UserError, match="row 1 holds a tab"):
        mining.write_triplets(str(tmp_path / "tab.tsv"), [mining.MinedRow("a\tb", "p", ("n",))], 1)
    assert not (tmp_path / "tab.tsv").exists()
    with pytest.raises(UserError, match="no row has 2 negatives"):
        mining.write_triplets(str(tmp_path / "none.tsv"), [], 2)


def test_pairs_file_errors(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("anchor\tpositive\nq\t \n")
    with pytest.raises(InputFileError, match=r"bad.tsv:2: the 'positive' column is empty"):
        mining.read_pairs(str(bad))
    bad.write_text("query\tpositive\nq\tp\n")
    with pytest.raises(InputFileError, match=r"bad.tsv:1: the header has no column 'anchor'"):
        mining.read_pairs(str(bad))
    with pytest.raises(UserError, match="--num_negatives=0"):
        mining.MiningSettings(0)
