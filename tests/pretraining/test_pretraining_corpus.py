"""Corpus readers: detection by content, streaming documents, and bad input."""

import bz2
import gzip
import os

import pytest

from keras_bert_zoo.pretraining import corpus

DUMP = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">
  <siteinfo>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="4" case="first-letter">Wikipedia</namespace>
      <namespace key="10" case="first-letter">Template</namespace>
    </namespaces>
  </siteinfo>
  <page><title>Alpha</title><ns>0</ns><id>1</id>
    <revision><id>11</id><text xml:space="preserve">'''Alpha''' is first.&lt;ref&gt;x&lt;/ref&gt;
It has [[beta|two]] parts.</text></revision>
  </page>
  <page><title>Gamma</title><ns>0</ns><id>2</id><redirect title="Alpha" />
    <revision><id>12</id><text xml:space="preserve">#REDIRECT [[Alpha]]</text></revision>
  </page>
  <page><title>Wikipedia:About</title><ns>4</ns><id>3</id>
    <revision><id>13</id><text xml:space="preserve">Project page.</text></revision>
  </page>
  <page><title>Delta</title><ns>0</ns><id>4</id>
    <revision><id>14</id><text xml:space="preserve">#redirect [[Alpha]]</text></revision>
  </page>
  <page><title>Epsilon</title><ns>0</ns><id>5</id>
    <revision><id>15</id><text xml:space="preserve">Epsilon is fifth. It ends.</text></revision>
  </page>
