"""The CoNLL column-file reader (`tagging.read_column_file`): separators mixed line by
line (allennlp's CoNLL-2003 fixture: tab-separated words, space-separated `-DOCSTART-`
lines), and the errors for a line with a column missing or too many."""

import pytest

from keras_bert_zoo import tasks
from keras_bert_zoo.tasks import tagging
from keras_bert_zoo.utils.errors import UserError

SENTENCES = [
    (["EU", "rejects", "German", "call"], ["I-ORG", "O", "I-MISC", "O"]),
    (["Peter", "Blackburn"], ["I-PER", "I-PER"]),
    (["BRUSSELS", "1996-08-22"], ["I-LOC", "O"]),
    (["The", "European", "Commission", "said", "."], ["O", "I-ORG", "I-ORG", "O", "O"]),
    (["Germany", "'s", "representative"], ["I-LOC", "O", "O"]),
]
DOCSTART = "-DOCSTART- -X- -X- O"


def conll_lines(word_separator, docstart=DOCSTART, documents_before=(1, 3)):
    """`token POS chunk NER` lines joined with `word_separator`; the `-DOCSTART-`
    line, as given, before the sentences at `documents_before` (not before the first,
    so the file's first line is a word line, as in allennlp's fixture)."""
    lines = []
    for index, (words, tags) in enumerate(SENTENCES):
        if index in documents_before:
            lines += [docstart, ""]
        for word, tag in zip(words, tags, strict=True):
            lines.append(word_separator.join([word, "NNP", "I-NP", tag]))
        lines.append("")
    return lines


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def read(path, **kwargs):
    return [
        (e.words, e.tags, e.documents_before, e.source.rsplit(":", 1)[1])
        for e in tagging.read_column_file(path, "train", **kwargs)
    ]


def line_of(lines, text):
    return lines.index(text) + 1


# === Mixed separators ===


@pytest.mark.parametrize(
    "first_document", [(0, 1, 3), (1, 3)], ids=["docstart-first", "word-first"]
)
def test_mixed_separators_read_as_the_all_space_file(tmp_path, first_document):
    spaces = write(tmp_path / "spaces.txt", conll_lines(" ", documents_before=first_document))
    mixed_lines = conll_lines("\t", documents_before=first_document)
    assert "\t" in mixed_lines[0] or mixed_lines[0] == DOCSTART
    mixed = write(tmp_path / "mixed.txt", mixed_lines)
    expected = read(spaces)
    assert [(words, tags) for words, tags, _, _ in expected] == [
        (tuple(w), tuple(t)) for w, t in SENTENCES
    ]
    assert [before for _, _, before, _ in expected] == [
        int(index in first_document) for index in range(len(SENTENCES))
    ]
    assert read(mixed) == expected
    assert read(mixed, delimiter="space") == expected
    assert read(mixed, delimiter="tab") == expected  # the -DOCSTART- lines are still seen

    # Through the task, as `conll2003` reads `eng.train`.
    data = tmp_path / "conll2003"
    data.mkdir()
    write(data / "eng.train", mixed_lines)
    task = tasks.create_task("conll2003", data_dir=str(data))
    assert [(e.words, e.tags, e.documents_before) for e in task.read("train")] == [
        (words, tags, before) for words, tags, before, _ in expected
    ]


def test_word_lines_may_mix_separators_too(tmp_path):
    lines = conll_lines("\t")
    lines[1] = "rejects VBZ\tI-VP  O"  # conlleval splits any run of blanks
    lines[2] = "German JJ I-NP I-MISC"
    examples = tagging.read_column_file(write(tmp_path / "train.txt", lines), "train")
    assert examples[0].words == ("EU", "rejects", "German", "call")
    assert examples[0].tags == ("I-ORG", "O", "I-MISC", "O")


def test_only_blanks_separate_columns_not_other_unicode_spaces(tmp_path):
    # A word may hold a no-break space (U+00A0) or an ideographic space (U+3000):
    # str.split() would cut it, conlleval's blanks do not.
    lines = ["1\u00a0000 CD I-NP O", "東京\u3000都 NNP I-NP I-LOC", "", DOCSTART]
    examples = tagging.read_column_file(write(tmp_path / "train.txt", lines), "train")
    assert examples[0].words == ("1\u00a0000", "東京\u3000都")
    assert examples[0].tags == ("O", "I-LOC")


