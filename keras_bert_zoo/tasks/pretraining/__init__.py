"""Pretraining as a task: masked LM + next sentence prediction (BERT's objective).

The counterpart of Model Garden's `official/nlp/tasks/masked_lm.py`: the one place that
knows the pretraining input, model, loss and metrics, evaluation and exports; the job
(`runners.pretraining.PretrainingJob`) only orchestrates it. It is no fine-tuning
`Task` (nothing to read per split, no answers to post-process), so it is not
registered; it has the methods the job calls:

```
resolve_training_input(...) / resolve_record_input(...) -> the files and their lengths
pretraining_bert_config(...)                           -> the architecture
task = PretrainingTask(bert_config, ...)                  (or .from_settings(config, ...))
task.build_model(), compile_kwargs()                   -> BertPretrainer, its own loss
task.initialize(model, weights) / load_checkpoint(...) -> initial or trained weights
task.training_dataset_fn(files, batch_size, seed=)     -> records | remask_records | dynamic_text
task.evaluate(model, files, ...)                       -> the original's metric_fn values
task.vocabulary(), export(model, directory, layout)    -> vocab.txt, the exports
```

Inputs (`input_mode`): `records`, static pretraining TFRecords (ours or
google-research/bert's; their lengths read from them); `remask_records`, the same
records with fresh masks every pass; `dynamic_text`, raw text (one sentence a line,
blank lines between documents) with NSP pairs and masks made on the fly.

The pieces: `inputs` (the files and their lengths), `architecture` (the
`BertConfig`), `task` (`PretrainingTask`), `evaluation` (the original's metrics) and
`exports` (the checkpoint layouts with their vocabulary).
"""

from keras_bert_zoo.tasks.pretraining.architecture import (
    pretraining_bert_config,
    read_bert_config,
)
from keras_bert_zoo.tasks.pretraining.evaluation import evaluate_pretraining
from keras_bert_zoo.tasks.pretraining.exports import export_pretrained
from keras_bert_zoo.tasks.pretraining.inputs import (
    DEFAULT_DYNAMIC_MAX_PREDICTIONS,
    DEFAULT_DYNAMIC_MAX_SEQ_LENGTH,
    INPUT_MODES,
    PretrainingInput,
    resolve_record_input,
    resolve_training_input,
)
from keras_bert_zoo.tasks.pretraining.task import TASK_SETTINGS, PretrainingTask

__all__ = [
    "DEFAULT_DYNAMIC_MAX_PREDICTIONS",
    "DEFAULT_DYNAMIC_MAX_SEQ_LENGTH",
    "INPUT_MODES",
    "TASK_SETTINGS",
    "PretrainingInput",
    "PretrainingTask",
    "evaluate_pretraining",
    "export_pretrained",
    "pretraining_bert_config",
    "read_bert_config",
    "resolve_record_input",
    "resolve_training_input",
]
