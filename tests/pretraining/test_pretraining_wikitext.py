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


# === Every script ===

# Real sentences, two in a row, quoted with their source. The Universal Declaration of
# Human Rights: Hindi and Chinese (Simplified) article 1 as "UDHR in Unicode" has them
# (unicode-org/icu, icu4j/perf-tests/data/udhr/udhr_hin.txt, udhr_cmn_hans.txt); the Greek
# preamble's third and fourth recitals ("UDHR in Unicode", grk.txt); the Arabic preamble's
# first two recitals (the UN's Arabic text); the Amharic article 1 (the Ethiopian Human
# Rights Commission, ehrc.org).
EVERY_SCRIPT_CASES = {
    "Hindi: the danda, a space before it": [
        "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है ।",
        "उन्हें बुद्धि और अन्तरात्मा की देन प्राप्त है और परस्पर उन्हें भाईचारे के भाव से बर्ताव करना चाहिए ।",
    ],
    "Chinese: 。 and no space": [
        "人人生而自由,在尊严和权利上一律平等。",
        "他们赋有理性和良心,并应以兄弟关系的精神相对待。",
    ],
    "Greek: a period and a Greek capital": [
        "Επειδή έχει ουσιαστική σημασία να προστατεύονται τα ανθρώπινα δικαιώματα από ένα "
        "καθεστώς δικαίου, ώστε ο άνθρωπος να μην αναγκάζεται να προσφεύγει, ως έσχατο "
        "καταφύγιο, στην εξέγερση κατά της τυραννίας και της καταπίεσης.",
        "Επειδή έχει ουσιαστική σημασία να ενθαρρύνεται η ανάπτυξη φιλικών σχέσεων ανάμεσα στα "
        "έθνη.",
    ],
    "Arabic: a period and a letter of a script without case": [
        "لما كان الاعتراف بالكرامة المتأصلة في جميع أعضاء الأسرة البشرية وبحقوقهم المتساوية "
        "الثابتة هو أساس الحرية والعدل والسلام في العالم.",
        "ولما كان تناسي حقوق الإنسان وازدراؤها قد أفضيا إلى أعمال همجية آذت الضمير الإنساني.",
    ],
    "Amharic: the Ethiopic full stop ።": [
        "ሰዎች ሁሉ እኩል ክብርና መብቶች ይዘው ነጻ ሆነው ተፈጥረዋል።",
        "የማመዛዘን ችሎታን እና ኅሊናን በተፈጥሮ ስለታደሉ እርስ በርሳቸው በወንድማማችነት መንፈስ ሊተያዩ ይገባል።",
    ],
}


@pytest.mark.parametrize("case", sorted(EVERY_SCRIPT_CASES))
def test_sentences_end_in_every_script(case):
    sentences = EVERY_SCRIPT_CASES[case]
    assert split_sentences(" ".join(sentences)) == sentences


# Made-up examples of the rules (the real text is above and below).
@pytest.mark.parametrize(
    "paragraph, expected",
    [
        # A script's full stop ends a sentence whatever follows.
        ("Ты где؟ Я здесь۔ Да", ["Ты где؟", "Я здесь۔", "Да"]),
        ("Բարեւ։Ինչպես ես", ["Բարեւ։", "Ինչպես ես"]),
        # Abbreviations and initials of other scripts do not end a sentence.
        (
            "Въведен е на 14 март 1916 г. Той е в сила, т.е. Народното събрание реши.",
            ["Въведен е на 14 март 1916 г. Той е в сила, т.е. Народното събрание реши."],
        ),
        ("Живее на ул. Раковски. Тя също.", ["Живее на ул. Раковски.", "Тя също."]),
        # Quotes of other languages open and close sentences: „...“, «...», ¿...?
        ("Er sagte: „Ja.“ Dann ging er.", ["Er sagte: „Ja.“", "Dann ging er."]),
        ("Он сказал: «Да.» «Нет», ответила она.", ["Он сказал: «Да.»", "«Нет», ответила она."]),
        ("Llegó tarde. ¿Qué pasó? ¡Nada!", ["Llegó tarde.", "¿Qué pasó?", "¡Nada!"]),
        # A lower-case letter of any script, accented or not, never starts a sentence.
        ("Voir p. ex. à la page. été", ["Voir p. ex. à la page. été"]),
    ],
)
def test_sentence_rules_of_other_languages(paragraph, expected):
    assert split_sentences(paragraph) == expected


def _unsplit(sentence):
    """A period, `!` or `?` inside a sentence, before a capital or a digit."""
    return re.search(r"[.!?][\"»“”)]* +[«„\"(]?[^\W_a-zа-яё]", sentence)


def test_sentences_of_the_real_bulgarian_dump(bg_wiki_path):
    """gensim's Bulgarian Wikipedia dump (UTF-16 with its byte-order mark, in bzip2) read
    as create_pretraining_data reads it: its one article's 58 prose paragraphs are 83
    sentences (the README says so), split at Cyrillic capitals; a split before Latin
    capitals and digits only makes 60 of them."""
    from keras_bert_zoo.pretraining import corpus

    input_file = corpus.sniff_input_file(bg_wiki_path)
    assert (input_file.format, input_file.encoding) == (corpus.MEDIAWIKI, "utf-16")
    (article,) = corpus.iter_documents([input_file], corpus.CorpusStats())
    assert article.title == "Григориански календар"
    paragraphs = clean_wikitext(article.wikitext)
    sentences = list(corpus.iter_sentences(bg_wiki_path))
    assert (len(paragraphs), len(sentences)) == (58, 83)
    assert sentences[2] == (
        "Той поправя древноримския Юлиански календар, като в него са нанесени някои корекции, "
        "за да се отчете по-точно дължината на тропическата година."
    )
    # What is left unsplit is an abbreviation before a capital ("г.", "т.е."), never a
    # sentence end before a Cyrillic capital.
    left = [s for s in sentences if _unsplit(s)]
    assert all(re.search(r"\b(?:г|т\.е|т\. н)\. ", s) for s in left), left


def test_sentences_of_real_russian_prose(crime_and_punishment_path):
    """The opening of Crime and Punishment as gensim ships it (in Russian, then in
    English): its 3 Russian paragraphs are 12 sentences."""
    with open(crime_and_punishment_path, encoding="utf-8") as f:
        paragraphs = [line.strip() for line in f if re.search("[а-я]", line)]
    sentences = [s for paragraph in paragraphs for s in split_sentences(paragraph)]
    assert (len(paragraphs), len(sentences)) == (3, 12)
    assert sentences[1:3] == [
        "Он благополучно избегнул встречи с своею хозяйкой на лестнице.",
        "Каморка его приходилась под самою кровлей высокого пятиэтажного дома и походила "
        "более на шкаф, чем на квартиру.",
    ]
    assert not [s for s in sentences if _unsplit(s)]
