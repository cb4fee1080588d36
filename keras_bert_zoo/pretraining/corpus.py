"""Streaming corpus readers: plain text and MediaWiki XML dumps, detected by content.

Two input formats, told apart by their first bytes (after decompression), never by
the file name:

* plain text, google-research/bert's format: one sentence per line, blank lines
  between documents;
* MediaWiki XML dumps (``<mediawiki ...>``): each article (namespace 0, not a
  redirect) is one document; its wikitext is cleaned and split into sentences later,
  in the worker processes (``wikitext.wikitext_to_sentences``).

Compression is detected by magic bytes too: bzip2 (``.bz2``, Wikipedia's dumps),
gzip and xz are read as streams. The text is UTF-8, or UTF-16 when the (decompressed)
file starts with a byte-order mark (``FF FE`` or ``FE FF``). Everything is read
lazily: memory holds one document (plain text) or one page (dumps) at a time, never
the corpus.

``iter_sentences`` gives the sentences of every input, whatever its format (a text
file's lines, a dump's articles cleaned and split by ``wikitext``): what
``tools/build_vocab.py`` learns a vocabulary from, read as the record creator reads it.

Paths are local, or URLs of any filesystem Apache Beam reads (``gs://``, ``s3://``,
``hdfs://``, ...), read through ``apache_beam.io.filesystems`` (the ``beam`` extra).

Bad input:

* a pattern that matches no file, an empty file list: ``CorpusError`` naming the
  pattern;
* a binary file (NUL bytes in its first 64 KiB) or a zstd/zip/gzip-in-disguise the
  reader cannot decompress: ``CorpusError`` naming the file; UTF-16 without a
  byte-order mark and UTF-32 are refused with a message that says so;
* invalid UTF-8 in a text file: the bytes are dropped (as the original's
  ``convert_to_unicode(..., errors="ignore")`` does), the lines are counted and the
  first few are logged with their file and line number;
* a compressed file that ends early (a truncated download): ``CorpusError`` naming
  the file and how far it got (line, or complete pages read). The run stops: a dump
  that silently lost its tail is worse than a rerun;
* malformed XML: ``CorpusError`` naming the file, line and column.
"""

from __future__ import annotations

import bz2
import codecs
import dataclasses
import glob
import gzip
import io
import lzma
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from absl import logging

from keras_bert_zoo.utils.errors import UserError

__all__ = [
    "CorpusError",
    "CorpusStats",
    "InputFile",
    "RawDocument",
    "document_sentences",
    "expand_input_files",
    "is_url",
    "iter_documents",
    "iter_file_documents",
    "iter_mediawiki_pages",
    "iter_sentences",
    "iter_text_documents",
    "open_binary",
    "sniff_input_file",
]

TEXT = "text"
MEDIAWIKI = "mediawiki"
_SNIFF_BYTES = 64 * 1024
_LOGGED_PROBLEMS = 5


class CorpusError(UserError):
    """Input that cannot be read; the message names the file (and line)."""


@dataclasses.dataclass
class CorpusStats:
    """Counts of what the readers read and skipped (summed over input files)."""

    files: int = 0
    input_bytes: int = 0
    lines: int = 0
    invalid_utf8_lines: int = 0
    documents: int = 0
    split_documents: int = 0
    pages: int = 0
    redirect_pages: int = 0
    non_article_pages: int = 0

    def merge(self, other: CorpusStats) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass(frozen=True)
class InputFile:
    path: str
    format: str  # TEXT or MEDIAWIKI
    compression: str | None  # "bz2", "gzip", "xz" or None
    size: int
    encoding: str = "utf-8"  # or "utf-16" (a byte-order mark says which byte order)


