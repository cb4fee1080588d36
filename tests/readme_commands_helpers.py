"""Running the documentation's commands as a new user runs them: in order, each in a
fresh process, exactly as written, at small sizes (used by tests/test_readme_commands*.py).

Every shell command of the README's quick starts and of the pages of docs/ (a page is
the section its `# Title` names: "Tools", "Fine-tuning", "Distillation", "Sentence
embeddings and semantic search", "Serving", "Pretraining", "Pretraining data on Apache
Beam", "Training on several machines") is read from its file and run with `subprocess`
(no shell: bash's quoting is applied with `shlex`, so a quoted glob reaches the tool
unexpanded, as in bash). The sections run in separate test files, so that pytest-xdist
runs them at the same time; each file has its own working directory, and a section that
uses what an earlier section's command made (the vocabulary of `build_vocab.py`, the
Hugging Face copy of `convert_checkpoint.py`) runs that command first (`run_commands`).
A command that reads exactly as one already run in the working directory (a quick start
repeats its page's first command) is not run twice. What the tests change, and only
that:

- it runs in a working directory that holds `tools/` (a link to this checkout's) and the
  inputs the commands name: data sets in
  their official layouts (GLUE, a reviews CSV, SQuAD, CoNLL-2003, SWAG; small
  fixtures), two tiny google-research/bert checkpoints under the release names, the real
  Bulgarian Wikipedia dump gensim ships (UTF-16 in bzip2) under the name of the real dump,
  the last paragraphs of its article held out as `heldout.txt`, text gensim ships, and
  sentence-embedding data from gensim's Lee news corpora (`data/news/`);
- `/tmp/` and `/shared/` in a command become directories of that working directory, and
  the cluster's `host1:12345`, `host2:12345` two free ports on 127.0.0.1 (both workers
  run at once);
- `python` is this interpreter;
- flags appended at the end make the runs small (absl keeps a flag's last value):
  `SIZE_FLAGS` below. Nothing else of a command is changed.

The commands these tests cannot run are listed in `NOT_RUN` with the reason, and the
sections whose commands are a developer's or a benchmark's in `SECTIONS_NOT_RUN`; any other
command the documentation gains is run (`SECTION_TESTS` says which file runs each
section), or tests/test_readme_commands.py fails asking for it.
"""

from __future__ import annotations

import bz2
import csv
import os
import pathlib
import random
import re
import shlex
import sys
import time

import child_process

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "tasks"))
import finetuning_test_helpers as helpers  # noqa: E402
import qa_test_helpers  # noqa: E402
import sentence_fixtures  # noqa: E402

SECTIONS = (
    "Quick start: fine-tune and serve",
    "Quick start: sentence embeddings and search",
    "Tools",
    "Fine-tuning",
    "Distillation",
    "Sentence embeddings and semantic search",
    "Serving",
    "Pretraining",
    "Pretraining data on Apache Beam",
    "Training on several machines",
)
# The test file that runs each section (tests/ relative).
SECTION_TESTS = {
    # after "Fine-tuning", whose reviews command it repeats
    "Quick start: fine-tune and serve": "test_readme_commands_finetuning.py",
    # after its page, whose first command it repeats
    "Quick start: sentence embeddings and search": "test_readme_commands_embeddings.py",
    "Tools": "test_readme_commands.py",
    "Serving": "test_readme_commands.py",  # exports the model that Tools fine-tuned
    "Fine-tuning": "test_readme_commands_finetuning.py",
    # distils the reviews model that Fine-tuning fine-tuned
    "Distillation": "test_readme_commands_finetuning.py",
    # re-ranks with the MRPC model that Tools fine-tunes
    "Sentence embeddings and semantic search": "test_readme_commands_embeddings.py",
    "Pretraining": "test_readme_commands_pretraining.py",
    "Pretraining data on Apache Beam": "test_readme_commands_pretraining.py",
    "Training on several machines": "test_readme_commands_machines.py",
}

