"""BERT pretraining data: static records and dynamic masking.

* ``create_pretraining_data`` (``creator``): raw text and MediaWiki dumps ->
  google-research/bert's pretraining TFRecords, with its algorithm and flags, on every
  core, streaming (``tools/create_pretraining_data.py`` is its command line).
* ``beam_pipeline.create_pretraining_data_on_beam``: the same records from an Apache
  Beam pipeline (DirectRunner, Dataflow, Flink, Spark; the ``beam`` extra, imported
  only from that module: ``--engine=beam``).
* ``learn_vocabulary`` (``vocabulary``): a WordPiece vocabulary learned from the same
  files, read by the same readers (``tools/build_vocab.py`` is its command line).
* ``dynamic_pretraining_dataset`` / ``remasked_pretraining_dataset`` (``dynamic``):
  the same batches built on the fly in ``tf.data`` with new masks every epoch.
* Training on them is a job of ``keras_bert_zoo.runners`` (``runners.pretraining``:
  ``run_pretraining``, ``tools/run_pretraining.py``); the names ``run_pretraining``,
  ``PretrainingConfig`` and ``PretrainingResult`` here are deprecated aliases of it.
* Building blocks: ``corpus`` (streaming readers, format and encoding detection, the
  sentences of any input: ``iter_sentences``), ``wikitext`` (markup stripping, sentence
  splitting in every script), ``instances`` (NSP pairs, packing, masking,
  padding as TF ops), ``writer`` (record encoding, atomic sharded writing).
"""

from keras_bert_zoo.data.pretraining_records import verify_pretraining_records
from keras_bert_zoo.pretraining.corpus import CorpusError, iter_sentences
from keras_bert_zoo.pretraining.creator import (
    CreationConfig,
    CreationSummary,
    create_pretraining_data,
    export_sentences,
)
from keras_bert_zoo.pretraining.dynamic import (
    dynamic_pretraining_dataset,
    remasked_pretraining_dataset,
)
from keras_bert_zoo.pretraining.instances import (
    create_pretraining_instances,
    create_segment_pairs,
)
from keras_bert_zoo.pretraining.vocabulary import LearnedVocabulary, learn_vocabulary
from keras_bert_zoo.pretraining.wikitext import (
    clean_wikitext,
    split_sentences,
    wikitext_to_sentences,
)
from keras_bert_zoo.pretraining.writer import ShardedRecordWriter, encode_pretraining_examples
from keras_bert_zoo.utils.deprecation import moved_names

__all__ = [
    "CorpusError",
    "CreationConfig",
    "CreationSummary",
    "LearnedVocabulary",
    "ShardedRecordWriter",
    "clean_wikitext",
    "create_pretraining_data",
    "create_pretraining_instances",
    "create_segment_pairs",
    "dynamic_pretraining_dataset",
    "encode_pretraining_examples",
    "export_sentences",
    "iter_sentences",
    "learn_vocabulary",
    "remasked_pretraining_dataset",
    "split_sentences",
    "verify_pretraining_records",
    "wikitext_to_sentences",
]


# Deprecated aliases of the pretraining job, which moved to runners/ (data creation
# never imports that floor: the names resolve when asked for).
__getattr__ = moved_names(
    __name__,
    ["keras_bert_zoo.runners.pretraining"],
    only=("PretrainingConfig", "PretrainingResult", "run_pretraining"),
)
