"""The README's sections "Pretraining" and "Pretraining data on Apache Beam", run as a
new user runs them (see readme_commands_helpers.py): in order, each command in a fresh
process, after the command of "Tools" that builds the vocabulary (`vocab.txt`) they use."""

import json

import pytest
import readme_commands_helpers as readme


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return readme.make_work(tmp_path_factory)


def test_pretraining(work):
    readme.run_commands("Tools", work, pattern=r"tools/build_vocab\.py .*--output_vocab=vocab\.txt")
    readme.run_section("Pretraining", work)
    tmp = work / "tmp"
    for phase in ("phase1", "phase2"):
        results = json.loads((tmp / phase / "eval_results.json").read_text())
        assert results["step"] == 2, results
    assert (tmp / "phase2" / "export_google" / "bert_config.json").is_file()
    assert (tmp / "mrpc_phase2" / "finetuned" / "model.keras").is_file()
    assert (work / "exports" / "mrpc_phase2" / "1" / "saved_model.pb").is_file()
    # The Beam pipeline's command (the DirectRunner; the cluster runners are not run).
    readme.run_section("Pretraining data on Apache Beam", work)
