"""Runners: the top floor, where jobs are run (Model Garden's `official/core` runner).

Only orchestration lives here: what a job reads, trains, evaluates and writes is asked
of the floors below (a task of `tasks/`, `data/`, `checkpoints/`, `training/`).

- `runner`: the one run skeleton (`Runner`, `Job`); `Runner.run()` dispatches every
  mode: `train`, `train_and_eval`, `eval`, `predict`, `export`. A new kind of job adds a
  `Job`, not a skeleton.
- `configs`: each job's settings (`FinetuningConfig`, `PretrainingConfig`), whose
  fields are the binaries' flags (`utils.settings`).
- `finetuning`: the fine-tuning job (`run_finetuning`): any registered task, every
  mode.
- `pretraining`: the pretraining job (`run_pretraining`): `tasks.pretraining`'s masked
  LM + NSP, in `train`, `eval` and `export` modes.
- `demo`: the main job (`run_demo`): MiniLM fine-tuned on gensim's movie reviews,
  exported and asked through TF Serving's SavedModel.
- `sources`: where initial weights come from (`resolve_weight_source`), one resolver
  for every job.
- `run_dir`: the run directory (resume fingerprint, `eval_results.json` history); its
  names are `utils.run_layout`'s.

The binaries in `tools/` parse flags and call these; nothing below this floor imports
it.
"""
