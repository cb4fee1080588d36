"""Wikitext cleaning and sentence splitting: hand-written nasty cases and the real excerpt."""

import bz2
import re
import xml.etree.ElementTree as ET

import pytest

from keras_bert_zoo.pretraining.wikitext import (
    clean_wikitext,
    split_sentences,
    wikitext_to_sentences,
)

CLEAN_CASES = [
    # (wikitext, expected paragraphs)
    (
        "'''Paris''' is the [[capital city|capital]] of [[France]].",
        ["Paris is the capital of France."],
    ),
    ("A [[bus]]es and [[Foo (band)|]] here.", ["A buses and Foo here."]),
    ('Text.<ref>Cite {{cite web|url=x}}</ref> More.<ref name="a"/> End.', ["Text. More. End."]),
    ("X<ref name=n>one</ref>Y<ref>two</ref>Z", ["XYZ"]),
    # Templates nested to depth 3, parser functions and parameters.
    ("Before {{a|{{b|{{c|d}}}}|e}} after.", ["Before after."]),
    ("{{#if:{{{1|}}}|yes|no}}Kept text.", ["Kept text."]),
    ("{{Infobox\n| name = {{lang|fr|Paris}}\n| image = [[File:P.jpg|thumb]]\n}}\nBody.", ["Body."]),
    # A table holding a template holding a table, and text after.
    (
        "{| class=wikitable\n|-\n| {{flag|X}} || cell\n|-\n|\n{| \n| inner\n|}\n|}\nAfter table.",
        ["After table."],
    ),
    # Files and categories with nested links in captions go entirely.
    (
        "[[File:A.jpg|thumb|A [[caption]] with [[nested|links]]]] Text.\n[[Category:Cities]]",
        ["Text."],
    ),
    ("[[Image:B.png|left|200px]]Start.", ["Start."]),
    # Leading-colon links keep their text; interlanguage links go.
    ("See [[:Category:Cities|city list]].\n[[de:Paris]]", ["See city list."]),
    ("A [[wikt:word|word]] here.", ["A word here."]),
    # External links keep their label; bare URLs go.
    ("Go to [http://example.org the site] now http://x.org/y.", ["Go to the site now."]),
    ("Bare [http://example.org] link.", ["Bare link."]),
    # Comments (also unterminated), headings, lists, magic words, entities.
    ("Keep <!-- hidden {{x}} --> this.", ["Keep this."]),
    ("Keep this. <!-- never closed\nmore hidden", ["Keep this."]),
    ("== Heading ==\nText one.\n=== Sub ===\nText two.", ["Text one.", "Text two."]),
    (
        "* item one\n** item two\n# numbered\n: indented\n; term",
        ["item one", "item two", "numbered", "indented", "term"],
    ),
    ("__NOTOC__A&nbsp;b &amp; c &ndash; d.", ["A b & c – d."]),
    # Formatting tags keep their content; math and galleries go.
    (
        "H<sub>2</sub>O is <small>water</small>.<br/> Energy <math>E=mc^2</math> here.",
        ["H2O is water. Energy here."],
    ),
    ("Pics:<gallery>\nA.jpg|x\n</gallery>done.", ["Pics:done."]),
    ("<nowiki>[[not a link]]</nowiki> literal.", ["[[not a link]] literal."]),
    # Unclosed constructs stay text instead of swallowing the article.
    (
        "Broken {{template and [[link but. Rest of article.",
        ["Broken {{template and [[link but. Rest of article."],
    ),
    ("Empty parentheses ({{IPA|x}}) go.", ["Empty parentheses go."]),
]


@pytest.mark.parametrize("wikitext, expected", CLEAN_CASES)
def test_clean_wikitext(wikitext, expected):
    assert clean_wikitext(wikitext) == expected


SPLIT_CASES = [
    ("One. Two! Three? Four.", ["One.", "Two!", "Three?", "Four."]),
    (
        "Dr. Smith met Mr. Jones at St. Paul's. They left.",
        ["Dr. Smith met Mr. Jones at St. Paul's.", "They left."],
    ),
    ("J. R. R. Tolkien wrote it. It sold.", ["J. R. R. Tolkien wrote it.", "It sold."]),
    ("The U.S. Army won. Then peace.", ["The U.S. Army won.", "Then peace."]),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    (
        "It cost 3.5 dollars (approx.) in 1990. In 1991 more.",
        ["It cost 3.5 dollars (approx.) in 1990.", "In 1991 more."],
    ),
    (
        "Numbers e.g. one. Lower case after period. ok",
        ["Numbers e.g. one.", "Lower case after period. ok"],
    ),
    ("東京は大きい。大阪も大きい。", ["東京は大きい。", "大阪も大きい。"]),
    ("...", []),
]


@pytest.mark.parametrize("paragraph, expected", SPLIT_CASES)
def test_split_sentences(paragraph, expected):
    assert split_sentences(paragraph) == expected


def test_sentences_of_the_real_wikipedia_excerpt(wiki_path):
    """Every article of the gensim excerpt: no markup survives, prose does."""
    articles = {}
    with bz2.open(wiki_path) as f:
        for _, element in ET.iterparse(f):
            if element.tag.endswith("}page"):
                ns = element.find("{*}ns").text
                text = element.find("{*}revision/{*}text").text or ""
                if ns == "0" and element.find("{*}redirect") is None:
                    articles[element.find("{*}title").text] = text
                element.clear()
    assert len(articles) == 106
    sentences = {title: wikitext_to_sentences(text) for title, text in articles.items()}
    flat = [s for v in sentences.values() for s in v]
    assert len(flat) > 20000
    markup = re.compile(
        r"\{\{|\}\}|\[\[|\]\]|<ref|</ref|<!--|^==.*==$|\{\||\|\}|&nbsp;|'''|https?://"
    )
    leftovers = [s for s in flat if markup.search(s)]
    assert leftovers == []
    # Prose that is in the article's first paragraph, links resolved to their text.
    anarchism = " ".join(sentences["Anarchism"][:3])
    assert anarchism.startswith(
        "Anarchism is a political philosophy that advocates self-governed societies"
    )
    assert "stateless societies" in anarchism
    # Sentences are split: almost all end with terminal punctuation or are list items.
    ended = sum(s[-1] in ".!?\"')" for s in flat) / len(flat)
    assert ended > 0.8