# The documentation: the README, then the pages of docs/.
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
# Sections whose commands are not a user's chain, and why (None: the README's first
# block, before any section).
SECTIONS_NOT_RUN = {
    None: "the two set-up commands: .ci/run runs the second as written, and the first's "
    "main job runs in tests/runners/test_run_disk.py and tests/tools/test_installed_wheel.py",
    "Development": "a developer's commands (venv, make, .ci/run): CI runs them itself",
    "Benchmarks": "benchmarks on real data, minutes to hours each; their results are the "
    "figures of docs/speed.md and benchmarks/README.md",
}

# Commands that are not run here (a pattern searched in the command) and why.
NOT_RUN = {
    r"^docker run ": "needs Docker and the tensorflow/serving image; the C++ loader that TF "
    "Serving uses is tested in tests/serving/test_native.py",
    r"--distribution_strategy=tpu": "needs a TPU",
    r"--runner=DataflowRunner": "needs a Google Cloud project with the Dataflow API, Cloud "
    "Storage and Beam's gcp extra; the pipeline itself runs on the DirectRunner above",
    r"--runner=FlinkRunner": "needs a Flink cluster, Java for Beam's job server and an S3 "
    "bucket; the pipeline itself runs on the DirectRunner above",
    r"--runner=SparkRunner": "needs a Spark cluster, Java for Beam's job server and HDFS; the "
    "pipeline itself runs on the DirectRunner above",
}

# Flags appended to make a run small; the key is the tool, the value a function of the
# command's arguments. Sizes only: steps, batches, lengths, the architecture of runs
# from scratch.
_FINETUNING_SIZE = [
    "--num_train_steps=2",
    "--train_batch_size=4",
    "--eval_batch_size=8",
    "--predict_batch_size=8",
    "--max_seq_length=64",
    "--progress=log",
]
_QUESTION_ANSWERING_SIZE = ["--doc_stride=32", "--max_query_length=16"]
# MiniLM's steps are most of the embedding section's time: shorter texts.
_SENTENCE_EMBEDDING_SIZE = ["--max_seq_length=32"]
_PRETRAINING_SIZE = [
    "--train_batch_size=4",
    "--num_train_steps=2",
    "--num_warmup_steps=1",
    "--eval_steps=1",
    "--eval_batch_size=4",
    "--progress=log",
]


def size_flags(tool: str, args: list[str]) -> list[str]:
    if tool == "run_finetuning.py":
        if any(arg in ("--mode=eval", "--mode=predict", "--mode=export") for arg in args):
            return []  # the fine-tuned model keeps its own sizes
        extra = list(_FINETUNING_SIZE)
        if any(arg.startswith("--task=squad") for arg in args):
            extra += _QUESTION_ANSWERING_SIZE
        if "--task=sentence_embedding" in args:
            extra += _SENTENCE_EMBEDDING_SIZE
        return extra
    if tool == "run_distillation.py":
        return ["--num_train_steps=2", "--train_batch_size=4", "--progress=log"]
    if tool == "run_pretraining.py":
        extra = list(_PRETRAINING_SIZE)
        if any(arg.startswith("--preset=") for arg in args):
            extra.append("--preset=bert_tiny")
        return extra
    if tool == "build_vocab.py":
        return ["--vocab_size=3000"]
    if tool == "create_pretraining_data.py":
        return ["--dupe_factor=2"]
    return []


# === Reading the documentation ===


