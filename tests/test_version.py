"""`keras_bert_zoo.__version__` is the installed distribution's version (setup.py reads
keras_bert_zoo/version.py)."""

import importlib.metadata


def test_version_is_the_installed_distributions():
    import keras_bert_zoo

    assert keras_bert_zoo.__version__ == importlib.metadata.version("keras_bert_zoo")
    assert "__version__" in keras_bert_zoo.__all__
