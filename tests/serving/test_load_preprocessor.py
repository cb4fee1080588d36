"""One call for the preprocessing a model was trained with and for the model that serves
(issue 61, point 4): `keras_bert_zoo.load_preprocessor(name or directory)` and
`keras_bert_zoo.load_inference_model(fine-tuned directory)`."""

import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo
from keras_bert_zoo import tasks
from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.utils.errors import UserError

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "good", "bad"]
SENTENCES = [
    "The film was a gripping, beautifully acted thriller.",
    "Naïve café owners don't like São Paulo's 3.5% tax!",
    "",
    "A long review " + "that goes on and on " * 80,
]


def test_an_installed_checkpoint_by_name_packs_as_hugging_faces_tokenizer():
    from transformers import BertTokenizerFast

    preprocessor = keras_bert_zoo.load_preprocessor("all-MiniLM-L6-v2")
    # sentence-transformers' own length for MiniLM (sentence_bert_config.json).
    assert preprocessor.sequence_length == 256
    ours = {k: v.numpy() for k, v in preprocessor(tf.constant(SENTENCES)).items()}
    reference = BertTokenizerFast.from_pretrained(demo_model_dir())(
        SENTENCES, max_length=256, padding="max_length", truncation=True, return_tensors="np"
    )
    np.testing.assert_array_equal(ours["input_word_ids"], reference["input_ids"])
    np.testing.assert_array_equal(ours["input_mask"], reference["attention_mask"])
    np.testing.assert_array_equal(ours["input_type_ids"], reference["token_type_ids"])
    shorter = keras_bert_zoo.load_preprocessor(demo_model_dir(), max_seq_length=32)
    assert shorter.sequence_length == 32


@pytest.fixture(scope="module")
def finetuned_dirs(tmp_path_factory):
    """A text classifier and a sentence embedder, each saved as a fine-tuned directory
    (as the end of a run writes it: tasks.save_finetuned)."""
    root = tmp_path_factory.mktemp("one_call")
    data = root / "data"
    data.mkdir()
    (data / "train.tsv").write_text("text\tlabel\nthe film was good\tpos\nbad\tneg\n")
    tokenizer = BertTokenizer(VOCABULARY, lowercase=True)
    encoder = dict(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    classifier_task = tasks.create_task(
        "text_classification", data_dir=str(data), max_seq_length=12
    )
    classifier_task.read("train")
    from keras_bert_zoo.models import BertEncoder

    classifier = classifier_task.build_model(BertEncoder(vocab_size=10, **encoder))
    tasks.save_finetuned(str(root / "classifier"), classifier_task, classifier, tokenizer)
    embedding_task = tasks.create_task("sentence_embedding", max_seq_length=12)
    embedder = embedding_task.build_model(BertEncoder(vocab_size=10, **encoder))
    tasks.save_finetuned(str(root / "embedder"), embedding_task, embedder, tokenizer)
    return root


def test_a_finetuned_directory_gives_its_training_preprocessing(finetuned_dirs):
    preprocessor = keras_bert_zoo.load_preprocessor(str(finetuned_dirs / "classifier"))
    packed = preprocessor(tf.constant(["The film was GOOD", "bad bad"]))
    # The task's own packing at its length: [CLS] the words' ids [SEP], then padding.
    ids = {token: index for index, token in enumerate(VOCABULARY)}
    first = [2] + [ids[w] for w in "the film was good".split()] + [3]
    np.testing.assert_array_equal(packed["input_word_ids"][0], first + [0] * (12 - len(first)))
    np.testing.assert_array_equal(packed["input_mask"][1], [1] * 4 + [0] * 8)
    with pytest.raises(UserError, match="was trained at 12 tokens"):
        keras_bert_zoo.load_preprocessor(str(finetuned_dirs / "classifier"), max_seq_length=64)
    with pytest.raises(FileNotFoundError, match="no task.json or vocab.txt"):
        keras_bert_zoo.load_preprocessor(str(finetuned_dirs / "data"))


def test_the_inference_model_of_an_embedder_takes_ordinary_batches(finetuned_dirs):
    directory = str(finetuned_dirs / "embedder")
    model = keras_bert_zoo.load_inference_model(directory)
    preprocessor = keras_bert_zoo.load_preprocessor(directory)
    batch = {k: v.numpy() for k, v in preprocessor(tf.constant(["the film", "bad"] * 16)).items()}
    assert batch["input_word_ids"].shape == (32, 12)
    vectors = np.asarray(model.predict(batch, verbose=0)["embedding"])
    assert vectors.shape == (32, 16)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # The training model is another one: it takes groups of texts.
    assert tasks.load_finetuned(directory).model is not model
    # A classifier serves its trained model: logits of its two labels.
    classifier_dir = str(finetuned_dirs / "classifier")
    classifier = keras_bert_zoo.load_inference_model(classifier_dir)
    packed = keras_bert_zoo.load_preprocessor(classifier_dir)(tf.constant(["good", "bad"]))
    logits = np.asarray(classifier.predict({k: v.numpy() for k, v in packed.items()}, verbose=0))
    assert logits.shape == (2, 2)
