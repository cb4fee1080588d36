"""A WordPiece vocabulary learned from the files the record creator reads.

``learn_vocabulary`` reads its input with the corpus readers of ``corpus`` (plain text,
MediaWiki XML dumps, bz2/gzip/xz-compressed, UTF-8 or UTF-16 with a byte-order mark:
detected by content) and learns from their sentences (``corpus.iter_sentences``: a text
file's lines, a dump's articles cleaned of their markup and split into sentences), so a
vocabulary and the records made with it see the same text. The sentences stream into
``text.vocab.build_vocab``: memory holds the word counts, not the corpus.

It is the library behind ``tools/build_vocab.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from keras_bert_zoo.pretraining import corpus
from keras_bert_zoo.text.vocab import DEFAULT_RESERVED_TOKENS, build_vocab

__all__ = ["LearnedVocabulary", "learn_vocabulary"]


@dataclasses.dataclass
class LearnedVocabulary:
    """A vocabulary and what it was learned from.

    Attributes:
        tokens: the reserved tokens, then single characters and ``##`` pieces.
        input_files: the files read, in order.
        sentences: the sentences learned from.
        corpus: what the readers read and skipped (pages, redirects, invalid UTF-8).
    """

    tokens: list[str]
    input_files: list[str]
    sentences: int
    corpus: corpus.CorpusStats

    def summary(self, output: str) -> str:
        """One line: what was written where, from what."""
        c = self.corpus
        articles = c.pages - c.redirect_pages - c.non_article_pages
        articles = f", {articles} MediaWiki article(s)" if c.pages else ""
        return (
            f"Wrote {len(self.tokens)} tokens learned from {self.sentences} sentences "
            f"({len(self.input_files)} file(s){articles}) to {output}"
        )


def learn_vocabulary(
    input_files: str | Sequence[str],
    vocab_size: int,
    lowercase: bool,
    reserved_tokens: Sequence[str] = DEFAULT_RESERVED_TOKENS,
    learn_params: dict | None = None,
) -> LearnedVocabulary:
    """Learns a BERT WordPiece vocabulary from text files and MediaWiki dumps.

    Args:
        input_files: comma-separated glob patterns, or a list of them (read as
            ``create_pretraining_data`` reads its ``--input_file``).
        vocab_size: int. Upper bound on the vocabulary size, reserved tokens included.
        lowercase: bool. An uncased vocabulary (lower-case, accents stripped after NFD:
            ``Той`` -> ``тои``); False keeps case and accents.
        reserved_tokens: tokens placed first, in this order.
        learn_params: extra arguments of the WordPiece learner (``text.vocab.build_vocab``).

    Returns:
        ``LearnedVocabulary``.

    Raises:
        corpus.CorpusError: a pattern matching no file, a file that is neither text nor
            a dump, a truncated compressed file (one line naming the file).

    Example:

    ```python
    from keras_bert_zoo.pretraining.vocabulary import learn_vocabulary
    from keras_bert_zoo.text import write_vocab

    learned = learn_vocabulary("bgwiki-latest-pages-articles.xml.bz2", 32000, lowercase=False)
    write_vocab("vocab.txt", learned.tokens)
    ```
    """
    import tensorflow as tf

    # Every file is found and sniffed before the first sentence is read.
    files = [corpus.sniff_input_file(p) for p in corpus.expand_input_files(input_files)]
    stats = corpus.CorpusStats()
    count = [0]
    failure: list[corpus.CorpusError] = []

    def sentences():
        # An error raised inside tf.data comes out as a TensorFlow error with a
        # traceback; the reader's own one-line error is raised once learning stopped.
        try:
            for sentence in corpus.iter_sentences(files, stats):
                count[0] += 1
                yield sentence
        except corpus.CorpusError as error:
            failure.append(error)

    dataset = tf.data.Dataset.from_generator(
        sentences, output_signature=tf.TensorSpec([], tf.string)
    )
    tokens = build_vocab(
        dataset,
        vocab_size=vocab_size,
        lowercase=lowercase,
        reserved_tokens=reserved_tokens,
        learn_params=learn_params,
    )
    if failure:
        raise failure[0]
    return LearnedVocabulary(tokens, [f.path for f in files], count[0], stats)
