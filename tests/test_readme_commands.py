"""The documentation's commands (the README's and docs/'s pages'), run as a new user runs
them (see readme_commands_helpers.py): that every command is run by one of
tests/test_readme_commands*.py or says why not, and the pages "Tools" and "Serving"
(whose first export is the model Tools fine-tuned), in order. The other pages run in
test_readme_commands_finetuning.py, _embeddings.py, _pretraining.py and _machines.py, at
the same time as this file under pytest-xdist.
"""

import json
import pathlib
import re

import pytest
import readme_commands_helpers as readme

TESTS = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return readme.make_work(tmp_path_factory)


def test_every_readme_command_is_run_or_says_why_not():
    # Every bash block of the README and of every page is a section that runs, or one
    # whose commands are not a user's (a developer's, a benchmark's) and says why.
    every_section = {section for section, _ in readme.documentation_commands()}
    assert every_section == set(readme.SECTIONS) | set(readme.SECTIONS_NOT_RUN), every_section
    commands = readme.readme_commands()
    sections = {section for section, _ in commands}
    assert sections == set(readme.SECTIONS) == set(readme.SECTION_TESTS), sections
    skipped = [c for _, c in commands if readme._not_run_reason(c)]
    assert len(skipped) == len(readme.NOT_RUN), (skipped, list(readme.NOT_RUN))
    for _, command in commands:
        if not readme._not_run_reason(command):
            assert re.match(r"^(TF_CONFIG='[^']+' )?python tools/\w+\.py( |$)", command), command
    # Each section is run, by the file that SECTION_TESTS names, and by no other.
    runs = {}
    for path in sorted(TESTS.glob("test_readme_commands*.py")):
        for section in re.findall(r"run_section\(\s*\"([^\"]+)\"", path.read_text("utf-8")):
            runs.setdefault(section, []).append(path.name)
    assert runs == {section: [name] for section, name in readme.SECTION_TESTS.items()}, runs


@pytest.mark.slow
def test_tools(work):
    outputs = readme.run_section("Tools", work)
    assert (work / "tmp" / "mrpc" / "finetuned" / "model.keras").is_file()
    features = [json.loads(line) for line in (work / "features.jsonl").read_text().splitlines()]
    assert len(features) == 6
    assert (work / "vocab.txt").is_file()
    assert (work / "bert_hf" / "config.json").is_file()
    assert any("bert_base_uncased" in output for output in outputs.values())


@pytest.mark.slow
def test_serving(work):
    """Export of the fine-tuned directory of an earlier process (test_tools'), then its
    answers on raw text from another process: each label's probability, the label the
    model gives."""
    outputs = readme.run_section("Serving", work)
    assert (work / "exports" / "glue_mrpc" / "1" / "saved_model.pb").is_file()
    assert (work / "exports" / "bert_mlm" / "1" / "saved_model.pb").is_file()
    assert (work / "hub" / "bert").is_dir()
    answer = next(o for c, o in outputs.items() if "--input=" in c)
    probabilities = re.findall(r"probabilities\S*\s+\[+([^\]]+)\]", answer)
    assert probabilities, answer[-2000:]
    values = [float(v) for v in re.split(r"[,\s]+", probabilities[0].strip()) if v]
    assert len(values) == 2 and abs(sum(values) - 1) < 1e-4, answer[-2000:]
