"""Runners: the top floor, where jobs are run (Model Garden's `official/core` runner).

- `runner`: the one run skeleton (`Runner`, `Job`): setup -> initial weights ->
  build -> compile -> `training.Trainer` with periodic evaluation -> final evaluation
  -> exports. A new kind of job adds a `Job`, not a skeleton.
- `finetuning`: the fine-tuning job (`run_finetuning`, `FinetuningConfig`): any
  registered task, in `train`, `train_and_eval`, `eval` and `predict` modes.
- `pretraining`: the pretraining job (`run_pretraining`, `PretrainingConfig`): masked
  LM + NSP on static records or on the fly, MLM/NSP evaluation.
- `demo`: the main job (`run_demo`): MiniLM fine-tuned on gensim's movie reviews,
  exported and asked through TF Serving's SavedModel.
- `sources`: where initial weights come from (`resolve_weight_source`), one resolver
  for every job.
- `run_dir`: the run directory (resume fingerprint, `eval_results.json` history,
  JSON-safe values, the Google / Hugging Face checkpoint exports).
- `flags`: the flag helpers the jobs' binaries share.

The binaries in `tools/` parse flags and call these; nothing below this floor imports
it.
"""