def test_tab_files_whose_words_hold_spaces_keep_their_words(tmp_path):
    # The tabs matter (a word holds a space): columns are split at tabs alone, even
    # with space-separated -DOCSTART- lines; auto-detected, as before.
    lines = ["New York\tNNP\tI-LOC", "rejects\tVBZ\tO", "", DOCSTART, "", "the lamb\tNN\tO"]
    path = write(tmp_path / "train.txt", lines)
    examples = tagging.read_column_file(path, "train")
    assert [e.words for e in examples] == [("New York", "rejects"), ("the lamb",)]
    assert [e.documents_before for e in examples] == [0, 1]

    # A line with no tab there is one column, not the word `New` tagged `York`.
    lines.append("New York")
    path = write(tmp_path / "train.txt", lines)
    with pytest.raises(ValueError, match=r"train\.txt:7: the word 'New York' has no tag") as error:
        tagging.read_column_file(path, "train")
    assert "split at tabs alone (a field of line 1 holds a space" in str(error.value)


def test_mixed_file_refuses_a_line_missing_a_column(tmp_path):
    for bad, number_of_columns in [("Blackburn\tNNP\tI-NP", 3), ("Blackburn NNP I-NP", 3)]:
        lines = conll_lines("\t")
        number = line_of(lines, "Blackburn\tNNP\tI-NP\tI-PER")
        lines[number - 1] = bad
        path = write(tmp_path / "train.txt", lines)
        with pytest.raises(ValueError) as error:
            tagging.read_column_file(path, "train")
        message = str(error.value)
        assert message.startswith(f"{path}:{number}: "), message
        assert "word 'Blackburn' is missing a column" in message
        assert f"{number_of_columns} columns where the file's lines have 4" in message
        assert "\n" not in message

    lines = conll_lines("\t")
    number = line_of(lines, "Blackburn\tNNP\tI-NP\tI-PER")
    lines[number - 1] = "Blackburn"
    path = write(tmp_path / "train.txt", lines)
    with pytest.raises(ValueError, match=rf"^{path}:{number}: the word 'Blackburn' has no tag"):
        tagging.read_column_file(path, "train")

    # One column too many (a space inside a word of a space-separated line).
    lines = conll_lines("\t")
    lines[number - 1] = "Black burn NNP I-NP I-PER"
    path = write(tmp_path / "train.txt", lines)
    with pytest.raises(ValueError, match=rf"^{path}:{number}: 5 columns where the file's lines"):
        tagging.read_column_file(path, "train")


# === The error for a missing tag ===


def test_missing_tag_names_file_line_and_word(tmp_path):
    data = tmp_path / "conll2003"
    data.mkdir()
    lines = ["Peter NNP I-NP I-PER", ""] * 28 + [""] + conll_lines(" ")
    number = 58
    assert lines[number - 1] == "EU NNP I-NP I-ORG"
    lines[number - 1] = "EU"
    path = write(data / "eng.train", lines)
    task = tasks.create_task("conll2003", data_dir=str(data))
    with pytest.raises(ValueError) as error:
        task.read("train")
    # A UserError (one line at the tools), which callers catch as a ValueError, as before.
    assert error.type is UserError and issubclass(UserError, ValueError)
    message = str(error.value)
    assert message.startswith(
        f"{path}:{number}: the word 'EU' has no tag: 1 column where the file's lines have 4 "
        "(word ... tag"
    ), message
    assert "\n" not in message


def test_missing_tag_in_another_layout(tmp_path):
    # token_classification's layout: id, word, tag (tab-separated; words hold spaces).
    lines = ["1\tNew York\tI-LOC", "2\trejects\tO", "", "1\tthe\tO", "2\tlamb"]
    path = write(tmp_path / "train.txt", lines)
    with pytest.raises(ValueError) as error:
        tagging.read_column_file(path, "train", word_column=1, tag_column=2)
    message = str(error.value)
    assert message.startswith(
        f"{path}:5: the word 'lamb' has no tag: 2 columns where the file's lines have 3 "
        "(... word tag"
    ), message

    # The first line sets the layout: one column there is refused as before.
    path = write(tmp_path / "train.txt", ["EU", "rejects"])
    with pytest.raises(ValueError, match=r"train\.txt:1: expected a word and a tag column"):
        tagging.read_column_file(path, "train")


def test_unlabelled_files_still_read_words_alone(tmp_path):
    path = write(tmp_path / "test.txt", ["EU", "rejects", "", DOCSTART, "", "German"])
    examples = tagging.read_column_file(path, "test", allow_unlabelled=True)
    assert [(e.words, e.tags, e.documents_before) for e in examples] == [
        (("EU", "rejects"), None, 0),
        (("German",), None, 1),
    ]
    path = write(tmp_path / "test.txt", ["EU", "rejects O"])
    with pytest.raises(ValueError, match=r"test\.txt:2: 2 columns where the file's lines have 1"):
        tagging.read_column_file(path, "test", allow_unlabelled=True)
