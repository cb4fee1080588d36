"""The pages "Fine-tuning" and "Distillation", and the README's quick start "fine-tune and
serve", run as a new user runs them (see readme_commands_helpers.py): in order, each
command in a fresh process, after the command of "Tools" that makes the Hugging Face copy
(`bert_hf`) that one of them fine-tunes; "Distillation" distils the reviews model that
"Fine-tuning" fine-tuned, whose command the quick start repeats (run once) before it
exports and serves that model."""

import json
import re

import pytest
import readme_commands_helpers as readme


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return readme.make_work(tmp_path_factory)


@pytest.mark.slow
def test_fine_tuning(work):
    readme.run_commands("Tools", work, pattern=r"tools/convert_checkpoint\.py .*--output=bert_hf")
    readme.run_section("Fine-tuning", work)
    tmp = work / "tmp"
    assert {p.name for p in (tmp / "mnli" / "predictions").iterdir()} >= {
        "MNLI-m.tsv",
        "MNLI-mm.tsv",
        "AX.tsv",
    }
    # --mode=predict names the jsonl of each predict split after it, as eval does.
    assert {"predictions_test_matched.jsonl", "predictions_dev_matched.jsonl"} <= {
        p.name for p in (tmp / "mnli" / "predictions").iterdir()
    }
    results = json.loads((tmp / "mnli" / "eval_results.json").read_text())
    # The run's own model by its directory's name, not the path it happens to have.
    assert results["model"] == "finetuned" and "dev_matched" in results["results"]
    topics = json.loads((tmp / "topics" / "eval_results.json").read_text())["results"]
    assert {"micro_f1", "macro_f1", "subset_accuracy"} <= set(next(iter(topics.values())))
    assert (tmp / "long_reviews" / "finetuned" / "model.keras").is_file()
    for name in ("reviews", "squad", "ner", "swag"):
        assert (tmp / name / "finetuned" / "model.keras").is_file(), name
    assert (tmp / "squad" / "predictions" / "predictions.json").is_file() or list(
        (tmp / "squad" / "predictions").glob("predictions*.json")
    )

    readme.run_section("Distillation", work)
    # The teacher's evaluation stays in distillation.json (the README's eval of the
    # student rewrote eval_results.json).
    student = tmp / "reviews_student"
    teacher = json.loads((student / "distillation.json").read_text())["teacher_results"]
    assert (
        teacher.keys() == json.loads((student / "eval_results.json").read_text())["results"].keys()
    )
    assert (work / "exports" / "reviews_student").is_dir()
    # --cache_teacher_outputs: the teacher's outputs of every training feature, once.
    cache = json.loads((student / "teacher_outputs.json").read_text())
    assert cache["rows"] > 0 and cache["outputs"] == {"outputs": [2]}
    assert (student / "teacher_outputs.tfrecord").stat().st_size > 0

    quick = readme.run_section("Quick start: fine-tune and serve", work)
    assert (work / "exports" / "reviews" / "1" / "saved_model.pb").is_file()
    answer = next(o for c, o in quick.items() if "saved_model_run.py" in c)
    labels = re.findall(r"label: '(\d)'", answer)
    assert len(labels) == 1 and labels[0] in ("1", "5"), answer[-2000:]
