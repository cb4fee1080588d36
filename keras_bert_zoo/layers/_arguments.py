"""The serialized config of this package's layers: their constructor's arguments."""

import functools
import inspect


@functools.cache
def _argument_names(layer_class: type) -> tuple[str, ...]:
    parameters = inspect.signature(layer_class.__init__).parameters.values()
    return tuple(
        parameter.name
        for parameter in parameters
        if parameter.name != "self"
        and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    )


def constructor_arguments(layer, exclude: tuple[str, ...] = ()) -> dict:
    """The named arguments of `type(layer).__init__`, in their order, read back from the
    attributes of the same names, for `get_config` to add to the base config.

    Every layer here keeps each argument as an attribute of that name, so the config
    cannot drift from the signature. `exclude` names the arguments that are not
    serializable (another layer, passed again when the owner is rebuilt).
    """
    return {
        name: getattr(layer, name) for name in _argument_names(type(layer)) if name not in exclude
    }
