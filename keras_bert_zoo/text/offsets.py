"""Character offsets of tokens and words: byte offsets into UTF-8 -> code point indices.

The tokenizer gives byte offsets (`BertTokenizer.tokenize_with_offsets`); answers give
character offsets, which index the text as a Python `str` does. `valid_utf8` makes a
text valid first, the way a server takes any bytes; `char_offsets` maps byte offsets
into it to characters for a whole batch at once.

Example:

```python
import tensorflow as tf
from keras_bert_zoo.text.offsets import char_offsets, valid_utf8

text = valid_utf8(tf.constant(["Café au lait"]))
(starts,) = char_offsets(text, tf.ragged.constant([[0, 6, 9]], tf.int64))
# [[0, 5, 8]]: "é" is two bytes, one character
```
"""

from __future__ import annotations

import tensorflow as tf


def valid_utf8(strings):
    """`strings` with every invalid UTF-8 sequence replaced by U+FFFD.

    TF decodes invalid bytes as Python's `bytes.decode("utf-8", errors="replace")`
    does (one U+FFFD per maximal invalid subpart), so character offsets into the
    result are Python string indices into the replaced text.
    """
    return tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def char_offsets(strings, *byte_offsets):
    """Byte offsets into valid UTF-8 `strings` -> character (code point) offsets.

    Args:
        strings: string tensor `[batch]` (valid UTF-8: see `valid_utf8`).
        *byte_offsets: int `tf.RaggedTensor`s `[batch, (n)]`, each offset at a
            character boundary of its row's string (or at its end).

    Returns:
        A tuple with one int64 `tf.RaggedTensor` per `byte_offsets` argument, shaped
        like it. The strings are decoded once for all of them.
    """
    # (An invalid byte sequence, if any, counts as one character, as `valid_utf8`
    # would make it.)
    _, char_bytes = tf.strings.unicode_decode_with_offsets(
        strings, "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    # All rows on one sorted axis (each row's bytes after the previous row's), so one
    # searchsorted maps the whole batch.
    row_base = tf.cumsum(tf.cast(tf.strings.length(strings), tf.int64), exclusive=True)
    global_char_bytes = tf.cast(char_bytes.flat_values, tf.int64) + tf.gather(
        row_base, char_bytes.value_rowids()
    )

    def to_chars(offsets):
        rows = offsets.value_rowids()
        wanted = tf.cast(offsets.flat_values, tf.int64) + tf.gather(row_base, rows)
        index = tf.searchsorted(global_char_bytes[tf.newaxis], wanted[tf.newaxis], side="left")[0]
        return offsets.with_flat_values(
            tf.cast(index, tf.int64) - tf.gather(char_bytes.row_starts(), rows)
        )

    return tuple(to_chars(offsets) for offsets in byte_offsets)
