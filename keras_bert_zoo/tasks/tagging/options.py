"""The settings of the tagging tasks (`TaskOption`s)."""

from __future__ import annotations

from keras_bert_zoo.tasks.task import TaskOption

TAG_SCHEME_OPTION = TaskOption(
    "tag_scheme",
    "auto",
    "Tag scheme of the data for the strict-IOB2 figures: IOB1, IOB2, raw (tags without "
    "B-/I- prefixes) or auto (detected from the gold tags).",
    choices=("auto", "IOB1", "IOB2", "raw"),
)
WINDOW_STRIDE_OPTION = TaskOption(
    "window_stride",
    64,
    "WordPieces between the starts of consecutive windows of a sentence longer than "
    "max_seq_length - 2 pieces (capped at that length: no overlap).",
)
WORD_COLUMN_OPTION = TaskOption(
    "word_column", 0, "Column of the word (0-based; negative from the end)."
)
TAG_COLUMN_OPTION = TaskOption(
    "tag_column", -1, "Column of the tag (0-based; negative from the end)."
)
COLUMN_DELIMITER_OPTION = TaskOption(
    "column_delimiter",
    "auto",
    "Column separator: space (runs of spaces and tabs; lines may mix them), tab, "
    "or auto (tab if the first word line holds one and a field holds a space).",
    choices=("auto", "space", "tab"),
)
TAG_SET_OPTION = TaskOption(
    "tag_set",
    None,
    "Comma-separated tags in label order; default: those of the training file.",
)

# `token_classification`'s options: the scheme, the windows and the column files'
# layout (`conll2003` fixes the layout and the tags: the first two only).
TOKEN_CLASSIFICATION_OPTIONS = (
    TAG_SCHEME_OPTION,
    WINDOW_STRIDE_OPTION,
    WORD_COLUMN_OPTION,
    TAG_COLUMN_OPTION,
    COLUMN_DELIMITER_OPTION,
    TAG_SET_OPTION,
)
