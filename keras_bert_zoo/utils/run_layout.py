"""The names of a run directory (`--output_dir`), in one place.

The trainer writes checkpoints, summaries and the best model there; the jobs write the
model of the run, its exports, evaluations and predictions; the weight-source resolver
reads them back. Each reads its names from here.

```
task.json / bert_config.json   the run's fingerprint (fine-tuning / pretraining)
checkpoints/ckpt-N/            training checkpoints (exact resume)
train/, eval/                  TensorBoard summaries
best/                          the best evaluated model, with metrics.json
finetuned/                     the model of the run, with metrics.json
export_google/, export_huggingface/   the checkpoint layouts
eval_results.json              the evaluations of the run
predictions/                   prediction files
```
"""

from keras_bert_zoo.utils.deprecation import moved_names

CHECKPOINTS_DIR = "checkpoints"
TRAIN_SUMMARIES_DIR = "train"
EVAL_SUMMARIES_DIR = "eval"
BEST_DIR = "best"
FINETUNED_DIR = "finetuned"
METRICS_FILE = "metrics.json"
EVAL_RESULTS_FILE = "eval_results.json"
PREDICTIONS_DIR = "predictions"
# A pretraining run's architecture (Google layout), its resume fingerprint.
CONFIG_FILE = "bert_config.json"
# The checkpoint layouts a run may write beside its model (`--checkpoint_layouts`).
CHECKPOINT_LAYOUTS = ("google", "huggingface")
EXPORT_DIRS = {"google": "export_google", "huggingface": "export_huggingface"}

# `EXPORT_FORMATS`, the old name of `CHECKPOINT_LAYOUTS`, for one release.
__getattr__ = moved_names(
    __name__, [], renamed={"EXPORT_FORMATS": (__name__, "CHECKPOINT_LAYOUTS")}
)
