"""Semantic search over a corpus of texts: embedding it, an index, re-ranking and hard
negatives.

Above the tasks and the exports (it embeds with a fine-tuned model, a
sentence-transformers checkpoint or a SavedModel, and re-ranks with a fine-tuned
sentence-pair task), below `runners/`; nothing under it imports it.

- `corpus`: corpus, queries and pairs files (BEIR's JSONL, TSV, CSV, lines).
- `embedders`: texts -> vectors from any of the three forms of a model.
- `index`: exact search (`tasks.sentence_embedding.metrics.exact_search`) and FAISS's
  approximate index, and the index directory `tools/index_corpus.py` writes.
- `answers`: a search's answers (the re-ranked head before the rest).
- `reranking`: a cross-encoder re-scoring a search's top-k.
- `mining`: hard negatives for a second round of training.
- `tool_flags`: the flags the search tools share (`--model`, `--batch_size`,
  `--max_seq_length`).
"""