@dataclasses.dataclass
class RawDocument:
    """One document as read: text lines, or the wikitext of one article.

    ``lines`` holds the sentences of a plain-text document (stripped, non-empty);
    ``wikitext`` the raw markup of an article. ``source`` names the file;
    ``first_line`` is the 1-based line of ``lines[0]`` (plain text) and ``title`` the
    article's title (dumps).
    """

    source: str
    lines: list[str] | None = None
    wikitext: str | None = None
    first_line: int = 0
    title: str | None = None

    @property
    def size(self) -> int:
        if self.lines is not None:
            return sum(len(line) for line in self.lines)
        return len(self.wikitext or "")


_URL = re.compile(r"\A[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: str) -> bool:
    """Whether `path` names a file of a filesystem other than the local one (``gs://...``)."""
    return bool(_URL.match(path))


def _beam_filesystems(path: str):
    try:
        from apache_beam.io.filesystems import FileSystems
    except ImportError as e:
        raise CorpusError(
            f"{path}: reading this filesystem needs Apache Beam: pip install 'keras_bert_zoo[beam]'"
        ) from e
    return FileSystems


def open_binary(path: str):
    """`path` opened for reading bytes, as stored (never decompressed by its name)."""
    if not is_url(path):
        return open(path, "rb")
    from apache_beam.io.filesystem import CompressionTypes

    return _beam_filesystems(path).open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def _match(pattern: str) -> list[tuple[str, int]]:
    """`(path, size)` of the files matching a glob pattern, sorted by path."""
    if not is_url(pattern):
        paths = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
        return [(p, os.path.getsize(p)) for p in paths]
    filesystems = _beam_filesystems(pattern)
    try:
        (result,) = filesystems.match([pattern])
    except Exception as e:  # BeamIOError and the filesystems' own errors
        raise CorpusError(f"Input pattern {pattern!r} cannot be listed: {e}") from e
    return sorted((m.path, m.size_in_bytes) for m in result.metadata_list)


def _file_size(path: str) -> int:
    if not is_url(path):
        return os.path.getsize(path)
    matched = _match(path)
    if not matched:
        raise CorpusError(f"{path}: no such file")
    return matched[0][1]


def expand_input_files(patterns: str | list[str]) -> list[str]:
    """Files matching comma-separated glob patterns, in pattern order, each sorted.

    Raises ``CorpusError`` when a pattern matches nothing (a typo should not silently
    shrink the corpus) or when no pattern is given.
    """
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",")]
    patterns = [p.strip() for p in patterns if p and p.strip()]
    if not patterns:
        raise CorpusError("No input file pattern given (--input_file is empty)")
    files: list[str] = []
    seen = set()
    for pattern in patterns:
        matched = [path for path, _ in _match(pattern)]
        if not matched:
            raise CorpusError(f"No file matches the input pattern {pattern!r}")
        for path in matched:
            if path not in seen:
                seen.add(path)
                files.append(path)
    return files


def _compression_of(head: bytes) -> str | None:
    if head.startswith(b"BZh"):
        return "bz2"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    return None


def _decompressed(raw, compression: str | None):
    """A reader of the decompressed bytes of the binary file object `raw`."""
    if compression == "bz2":
        return bz2.BZ2File(raw, "rb")
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "xz":
        return lzma.LZMAFile(raw, "rb")
    return raw


_XML_PROLOG = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*<mediawiki[\s>]", re.S
)
_UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def _encoding_of(path: str, head: bytes) -> str:
    """The text encoding of a (decompressed) file from its first bytes: "utf-16" when a
    UTF-16 byte-order mark starts it, else "utf-8"; UTF-32 and UTF-16 without the mark
    are refused in words that name them (rather than "looks binary")."""
    if head.startswith(_UTF32_BOMS):
        raise CorpusError(
            f"{path}: UTF-32 text is not supported; convert it to UTF-8 (iconv -f UTF-32 -t UTF-8)"
        )
    if head.startswith(_UTF16_BOMS):
        return "utf-16"
    even, odd = head[0::2], head[1::2]
    if b"\x00" in head:
        # UTF-16 puts the NUL high byte of ASCII characters (spaces, digits, markup) at
        # one parity only: last in little-endian order (LE), first in big-endian (BE).
        for order, high, low in (("LE", odd, even), ("BE", even, odd)):
            if high.count(0) >= 0.1 * len(high) and low.count(0) <= 0.01 * len(low):
                raise CorpusError(
                    f"{path}: looks like UTF-16{order} text without a byte-order mark; "
                    f"convert it to UTF-8 (iconv -f UTF-16{order} -t UTF-8)"
                )
    return "utf-8"


