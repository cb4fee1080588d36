"""Shared serialization for task models that wrap a `BertEncoder`."""

import keras


class EncoderTask(keras.Model):
    """Base of the functional task models: stores the encoder and head arguments.

    Subclasses build their graph in `__init__` (keras-hub's functional-subclass
    pattern) and list their own constructor arguments in `_task_config()`.
    """

    def _task_config(self):
        raise NotImplementedError

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            **self._task_config(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
