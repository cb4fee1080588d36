"""The package's version: setup.py reads it from here, so that `keras_bert_zoo.__version__`
is the installed distribution's version (`importlib.metadata.version("keras_bert_zoo")`)."""

__version__ = "0.1.0"