def documentation_files() -> list[pathlib.Path]:
    """The README, then every page of docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def readme_commands() -> list[tuple[str, str]]:
    """`(section, command)` for every command of `SECTIONS`' bash blocks, in order:
    continuation lines joined, comments dropped."""
    return [(s, c) for s, c in documentation_commands() if s in SECTIONS]


def documentation_commands() -> list[tuple[str, str]]:
    """`(section, command)` of every bash block of the documentation: a README section is
    its `## ` heading, a page the `# ` title of its first line (its `## ` subsections
    belong to it)."""
    commands = []
    for path in documentation_files():
        commands += _file_commands(path)
    return commands


def page_title(path: pathlib.Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# "), f"{path}: the first line is not the page's # title"
    return first[2:].strip()


def _file_commands(path: pathlib.Path) -> list[tuple[str, str]]:
    is_page = path != README
    section = page_title(path) if is_page else None
    commands, in_block, pending = [], False, ""
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## (.+)$", line)
        if heading and not in_block and not is_page:
            section = heading.group(1).strip()
            continue
        if line.startswith("```"):
            in_block = line.strip() == "```bash" and not in_block
            continue
        if not in_block or line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        commands.append((section, re.sub(r"\s+", " ", pending).strip()))
        pending = ""
    return commands


def section_text(section: str) -> str:
    """The page (or README section) `section`, as markdown."""
    for path in documentation_files()[1:]:
        if page_title(path) == section:
            return path.read_text(encoding="utf-8")
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 5)
    return text[start : end if end >= 0 else len(text)]


def _not_run_reason(command: str) -> str | None:
    for pattern, reason in NOT_RUN.items():
        if re.search(pattern, command):
            return reason
    return None


# === The working directory ===


def _gensim_file(name: str) -> pathlib.Path:
    import gensim

    return pathlib.Path(gensim.__file__).parent / "test" / "test_data" / name


# gensim's real Bulgarian Wikipedia dump: UTF-16 (it starts with the FF FE mark) in bzip2,
# one article ("Григориански календар") and two project pages.
BG_DUMP = "bgwiki-latest-pages-articles-shortened.xml.bz2"
HELDOUT_PARAGRAPHS = 15  # at least this many of the article's prose paragraphs are held out


def bulgarian_article() -> tuple[str, str]:
    """(the dump as text, the article's wikitext as the dump holds it, XML-escaped)."""
    with bz2.open(_gensim_file(BG_DUMP)) as f:
        dump = f.read().decode("utf-16")
    opening = dump.index(">", dump.index("<text")) + 1
    return dump, dump[opening : dump.index("</text>", opening)]


def split_bulgarian_article() -> tuple[str, str]:
    """(the wikitext kept for training, the held-out wikitext): the article cut at the last
    blank line that holds out `HELDOUT_PARAGRAPHS` prose paragraphs and cuts no markup
    (a timeline or a template spans blank lines): the parts' prose is the whole's."""
    import html

    from keras_bert_zoo.pretraining.wikitext import clean_wikitext

    _, wikitext = bulgarian_article()
    blank_line = "\r\n\r\n" if "\r\n" in wikitext else "\n\n"  # this dump's lines end in CRLF
    blocks = wikitext.split(blank_line)
    whole = clean_wikitext(html.unescape(wikitext))
    for cut in range(len(blocks) - 1, 0, -1):
        train, heldout = blank_line.join(blocks[:cut]), blank_line.join(blocks[cut:])
        kept = clean_wikitext(html.unescape(heldout))
        if len(kept) >= HELDOUT_PARAGRAPHS and clean_wikitext(html.unescape(train)) + kept == whole:
            return train, heldout
    raise AssertionError(f"{BG_DUMP}: no blank line holds out {HELDOUT_PARAGRAPHS} paragraphs")


def _write_bulgarian_dump(work: pathlib.Path) -> None:
    """`bgwiki-latest-pages-articles.xml.bz2`: gensim's dump as it ships (UTF-16, bzip2)
    without the article's last paragraphs, and `heldout.txt`: those paragraphs' sentences,
    one a line (as create_pretraining_data reads text), a blank line after each paragraph."""
    import html

    from keras_bert_zoo.pretraining.wikitext import clean_wikitext, split_sentences

    dump, wikitext = bulgarian_article()
    train, heldout = split_bulgarian_article()
    with bz2.open(work / "bgwiki-latest-pages-articles.xml.bz2", "wb") as f:
        f.write(dump.replace(wikitext, train).encode("utf-16"))
    documents = [split_sentences(p) for p in clean_wikitext(html.unescape(heldout))]
    (work / "heldout.txt").write_text(
        "".join("\n".join(sentences) + "\n\n" for sentences in documents if sentences),
        encoding="utf-8",
    )


def _write_text_files(work: pathlib.Path) -> None:
    # Real news text: lee_background.cor for the vocabulary of "Tools".
    (work / "corpus").mkdir()
    background = _gensim_file("lee_background.cor").read_bytes().decode("latin-1").splitlines()
    (work / "corpus" / "lee_background.txt").write_text(
        "\n".join(background[:40]) + "\n", encoding="utf-8"
    )
    sentences = _gensim_file("pang_lee_polarity.cor").read_bytes().decode("latin-1")
    rows = [line.split(" ", 1) for line in sentences.splitlines() if line.strip()]
    reviews = [row for row in rows if row[0] == "__label__pos"][:30]
    reviews += [row for row in rows if row[0] == "__label__neg"][:30]
    random.Random(0).shuffle(reviews)
    (work / "sentences.txt").write_text(
        "\n".join(text for _, text in reviews[:6]) + "\n", encoding="utf-8"
    )
    (work / "data").mkdir()
    with open(work / "data" / "reviews.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["review", "stars"])
        for label, text in reviews:
            writer.writerow([text, "5" if label == "__label__pos" else "1"])
    # Unlabelled reviews for the distillation's transfer set (README "Distillation").
    (work / "data" / "unlabelled_reviews.txt").write_text(
        "\n".join(text.strip() for _, text in rows[-20:]) + "\n", encoding="utf-8"
    )
    # Multi-label topics (README "Multi-label classification") and long reviews: a
    # review sentence inside 120-200 words of real news (README "Documents longer than
    # the model"; several windows each at the test's --max_seq_length).
    sentence_fixtures.write_multi_label_tsv(
        str(work / "data" / "topics.tsv"), sentence_fixtures.multi_label_rows(40)
    )
    news = " ".join(background).split()
    rng = random.Random(1)
    lines = ["text\tlabel"]
    for label, text in reviews[:24]:
        start = rng.randrange(len(news) - 200)
        words = news[start : start + rng.randint(120, 200)]
        words.insert(rng.randrange(len(words)), text.strip())
        lines.append(" ".join(words).replace("\t", " ") + "\t" + label.removeprefix("__label__"))
    (work / "data" / "reviews.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


# README "Sentence embeddings and semantic search": gensim's Lee news corpora, split by
# article (lee_background.cor: one article a line).
NEWS_TRAIN_ARTICLES = range(0, 48)  # the training pairs
NEWS_TRANSFER_ARTICLES = range(100, 110)  # unlabelled sentences for the distillation
NEWS_HELDOUT_ARTICLES = range(240, 264)  # the retrieval set and the indexed corpus
NEWS_STS_PAIRS = 40


def _write_embedding_data(work: pathlib.Path) -> None:
    """`data/news/`: the inputs of README "Sentence embeddings and semantic search", from
    real news no one here wrote.

    - `pairs.tsv` (anchor, positive): an article's first sentence and the two after it
      (the inverse cloze task);
    - `sts_dev.tsv` (anchor, positive, score): pairs of the 50 documents of gensim's
      `lee.cor` with the mean of human similarity ratings of Lee, Pincombe & Welsh
      (2005), on their 1-5 scale (`similarities0-1.txt` holds them divided by 5): the
      best-rated pairs and as many drawn from the others;
    - `beir/` (queries.jsonl, corpus.jsonl, qrels/test.tsv, BEIR's layout): the first
      sentence of each held-out article as a query, the rest of the article its one
      relevant document, every held-out article a document;
    - `unlabelled.txt`: other articles' sentences, one a line.
    """
    import json

    from keras_bert_zoo.pretraining.wikitext import split_sentences

    news = work / "data" / "news"
    (news / "beir" / "qrels").mkdir(parents=True)
    articles = [
        split_sentences(line)
        for line in _gensim_file("lee_background.cor").read_bytes().decode("latin-1").splitlines()
    ]
    with open(news / "pairs.tsv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["anchor", "positive"])
        for index in NEWS_TRAIN_ARTICLES:
            writer.writerow([articles[index][0], " ".join(articles[index][1:3])])
    documents = _gensim_file("lee.cor").read_bytes().decode("latin-1").splitlines()
    ratings = [
        [float(value) for value in line.split()]
        for line in _gensim_file("similarities0-1.txt").read_text().splitlines()
    ]
    judged = sorted(
        (ratings[i][j] * 5, i, j) for i in range(len(ratings)) for j in range(i + 1, len(ratings))
    )
    # Most pairs of news stories are unrelated: the best-rated half, the rest drawn.
    half = NEWS_STS_PAIRS // 2
    rng = random.Random(0)
    chosen = judged[-half:] + rng.sample(judged[:-half], NEWS_STS_PAIRS - half)
    rng.shuffle(chosen)
    with open(news / "sts_dev.tsv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["anchor", "positive", "score"])
        for score, i, j in chosen:
            writer.writerow([documents[i].strip(), documents[j].strip(), f"{score:.2f}"])
    with (
        open(news / "beir" / "queries.jsonl", "w", encoding="utf-8") as queries,
        open(news / "beir" / "corpus.jsonl", "w", encoding="utf-8") as corpus,
        open(news / "beir" / "qrels" / "test.tsv", "w", encoding="utf-8") as qrels,
    ):
        qrels.write("query-id\tcorpus-id\tscore\n")
        for index in NEWS_HELDOUT_ARTICLES:
            first, *rest = articles[index]
            queries.write(json.dumps({"_id": f"q{index}", "text": first}) + "\n")
            record = {"_id": f"lee{index}", "title": "", "text": " ".join(rest)}
            corpus.write(json.dumps(record) + "\n")
            qrels.write(f"q{index}\tlee{index}\t1\n")
    (news / "unlabelled.txt").write_text(
        "".join(s + "\n" for index in NEWS_TRANSFER_ARTICLES for s in articles[index][:4]),
        encoding="utf-8",
    )


def _write_task_data(work: pathlib.Path) -> None:
    sentence_fixtures.write_glue(str(work / "glue_data"))
    squad_tests = qa_test_helpers.load_local_module("test_question_answering_end_to_end.py")
    (work / "squad").mkdir()
    rng = random.Random(0)
    for split in ("train", "dev"):
        qa_test_helpers.write_squad(
            work / "squad" / f"{split}-v1.1.json", squad_tests.make_paragraphs(rng, 4, False)
        )
    tagging_tests = qa_test_helpers.load_local_module("test_tagging.py")
    (work / "conll2003").mkdir()
    for seed, split in enumerate(("eng.train", "eng.testa", "eng.testb")):
        tagging_tests.write_conll(
            work / "conll2003" / split, tagging_tests.make_sentences(seed, 12)
        )
    choice_tests = qa_test_helpers.load_local_module("test_multiple_choice.py")
    (work / "swagaf" / "data").mkdir(parents=True)
    for seed, split in enumerate(("train", "val", "test")):
        choice_tests.write_swag(
            work / "swagaf" / "data" / f"{split}.csv",
            choice_tests.swag_rows(seed, 12, labelled=split != "test"),
            labelled=split != "test",
        )


def _write_checkpoints(work: pathlib.Path) -> None:
    """Tiny random BERTs with the pretraining heads, in the google-research/bert layout,
    under the release names the README uses; the vocabulary is the real uncased one of
    the demo model."""
    import keras

    from keras_bert_zoo.checkpoints import save_pretrained
    from keras_bert_zoo.models import BertEncoder, BertPretrainer
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir

    vocab_file = os.path.join(demo_model_dir(), "vocab.txt")
    with open(vocab_file, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    for seed, name in enumerate(("uncased_L-12_H-768_A-12", "cased_L-12_H-768_A-12")):
        keras.utils.set_random_seed(seed)
        encoder = BertEncoder(
            vocab_size=vocab_size,
            **{**helpers.TINY_ENCODER, "num_layers": 2, "max_position_embeddings": 128},
        )
        save_pretrained(BertPretrainer(encoder), str(work / name), vocab_file=vocab_file)


def make_work(tmp_path_factory) -> pathlib.Path:
    """A new working directory with `tools/` and the inputs of the README's commands."""
    work = tmp_path_factory.mktemp("readme")
    # The README's commands run from a clone's root, with the data beside tools/.
    (work / "tools").symlink_to(REPO_ROOT / "tools")
    _write_text_files(work)
    _write_embedding_data(work)
    _write_task_data(work)
    _write_checkpoints(work)
    _write_bulgarian_dump(work)
    return work


# === Running a command ===


def _argv(command: str, work: pathlib.Path, ports: dict[str, int]) -> tuple[dict, list[str]]:
    """`(environment additions, argv)` of a README command, with the substitutions of
    the module docstring."""
    command = command.replace("/tmp/", f"{work}/tmp/").replace("/shared/", f"{work}/shared/")
    for host, port in ports.items():
        command = command.replace(host, f"127.0.0.1:{port}")
    words = shlex.split(command)
    env = {}
    while words and re.match(r"^[A-Z_]+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "python", command
    tool = pathlib.Path(words[1]).name
    args = words[2:]
    return env, [sys.executable, words[1], *args, *size_flags(tool, args)]


# {working directory: {command: its output}}: what has run there.
_RUN: dict[str, dict[str, str]] = {}


def run_section(section: str, work: pathlib.Path) -> dict[str, str]:
    """Runs `section`'s commands in order; consecutive commands with `TF_CONFIG` (the
    workers of one cluster) run at the same time. Returns `{command: output}`."""
    return run_commands(section, work)


def run_commands(section: str, work: pathlib.Path, pattern: str = "") -> dict[str, str]:
    """Runs the commands of `section` that match `pattern` (all by default), as
    `run_section` does. Returns `{command: output}`."""
    commands = [
        c
        for s, c in readme_commands()
        if s == section and not _not_run_reason(c) and re.search(pattern, c)
    ]
    assert commands, f"section {section!r} has no command matching {pattern!r}"
    already_run = _RUN.setdefault(str(work), {})
    outputs, index = {}, 0
    while index < len(commands):
        if commands[index] in already_run:
            # The same command line in the same directory: its run and output stand.
            outputs[commands[index]] = already_run[commands[index]]
            index += 1
            continue
        group = [commands[index]]
        while (
            commands[index].startswith("TF_CONFIG=")
            and index + len(group) < len(commands)
            and commands[index + len(group)].startswith("TF_CONFIG=")
        ):
            group.append(commands[index + len(group)])
        ports = dict(zip(("host1:12345", "host2:12345"), child_process.free_ports(2), strict=True))
        runs = [_argv(command, work, ports) for command in group]
        started = time.monotonic()
        codes, group_outputs = child_process.run_together(
            [argv for _, argv in runs],
            [child_process.environment(extra_env) for extra_env, _ in runs],
            timeout=420,
            cwd=work,
        )
        for command, code, output in zip(group, codes, group_outputs, strict=True):
            assert code == 0, f"{command}\nexit {code}:\n{output[-4000:]}"
            outputs[command] = already_run[command] = output
        # Shown with the test's output (pytest -s, or on failure): where its time goes.
        print(f"{time.monotonic() - started:6.1f}s {' | '.join(group)[:150]}")
        index += len(group)
    return outputs
