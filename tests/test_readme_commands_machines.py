"""The README's section "Training on several machines", run as a new user runs it (see
readme_commands_helpers.py)."""

import json

import pytest
import readme_commands_helpers as readme


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return readme.make_work(tmp_path_factory)


@pytest.mark.slow
def test_training_on_several_machines(work):
    """Two workers on 127.0.0.1, as the README's TF_CONFIGs describe: both finish; the
    chief wrote the evaluation and the fine-tuned model."""
    readme.run_section("Training on several machines", work)
    output_dir = work / "shared" / "mrpc"
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert set(results["results"]) == {"dev"}, results
    assert (output_dir / "finetuned" / "model.keras").is_file()