def sniff_input_file(path: str) -> InputFile:
    """Format, compression and text encoding of `path`, from its content.

    Raises ``CorpusError`` for a file that is neither UTF-8 (or UTF-16 with a
    byte-order mark) text nor a dump.
    """
    with open_binary(path) as f:
        magic = f.read(8)
    if magic.startswith(b"\x28\xb5\x2f\xfd"):
        raise CorpusError(f"{path}: zstd-compressed input is not supported; decompress it first")
    if magic.startswith(b"PK\x03\x04"):
        raise CorpusError(f"{path}: zip archives are not supported; extract the text files")
    compression = _compression_of(magic)
    try:
        with open_binary(path) as raw, _decompressed(raw, compression) as f:
            head = f.read(_SNIFF_BYTES)
    except EOFError as e:
        raise CorpusError(
            f"{path}: the {compression} stream ends early (truncated file?): {e}"
        ) from e
    except (OSError, lzma.LZMAError) as e:
        raise CorpusError(f"{path}: cannot read {compression or 'file'}: {e}") from e
    encoding = _encoding_of(path, head)
    if encoding != "utf-8":
        # The first bytes as UTF-8, for the XML test (an odd last byte is dropped).
        head = head[: len(head) - len(head) % 2].decode(encoding, "ignore").encode("utf-8")
    if _XML_PROLOG.match(head):
        kind = MEDIAWIKI
    else:
        if b"\x00" in head:
            raise CorpusError(
                f"{path}: looks binary (NUL bytes in the first {len(head)} bytes), neither "
                "UTF-8 text nor a MediaWiki XML dump"
            )
        kind = TEXT
    return InputFile(path, kind, compression, _file_size(path), encoding)


class _Utf8Reader(io.RawIOBase):
    """The UTF-8 bytes of a binary stream in another encoding (UTF-16: its byte-order
    mark decides the byte order). An invalid code unit becomes U+FFFD, which the
    tokenizer's cleaning drops."""

    def __init__(self, raw, encoding: str):
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self._pending = b""

    def readable(self):
        return True

    def readinto(self, buffer):
        while not self._pending:
            data = self._raw.read(1 << 16)
            self._pending = self._decoder.decode(data, final=not data).encode("utf-8")
            if not data:
                break
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


class _CountingReader(io.RawIOBase):
    """Counts bytes read from the underlying (compressed) file, for progress."""

    def __init__(self, raw):
        self._raw = raw
        self.bytes_read = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        if hasattr(self._raw, "readinto"):
            n = self._raw.readinto(buffer)
        else:  # some filesystems' readers only read()
            data = self._raw.read(len(buffer))
            n = len(data)
            buffer[:n] = data
        self.bytes_read += n or 0
        return n


def _open_counting(input_file: InputFile):
    raw = open_binary(input_file.path)
    counter = _CountingReader(raw)
    buffered = io.BufferedReader(counter, buffer_size=1 << 20)
    return _decompressed(buffered, input_file.compression), counter, raw


