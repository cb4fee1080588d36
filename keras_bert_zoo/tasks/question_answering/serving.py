"""The exported answers of a question answering model, in TF ops:
`QuestionAnsweringTask.serving_outputs`.

The same `SquadPreprocessor` as in training windows the context, the model scores
the windows and `answers.decode_windows` reads the answers, all in one graph.

| name              | dtype  | shape     | what                                          |
|-------------------|--------|-----------|-----------------------------------------------|
| `answer_text`     | string | `[batch]` | the answer ("" for no answer)                 |
| `answer_start`    | int64  | `[batch]` | its first character in the context (-1: none) |
| `answer_end`      | int64  | `[batch]` | its end, exclusive (-1: none)                 |
| `answer_score`    | float  | `[batch]` | the best span's start + end logit             |
| `null_score_diff` | float  | `[batch]` | v2 only: null score - best non-null score     |
| `best_text`       | string | `[batch]` | v2 only: the best non-null span               |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def answer_fn(
    model,
    preprocessor,
    *,
    input_names: Sequence[str],
    decode: Callable,
    with_null_answer: bool,
) -> Callable:
    """`fn(question, context)` (string `[batch]` each) -> the answers, in TF ops.

    Args:
        model: the `BertSpanLabeler`.
        preprocessor: the task's `SquadPreprocessor`.
        input_names: the model's inputs among the windows' features.
        decode: `(windows, contexts) -> decoded answers`, the task's `decode`.
        with_null_answer: SQuAD v2.0 rules: the outputs add `null_score_diff` and
            `best_text`.

    Returns:
        The function the exported signature runs (see the module docstring).
    """
    input_names = tuple(input_names)

    def serve(question, context):
        windows = preprocessor({"question": question, "context": context})
        logits = model({name: windows[name] for name in input_names}, training=False)
        decoded = decode({**windows, **logits}, context)
        outputs = {
            "answer_text": decoded["answer_text"],
            "answer_start": decoded["answer_start"],
            "answer_end": decoded["answer_end"],
            "answer_score": decoded["best_score"],
        }
        if with_null_answer:
            outputs["null_score_diff"] = decoded["null_score_diff"]
            outputs["best_text"] = decoded["best_text"]
        return outputs

    return serve
