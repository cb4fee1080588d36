"""The command-line tools, also as a package of the installed wheel.

`setup.py` installs this directory as `keras_bert_zoo.tools`: after `pip install`
(from a wheel, without the repository) every tool runs as a console script,
`keras-bert-zoo-<tool>` (`keras-bert-zoo-run-finetuning --helpfull`), or as
`python -m keras_bert_zoo.tools.<tool>`. In a clone, `python tools/<tool>.py` runs the
same module. Each tool is thin: it parses flags and calls the library.

Each starts the same way in all three forms (`keras_bert_zoo.utils.startup`): before
TensorFlow loads, its command line is checked against `flag_definitions.json` (the
tools' flags, written by `python -m keras_bert_zoo.utils.tool_flags --write tools`),
`--help` / `--helpfull` answer, and a tool that runs models chooses the CPU kernels.
"""

import pathlib

# Every program here (helpers would start with "_"): setup.py makes the same list.
TOOLS = tuple(sorted(path.stem for path in pathlib.Path(__file__).parent.glob("[a-z]*.py")))