def iter_text_documents(
    input_file: InputFile,
    stats: CorpusStats,
    max_document_chars: int | None = None,
    progress: list | None = None,
) -> Iterator[RawDocument]:
    """Documents of a plain-text file: runs of non-blank lines between blank lines.

    A document longer than ``max_document_chars`` is cut into parts of about that
    size (between lines; counted in ``stats.split_documents``), so a file without
    blank lines cannot fill the memory. ``progress``, when given, is a one-element
    list updated with the compressed bytes read so far.
    """
    path = input_file.path
    stream, counter, raw = _open_counting(input_file)
    if input_file.encoding != "utf-8":
        stream = io.BufferedReader(_Utf8Reader(stream, input_file.encoding), 1 << 16)
    lines: list[str] = []
    first_line = 0
    chars = 0
    number = 0
    try:
        with raw, stream:
            while True:
                try:
                    line_bytes = stream.readline()
                except EOFError as e:
                    raise CorpusError(
                        f"{path}: the {input_file.compression} stream ends early after line "
                        f"{number} (truncated file?): {e}"
                    ) from e
                if not line_bytes:
                    break
                number += 1
                try:
                    line = line_bytes.decode("utf-8")
                except UnicodeDecodeError as e:
                    stats.invalid_utf8_lines += 1
                    if stats.invalid_utf8_lines <= _LOGGED_PROBLEMS:
                        logging.warning(
                            "%s:%d: invalid UTF-8 (%s); the bad bytes are dropped, as the "
                            "original does",
                            path,
                            number,
                            e.reason,
                        )
                    line = line_bytes.decode("utf-8", "ignore")
                if number == 1:
                    line = line.lstrip("\ufeff")  # a UTF-8 byte-order mark starts no word
                line = line.strip()
                if progress is not None:
                    progress[0] = counter.bytes_read
                if not line:
                    if lines:
                        stats.documents += 1
                        yield RawDocument(path, lines=lines, first_line=first_line)
                    lines, chars = [], 0
                    continue
                if not lines:
                    first_line = number
                lines.append(line)
                chars += len(line)
                if max_document_chars and chars >= max_document_chars:
                    stats.documents += 1
                    stats.split_documents += 1
                    yield RawDocument(path, lines=lines, first_line=first_line)
                    lines, chars = [], 0
            if lines:
                stats.documents += 1
                yield RawDocument(path, lines=lines, first_line=first_line)
    finally:
        stats.lines += number
        stats.files += 1
        stats.input_bytes += input_file.size


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


_REDIRECT_TEXT = re.compile(r"\s*#REDIRECT", re.I)


def iter_mediawiki_pages(
    input_file: InputFile, stats: CorpusStats, progress: list | None = None
) -> Iterator[RawDocument]:
    """Articles of a MediaWiki XML dump: namespace 0, redirects skipped (counted).

    Pages without an ``<ns>`` element (very old dumps) are classified by their
    title's prefix against the dump's own ``<namespaces>`` list.
    """
    path = input_file.path
    stream, counter, raw = _open_counting(input_file)
    namespace_prefixes: set[str] = set()
    pages = 0
    try:
        with raw, stream:
            root = None
            events = ET.iterparse(stream, events=("start", "end"))
            try:
                for event, element in events:
                    if root is None:
                        root = element
                    if event != "end":
                        continue
                    tag = _local(element.tag)
                    if tag == "namespace" and element.text:
                        namespace_prefixes.add(element.text.strip().lower() + ":")
                    elif tag == "page":
                        pages += 1
                        stats.pages += 1
                        title, namespace, text, redirect = "", None, "", False
                        for child in element:
                            child_tag = _local(child.tag)
                            if child_tag == "title":
                                title = child.text or ""
                            elif child_tag == "ns":
                                namespace = (child.text or "").strip()
                            elif child_tag == "redirect":
                                redirect = True
                            elif child_tag == "revision":
                                for part in child:
                                    if _local(part.tag) == "text":
                                        text = part.text or ""
                        root.clear()
                        if progress is not None:
                            progress[0] = counter.bytes_read
                        if namespace is None:
                            lowered = title.lower()
                            is_article = not any(lowered.startswith(p) for p in namespace_prefixes)
                        else:
                            is_article = namespace == "0"
                        if not is_article:
                            stats.non_article_pages += 1
                            continue
                        if redirect or _REDIRECT_TEXT.match(text):
                            stats.redirect_pages += 1
                            continue
                        stats.documents += 1
                        yield RawDocument(path, wikitext=text, title=title)
            except EOFError as e:
                raise CorpusError(
                    f"{path}: the {input_file.compression} stream ends early after {pages} "
                    f"complete pages (truncated download?): {e}"
                ) from e
            except ET.ParseError as e:
                line, column = e.position
                ends_early = "no element found" in str(e) or "unclosed token" in str(e)
                hint = " (the XML ends early: truncated file?)" if ends_early else ""
                raise CorpusError(
                    f"{path}: malformed XML at line {line}, column {column}{hint} after "
                    f"{pages} complete pages: {e}"
                ) from e
    finally:
        stats.files += 1
        stats.input_bytes += input_file.size


