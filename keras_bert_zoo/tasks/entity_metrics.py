"""Deprecated alias: entity-level precision, recall and F1 moved to
`keras_bert_zoo.tasks.tagging.metrics` (see its docstring for the semantics).

`keras_bert_zoo.tasks.entity_metrics.X` still works for one release and warns (the
API-changes table (docs/api-changes.md)).
"""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(__name__, ["keras_bert_zoo.tasks.tagging.metrics"])
