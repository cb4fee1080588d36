"""Whether an export runs its encoder on the real tokens of a request only.

Models whose answers read the encoder at [CLS] only can be served padding-free (the
encoder runs on the real tokens of a request alone; `models.padding_free`), with answers
equal to the padded graph's to float rounding; their classes declare it
(`EncoderHeadModel.supports_padding_free_inference`). Heads that read every position
also expose the padded ones in `serve_ids`, so they keep the padded graph. Measured on
the served MiniLM classifier, raw movie-review sentences
(`benchmarks/serving_latency.py`, 2-core AVX512_BF16 CPU): batch 32 (~55% real tokens)
1.5x the padded export's throughput in bfloat16 and in float32; batch 1 (no padding to
skip: the padded graph runs it, behind a check) within 3% of the padded export's p50.
So `"auto"` takes it for these models in every precision.
"""

from __future__ import annotations

from keras_bert_zoo.models.head_model import head_models_with
from keras_bert_zoo.serving.exporter import Option
from keras_bert_zoo.utils.errors import UserError

PADDING_FREE_CAPABILITY = "supports_padding_free_inference"
PADDING_FREE_CHOICES = ("auto", "on", "off")

PADDING_FREE = Option(
    "padding_free",
    "auto",
    "Classifiers, regressors and multiple choice: run the encoder on the real tokens of a "
    "request only (faster batches of mixed lengths; a single request runs the padded "
    "graph); auto: on for those models, off for the others.",
    choices=PADDING_FREE_CHOICES,
)


def check_padding_free_choice(choice: str) -> str:
    if choice not in PADDING_FREE_CHOICES:
        raise UserError(
            f"padding_free must be one of {', '.join(PADDING_FREE_CHOICES)}; got {choice!r}"
        )
    return choice


def serves_padding_free(model, choice: str = "auto") -> bool:
    """Whether an export of `model` runs its encoder padding-free: what `choice`
    (`PADDING_FREE_CHOICES`) asks, where the model's class declares
    `supports_padding_free_inference` (a model that declares nothing, a bare
    `BertEncoder` included, does not).

    Raises:
        UserError: `choice` is `"on"` for a model that does not declare it.
    """
    supported = bool(getattr(type(model), PADDING_FREE_CAPABILITY, False))
    if check_padding_free_choice(choice) == "on" and not supported:
        raise UserError(
            f"padding_free='on' serves models that read the encoder at [CLS] only "
            f"({', '.join(m.__name__ for m in head_models_with(PADDING_FREE_CAPABILITY))}); "
            f"{type(model).__name__} reads every position"
        )
    if choice == "auto":
        return supported
    return choice == "on"
