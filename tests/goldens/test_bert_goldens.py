"""BERT stays bit for bit what it is: its behaviour today, recomputed and compared with
the golden files of tests/goldens/data/.

BERT is moving behind a registry of encoder families (BERT, RoBERTa, DistilBERT, ...),
and that refactor must leave BERT identical: the same variables in the same order, the
same checkpoint names in the google-research/bert and Hugging Face layouts, the same
outputs from the same weights, the same token ids, the same ops in an export. These
goldens were written before the refactor (tests/goldens/bert_goldens.py says what each
records); a difference names the golden file, the key path and both values.

Rewrite them (`python tests/goldens/bert_goldens.py --write`) only for a change to
BERT that is intended, and commit them with it.
"""

from __future__ import annotations

import pathlib

import child_process
import pytest

HERE = pathlib.Path(__file__).resolve().parent
goldens = child_process.import_by_path("kbz_bert_goldens", HERE / "bert_goldens.py")

GOLDEN_FILES = goldens.GOLDEN_FILES


@pytest.fixture(scope="module")
def computed():
    """`{golden file name: content}`, every golden computed once (~30 s: 23 tiny models,
    46 checkpoints and three SavedModel exports)."""
    return goldens.compute_goldens()


def test_the_data_directory_holds_the_goldens_and_nothing_else():
    on_disk = sorted(path.name for path in goldens.DATA_DIR.glob("*.json"))
    assert on_disk == sorted(GOLDEN_FILES), (
        f"{goldens.DATA_DIR} holds {on_disk}, the goldens are {sorted(GOLDEN_FILES)}: "
        f"`{goldens.WRITE_COMMAND}` writes them"
    )


@pytest.mark.slow  # the goldens computed once: ~25 s
@pytest.mark.parametrize("name", GOLDEN_FILES)
def test_bert_matches_its_golden(name, computed):
    path = goldens.golden_path(name)
    if not path.is_file():
        pytest.fail(f"{path} is missing: `{goldens.WRITE_COMMAND}` writes it", pytrace=False)
    report = goldens.describe_differences(name, goldens.read_golden(name), computed[name])
    if report:
        pytest.fail(report, pytrace=False)


def test_the_comparison_reports_a_change_with_its_key_path_and_both_values():
    summary = goldens.output_summary([[1.0, -2.0], [3.0, 0.5]])
    golden = {"task/glue/mrpc": {"output": summary}, "names": ["a", "b"]}
    assert not list(goldens.differences(golden, golden))

    # Float noise well inside the relative tolerance is no difference.
    noisy = {**summary, "sum": summary["sum"] * (1 + 2e-6)}
    assert not list(goldens.differences(summary, noisy))

    assert summary["sum"] == 2.5
    changed = {"task/glue/mrpc": {"output": {**summary, "sum": 2.5025}}, "names": ["a", "c"]}
    assert list(goldens.differences(golden, changed)) == [
        ("['names'][1]", "b", "c"),
        ("['task/glue/mrpc']['output']['sum']", 2.5, 2.5025),
    ]
    report = goldens.describe_differences("outputs.json", golden, changed)
    assert str(goldens.golden_path("outputs.json")) in report
    assert "['task/glue/mrpc']['output']['sum']: golden 2.5, now 2.5025" in report
    assert goldens.WRITE_COMMAND in report
