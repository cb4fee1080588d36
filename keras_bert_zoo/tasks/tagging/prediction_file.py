"""A tagging task's predictions as conlleval's input: `TokenClassificationTask.write_predictions`.

One line per original word, `word gold predicted` (`word predicted` for an unlabelled
split), space-separated (tab-separated when a word holds a space), a blank line after
each sentence, and each `-DOCSTART-` line of the input written back as
`-DOCSTART- O O` followed by a blank line. Score it with `conlleval <
predictions_dev.txt` (add `-d "\\t"` for a tab-separated file).
"""

from __future__ import annotations

from collections.abc import Sequence

from keras_bert_zoo.tasks.tagging.metrics import OUTSIDE
from keras_bert_zoo.tasks.tagging.reader import DOCUMENT_START, TaggedSentence
from keras_bert_zoo.utils.atomic import atomic_open
from keras_bert_zoo.utils.errors import UserError


def write_conll_predictions(
    answers: Sequence[Sequence[str]], examples: Sequence[TaggedSentence], path: str
) -> str:
    """Writes `answers` (one tag per word of each example) to `path` as conlleval's
    input (see the module docstring), atomically.

    Returns:
        `path`.

    Raises:
        UserError: not one answer per example, or not one tag per word.
    """
    if len(answers) != len(examples):
        raise UserError(f"{len(answers)} answers for {len(examples)} examples")
    labelled = all(example.tags is not None for example in examples)
    spaced = any(" " in word for example in examples for word in example.words)
    delimiter = "\t" if spaced else " "
    outside = [OUTSIDE] * (2 if labelled else 1)
    with atomic_open(path, encoding="utf-8") as f:
        for example, answer in zip(examples, answers, strict=True):
            if len(answer) != len(example.words):
                raise UserError(
                    f"{example.source}: {len(answer)} predicted tags for {len(example.words)} words"
                )
            for _ in range(example.documents_before):
                f.write(delimiter.join([DOCUMENT_START, *outside]) + "\n\n")
            for index, (word, predicted) in enumerate(zip(example.words, answer, strict=True)):
                columns = [word, example.tags[index], predicted] if labelled else [word, predicted]
                f.write(delimiter.join(columns) + "\n")
            f.write("\n")
    return path