</mediawiki>
"""

# An old dump without <ns>: the title's prefix decides, from the dump's own namespaces.
OLD_DUMP = DUMP.replace("<ns>0</ns>", "").replace("<ns>4</ns>", "")


def read_all(path, **kwargs):
    stats = corpus.CorpusStats()
    files = [corpus.sniff_input_file(p) for p in corpus.expand_input_files(path)]
    return list(corpus.iter_documents(files, stats, **kwargs)), stats, files


@pytest.mark.parametrize("dump", [DUMP, OLD_DUMP])
@pytest.mark.parametrize(
    "compress, name", [(bz2.compress, "dump.txt"), (None, "dump.bin"), (gzip.compress, "d")]
)
def test_mediawiki_detected_by_content(tmp_path, dump, compress, name):
    data = dump.encode()
    path = tmp_path / name
    path.write_bytes(compress(data) if compress else data)
    documents, stats, files = read_all(str(path))
    assert files[0].format == corpus.MEDIAWIKI
    assert [d.title for d in documents] == ["Alpha", "Epsilon"]
    assert stats.pages == 5 and stats.redirect_pages == 2 and stats.non_article_pages == 1
    assert "[[beta|two]]" in documents[0].wikitext  # cleaning happens in the workers


def test_text_documents_and_lines(tmp_path):
    path = tmp_path / "corpus.xml"  # the name lies; the content decides
    path.write_text(
        "\n\nA one.\nA two.\n\n\n\nB one.\n  \nC one.\nC two.\nC three.", encoding="utf-8"
    )
    documents, stats, files = read_all(str(path))
    assert files[0].format == corpus.TEXT
    assert [d.lines for d in documents] == [
        ["A one.", "A two."],
        ["B one."],
        ["C one.", "C two.", "C three."],
    ]
    assert [d.first_line for d in documents] == [3, 8, 10]
    assert stats.documents == 3 and stats.lines == 12


def test_each_file_ends_a_document(tmp_path):
    (tmp_path / "a.txt").write_text("A one.\nA two.", encoding="utf-8")  # no blank line at the end
    (tmp_path / "b.txt").write_text("B one.\n", encoding="utf-8")
    documents, _, _ = read_all(f"{tmp_path}/a.txt,{tmp_path}/b.txt")
    assert [d.lines for d in documents] == [["A one.", "A two."], ["B one."]]


def test_compressed_text(tmp_path):
    path = tmp_path / "corpus.txt.gz"
    path.write_bytes(gzip.compress(b"x one.\nx two.\n\ny one.\n"))
    documents, _, files = read_all(str(path))
    assert files[0].compression == "gzip"
    assert [d.lines for d in documents] == [["x one.", "x two."], ["y one."]]


def test_over_long_documents_are_cut(tmp_path):
    path = tmp_path / "one_document.txt"
    path.write_text("".join(f"Sentence number {i}.\n" for i in range(100)), encoding="utf-8")
    documents, stats, _ = read_all(str(path), max_document_chars=200)
    assert len(documents) > 5 and stats.split_documents >= len(documents) - 1
    assert sum(len(d.lines) for d in documents) == 100


def test_invalid_utf8_is_counted_logged_and_dropped(tmp_path, caplog):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"good line.\ncaf\xe9 au lait.\n\nna\xefve.\n")
    with caplog.at_level("WARNING"):
        documents, stats, _ = read_all(str(path))
    assert stats.invalid_utf8_lines == 2
    assert [d.lines for d in documents] == [["good line.", "caf au lait."], ["nave."]]
    assert f"{path}:2" in caplog.text and f"{path}:4" in caplog.text


def test_empty_glob_names_the_pattern(tmp_path):
    pattern = str(tmp_path / "missing-*.txt")
    with pytest.raises(corpus.CorpusError, match="missing-"):
        corpus.expand_input_files(pattern)
    with pytest.raises(corpus.CorpusError, match="empty"):
        corpus.expand_input_files(" , ")


def test_binary_file_is_refused(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\x00\x01\x02binary" * 100)
    with pytest.raises(corpus.CorpusError, match="weights.bin.*binary"):
        corpus.sniff_input_file(str(path))


def test_truncated_bz2_dump_names_the_file(tmp_path):
    data = bz2.compress(DUMP.encode() * 1 + b"<!--" + os.urandom(200000).hex().encode() + b"-->")
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(corpus.CorpusError, match=r"dump\.xml\.bz2.*ends early.*truncated"):
        files = [corpus.sniff_input_file(str(path))]
        list(corpus.iter_documents(files, corpus.CorpusStats()))


def test_truncated_real_dump(tmp_path, wiki_path):
    with open(wiki_path, "rb") as f:
        data = f.read()
    path = tmp_path / "enwiki-cut.xml.bz2"
    path.write_bytes(data[: len(data) * 3 // 4])
    files = [corpus.sniff_input_file(str(path))]
    documents = []
    with pytest.raises(
        corpus.CorpusError, match=r"enwiki-cut\.xml\.bz2.*ends early after \d+ complete pages"
    ):
        for document in corpus.iter_documents(files, corpus.CorpusStats()):
            documents.append(document.title)
    assert len(documents) > 10  # streamed: pages before the cut were already read


def test_truncated_gzip_text(tmp_path):
    data = gzip.compress(("line.\n" * 50000).encode())
    path = tmp_path / "text.gz"
    path.write_bytes(data[: len(data) - 20])
    files = [corpus.sniff_input_file(str(path))]
    with pytest.raises(corpus.CorpusError, match=r"text\.gz.*ends early after line \d+"):
        list(corpus.iter_documents(files, corpus.CorpusStats()))


def test_malformed_xml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.xml"
    path.write_text(
        DUMP.replace("<title>Epsilon</title>", "<title>Epsilon</titel>"), encoding="utf-8"
    )
    files = [corpus.sniff_input_file(str(path))]
    with pytest.raises(corpus.CorpusError, match=r"bad\.xml: malformed XML at line 22, column 24"):
        list(corpus.iter_documents(files, corpus.CorpusStats()))


def test_real_excerpt_streams_articles(wiki_path):
    documents, stats, files = read_all(wiki_path)
    assert files[0].format == corpus.MEDIAWIKI and files[0].compression == "bz2"
    assert stats.pages == 206 and stats.redirect_pages == 99 and stats.non_article_pages == 1
    assert len(documents) == 106 and documents[0].title == "Anarchism"


# === UTF-16, and sentences of every format ===

BULGARIAN_TEXT = "Григорианският календар е въведен.\nТой поправя Юлианския.\n\nВтори документ.\n"


@pytest.mark.parametrize("compress", [None, gzip.compress])
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])  # with the mark: FF FE, FE FF
def test_utf16_text_with_a_byte_order_mark_is_read(tmp_path, encoding, compress):
    data = BULGARIAN_TEXT.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    path = tmp_path / "bg.txt"
    path.write_bytes(compress(data) if compress else data)
    documents, stats, files = read_all(str(path))
    assert (files[0].format, files[0].encoding) == (corpus.TEXT, "utf-16")
    assert [d.lines for d in documents] == [
        ["Григорианският календар е въведен.", "Той поправя Юлианския."],
        ["Втори документ."],
    ]
    assert stats.invalid_utf8_lines == 0


def test_utf16_dump_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(bz2.compress(DUMP.encode("utf-16")))  # little-endian, FF FE first
    documents, stats, files = read_all(str(path))
    assert (files[0].format, files[0].encoding) == (corpus.MEDIAWIKI, "utf-16")
    assert [d.title for d in documents] == ["Alpha", "Epsilon"]
    assert stats.pages == 5 and stats.redirect_pages == 2


def test_the_real_utf16_dump_is_read(bg_wiki_path):
    """gensim's Bulgarian Wikipedia dump, UTF-16 as it ships (create_pretraining_data said
    it "looks binary")."""
    documents, stats, files = read_all(bg_wiki_path)
    assert (files[0].format, files[0].compression, files[0].encoding) == (
        corpus.MEDIAWIKI,
        "bz2",
        "utf-16",
    )
    assert [d.title for d in documents] == ["Григориански календар"]
    assert stats.pages == 3 and stats.non_article_pages == 2


@pytest.mark.parametrize(
    "encoding, message",
    [
        ("utf-16-le", r"looks like UTF-16LE text without a byte-order mark.*iconv -f UTF-16LE"),
        ("utf-16-be", r"looks like UTF-16BE text without a byte-order mark.*iconv -f UTF-16BE"),
        ("utf-32", r"UTF-32 text is not supported.*iconv -f UTF-32"),
    ],
)
def test_utf16_without_the_mark_and_utf32_are_refused_by_name(tmp_path, encoding, message):
    path = tmp_path / "text.txt"
    path.write_bytes(("A sentence, then (1, 2) more.\n" * 20 + BULGARIAN_TEXT).encode(encoding))
    with pytest.raises(corpus.CorpusError, match=message) as error:
        corpus.sniff_input_file(str(path))
    assert "binary" not in str(error.value)


def test_iter_sentences_reads_every_format(tmp_path):
    (tmp_path / "a.xml.bz2").write_bytes(bz2.compress(DUMP.encode("utf-16")))
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(BULGARIAN_TEXT.encode()))
    (tmp_path / "c.txt").write_bytes(b"\xef\xbb\xbfBOM line.\n")  # a UTF-8 byte-order mark
    stats = corpus.CorpusStats()
    sentences = list(corpus.iter_sentences(f"{tmp_path}/a*,{tmp_path}/b*,{tmp_path}/c*", stats))
    assert sentences == [
        "Alpha is first.",
        "It has two parts.",
        "Epsilon is fifth.",
        "It ends.",
        "Григорианският календар е въведен.",
        "Той поправя Юлианския.",
        "Втори документ.",
        "BOM line.",
    ]
    assert stats.files == 3 and stats.pages == 5
    with pytest.raises(corpus.CorpusError, match=r"No file matches the input pattern .*nothing"):
        list(corpus.iter_sentences(f"{tmp_path}/a*,{tmp_path}/nothing*"))
