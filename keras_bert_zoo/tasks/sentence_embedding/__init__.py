"""Sentence embeddings (bi-encoders): training on pairs, triplets and scored pairs,
evaluation by STS and retrieval, serving raw text -> vector.

The task `sentence_embedding` (`task.SentenceEmbeddingTask`) over modules of one
concept: `options` (its settings), `reader` (the files: pairs, triplets, scored pairs,
BEIR retrieval files, texts to embed), `features` (texts packed alone, `[texts,
seq_len]` an example), `evaluation` (the metrics a split's data calls for),
`prediction_files` (the vectors written) and `metrics` (the STS correlations of
cosines with gold scores; retrieval over a corpus by exact search: MRR@10, nDCG@10,
Recall@1/10/100, MAP). The model is `keras_bert_zoo.models.BertSentenceEmbedder` (one
text a row) and `BertTextGroupEmbedder` (the texts of a training example), the losses
`keras_bert_zoo.models.embedding_losses`.
"""

from keras_bert_zoo.tasks.sentence_embedding import metrics
from keras_bert_zoo.tasks.sentence_embedding.metrics import (
    exact_search,
    relevance_by_index,
    relevant_ranks,
    retrieval_metrics,
    sts_metrics,
)
from keras_bert_zoo.tasks.sentence_embedding.reader import EmbeddingExample, EmbeddingFiles
from keras_bert_zoo.tasks.sentence_embedding.task import EmbeddingAnswer, SentenceEmbeddingTask

__all__ = [
    "EmbeddingAnswer",
    "EmbeddingExample",
    "EmbeddingFiles",
    "SentenceEmbeddingTask",
    "exact_search",
    "metrics",
    "relevance_by_index",
    "relevant_ranks",
    "retrieval_metrics",
    "sts_metrics",
]