def iter_documents(
    input_files: list[InputFile],
    stats: CorpusStats,
    max_document_chars: int | None = None,
    progress: list | None = None,
) -> Iterator[RawDocument]:
    """Documents of every input file in order; each file starts a new document.

    (The original reads files back to back, so a file not ending in a blank line
    continues into the next file's first document; here a file boundary always ends
    a document.) ``progress``, when given, is a one-element list holding the
    compressed bytes of all input read so far.
    """
    done = 0
    for input_file in input_files:
        local = [0] if progress is not None else None
        documents = iter_file_documents(input_file, stats, max_document_chars, local)
        for document in documents:
            if progress is not None:
                progress[0] = done + local[0]
            yield document
        done += input_file.size
        if progress is not None:
            progress[0] = done


def iter_file_documents(
    input_file: InputFile,
    stats: CorpusStats,
    max_document_chars: int | None = None,
    progress: list | None = None,
) -> Iterator[RawDocument]:
    """Documents of one input file, of either format (see ``iter_documents``)."""
    if input_file.format == MEDIAWIKI:
        return iter_mediawiki_pages(input_file, stats, progress)
    return iter_text_documents(input_file, stats, max_document_chars, progress)


def document_sentences(document: RawDocument) -> list[str]:
    """A document's sentences: a text file's lines, or an article's prose cleaned of its
    markup and split into sentences (``wikitext.wikitext_to_sentences``)."""
    if document.lines is not None:
        return document.lines
    from keras_bert_zoo.pretraining import wikitext

    return wikitext.wikitext_to_sentences(document.wikitext or "")


def iter_sentences(
    input_files: str | list[str] | list[InputFile],
    stats: CorpusStats | None = None,
    max_document_chars: int | None = 500_000,
) -> Iterator[str]:
    """Every sentence of the input, file after file, whatever the format: what
    ``tools/build_vocab.py`` learns a vocabulary from.

    Args:
        input_files: comma-separated glob patterns (or a list of them), or files
            already sniffed (``sniff_input_file``). Patterns are expanded and every
            file is sniffed before the first sentence is read, so a missing or
            unreadable file fails at once.
        stats: counts of what was read, updated as the files are read.
        max_document_chars: text documents longer than this are read in parts (a file
            without blank lines holds one document).

    Raises:
        CorpusError: see the module docstring (a truncated file fails where it ends).

    Example:

    ```python
    from keras_bert_zoo.pretraining.corpus import iter_sentences

    for sentence in iter_sentences("bgwiki-latest-pages-articles.xml.bz2"):
        ...
    ```
    """
    if isinstance(input_files, str) or any(isinstance(f, str) for f in input_files):
        input_files = [sniff_input_file(path) for path in expand_input_files(input_files)]
    stats = CorpusStats() if stats is None else stats
    for document in iter_documents(input_files, stats, max_document_chars):
        yield from document_sentences(document)
