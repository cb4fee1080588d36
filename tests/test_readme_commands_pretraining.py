"""The README's sections "Pretraining" and "Pretraining data on Apache Beam", run as a
new user runs them (see readme_commands_helpers.py): in order, each command in a fresh
process. "Pretraining" is one chain on gensim's real Bulgarian Wikipedia dump (UTF-16 in
bzip2): a vocabulary learned from the dump, records, two phases of pretraining, and
fine-tuning and export from the pretrained model."""

import html
import json
import re

import pytest
import readme_commands_helpers as readme

from keras_bert_zoo.pretraining.wikitext import clean_wikitext, wikitext_to_sentences
from keras_bert_zoo.text.vocab import load_vocab


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return readme.make_work(tmp_path_factory)


def _printed(outputs, tool_and_flag):
    """The output of the one command that runs `tool_and_flag` (a substring of it)."""
    (output,) = [text for command, text in outputs.items() if tool_and_flag in command]
    return output


@pytest.mark.slow
def test_pretraining(work):
    outputs = readme.run_section("Pretraining", work)
    # The vocabulary is the dump's: Cyrillic words of the article, cased.
    vocab = load_vocab(str(work / "bgwiki_vocab.txt"))
    assert {"календар", "година"} <= set(vocab)
    assert any(token[:1].isupper() and "\u0400" <= token[0] <= "\u04ff" for token in vocab)
    learned = _printed(outputs, "build_vocab.py")
    assert re.search(
        r"Wrote \d+ tokens learned from \d+ sentences \(1 file\(s\), 1 MediaWiki", learned
    )

    # The creator's statistics count sentences, not paragraphs: those of the article's
    # prose kept for training, split at Cyrillic capitals (gensim's article: 67 sentences
    # in 43 paragraphs; a split before Latin capitals only gives 45).
    train, _ = readme.split_bulgarian_article()
    paragraphs = clean_wikitext(html.unescape(train))
    sentences = wikitext_to_sentences(html.unescape(train))
    printed = _printed(outputs, "--output_file=data128/")
    assert "Input bgwiki-latest-pages-articles.xml.bz2: mediawiki (bz2, UTF-16)" in printed
    assert f"Sentences: {len(sentences)} (" in printed, printed[-3000:]
    assert len(sentences) >= 1.4 * len(paragraphs), (len(sentences), len(paragraphs))
    assert re.search(r"^Documents: 1 used", printed, re.M), printed[-3000:]

    tmp = work / "tmp"
    for phase in ("phase1", "phase2"):
        results = json.loads((tmp / phase / "eval_results.json").read_text())
        assert results["step"] == 2, results
        # --preset with --vocab_file: the word-embedding table has the vocabulary's rows.
        config = json.loads((tmp / phase / "bert_config.json").read_text())
        assert config["vocab_size"] == len(vocab), config
    assert (tmp / "phase2" / "export_google" / "bert_config.json").is_file()
    assert (tmp / "reviews_phase2" / "finetuned" / "model.keras").is_file()
    assert (work / "exports" / "reviews_phase2" / "1" / "saved_model.pb").is_file()
    # The Beam pipeline's command (the DirectRunner; the cluster runners are not run).
    readme.run_section("Pretraining data on Apache Beam", work)
    assert (work / "beam128" / "train.stats.json").is_file()
