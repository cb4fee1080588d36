"""A single-process port of google-research/bert's create_pretraining_data.py.

The baseline of ``benchmarks/pretraining_data_throughput.py`` and the "records written
by the original" of the format-compatibility test. Restated from the original
algorithm (not copied): the same flags and defaults, the same pure-Python WordPiece
tokenizer (``BasicTokenizer`` then ``WordpieceTokenizer``), every document held in
memory, one ``random.Random(random_seed)`` driving every decision in the original's
order, every instance held in memory and shuffled once, then written round-robin over
the output files with ``tf.train.Example``. It is deliberately NOT part of the library:
it is the slow reference that ``keras_bert_zoo.pretraining`` is measured against.

Two details of the original kept on purpose:

* documents continue across input files (only blank lines separate documents);
* ``do_whole_word_mask`` groups ``##`` pieces with the piece before them, but the
  80/10/10 choice is still drawn per piece.

Usage (flags as in the original):
    python benchmarks/_original_create_pretraining_data.py --input_file=corpus.txt \
        --output_file=out.tfrecord --vocab_file=vocab.txt [--do_lower_case] \
        [--max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 \
         --short_seq_prob=0.1 --dupe_factor=10 --random_seed=12345 --do_whole_word_mask]
"""

from __future__ import annotations

import collections
import glob
import random
import unicodedata

# --------------------------------------------------------------------------- tokenizer


def _is_whitespace(char):
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk_ideograph(code):
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


class BasicTokenizer:
    """Cleaning, CJK spacing, lower-casing + accent stripping, punctuation splitting."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        kept = []
        for char in text:
            code = ord(char)
            if code == 0 or code == 0xFFFD or _is_control(char):
                continue
            if _is_whitespace(char):
                kept.append(" ")
            elif _is_cjk_ideograph(code):
                kept.extend((" ", char, " "))
            else:
                kept.append(char)
        words = []
        for token in "".join(kept).strip().split():
            if self.do_lower_case:
                token = token.lower()
                token = "".join(
                    c
                    for c in unicodedata.normalize("NFD", token)
                    if unicodedata.category(c) != "Mn"
                )
            words.extend(self._split_punctuation(token))
        return " ".join(words).strip().split()

    @staticmethod
    def _split_punctuation(token):
        pieces = []
        start_new_word = True
        for char in token:
            if _is_punctuation(char):
                pieces.append(char)
                start_new_word = True
            elif start_new_word:
                pieces.append(char)
                start_new_word = False
            else:
                pieces[-1] += char
        return pieces


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece; unmatchable or over-long words -> [UNK]."""

    # 200 as in google-research/bert's tokenization.py (100 is Hugging Face's port).
    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        output = []
        for word in text.strip().split():
            if len(word) > self.max_input_chars_per_word:
                output.append(self.unk_token)
                continue
            pieces = []
            start = 0
            while start < len(word):
                end = len(word)
                match = None
                while start < end:
                    candidate = word[start:end]
                    if start > 0:
                        candidate = "##" + candidate
                    if candidate in self.vocab:
                        match = candidate
                        break
                    end -= 1
                if match is None:
                    pieces = None
                    break
                pieces.append(match)
                start = end
            output.extend(pieces if pieces is not None else [self.unk_token])
        return output


def load_vocab(vocab_file):
    vocab = collections.OrderedDict()
    with open(vocab_file, encoding="utf-8") as f:
        for index, line in enumerate(f):
            vocab[line.strip()] = index
    return vocab


class FullTokenizer:
    def __init__(self, vocab_file, do_lower_case=True):
        self.vocab = load_vocab(vocab_file)
        self.basic = BasicTokenizer(do_lower_case)
        self.wordpiece = WordpieceTokenizer(self.vocab)

    def tokenize(self, text):
        return [
            piece for word in self.basic.tokenize(text) for piece in self.wordpiece.tokenize(word)
        ]

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]


# --------------------------------------------------------------------------- algorithm


class TrainingInstance:
    def __init__(self, tokens, segment_ids, masked_lm_positions, masked_lm_labels, is_random_next):
        self.tokens = tokens
        self.segment_ids = segment_ids
        self.masked_lm_positions = masked_lm_positions
        self.masked_lm_labels = masked_lm_labels
        self.is_random_next = is_random_next


def create_training_instances(
    input_files,
    tokenizer,
    max_seq_length,
    dupe_factor,
    short_seq_prob,
    masked_lm_prob,
    max_predictions_per_seq,
    rng,
    do_whole_word_mask=False,
):
    """All instances of all input files, shuffled; every document is held in memory."""
    all_documents = [[]]
    for input_file in input_files:
        with open(input_file, "rb") as reader:
            for raw in reader:
                line = raw.decode("utf-8", "ignore").strip()
                if not line:
                    all_documents.append([])
                tokens = tokenizer.tokenize(line)
                if tokens:
                    all_documents[-1].append(tokens)
    all_documents = [d for d in all_documents if d]
    rng.shuffle(all_documents)

    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(all_documents)):
            instances.extend(
                create_instances_from_document(
                    all_documents,
                    document_index,
                    max_seq_length,
                    short_seq_prob,
                    masked_lm_prob,
                    max_predictions_per_seq,
                    vocab_words,
                    rng,
                    do_whole_word_mask,
                )
            )
    rng.shuffle(instances)
    return instances


def create_instances_from_document(
    all_documents,
    document_index,
    max_seq_length,
    short_seq_prob,
    masked_lm_prob,
    max_predictions_per_seq,
    vocab_words,
    rng,
    do_whole_word_mask=False,
):
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3  # [CLS] A [SEP] B [SEP]
    # Usually fill the sequence; sometimes (short_seq_prob) aim shorter, to look like
    # fine-tuning inputs. The target is soft; max_num_tokens is the hard limit.
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])

                tokens_b = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    # Ten tries to pick another document (a one-document corpus keeps
                    # its own).
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    # The segments of the chunk that B did not use go back to the queue.
                    i -= len(current_chunk) - a_end
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                assert len(tokens_a) >= 1 and len(tokens_b) >= 1

                tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, positions, labels = create_masked_lm_predictions(
                    tokens,
                    masked_lm_prob,
                    max_predictions_per_seq,
                    vocab_words,
                    rng,
                    do_whole_word_mask,
                )
                instances.append(
                    TrainingInstance(tokens, segment_ids, positions, labels, is_random_next)
                )
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def create_masked_lm_predictions(
    tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng, do_whole_word_mask=False
):
    candidates = []
    for index, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if do_whole_word_mask and candidates and token.startswith("##"):
            candidates[-1].append(index)
        else:
            candidates.append([index])
    rng.shuffle(candidates)

    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    masked = []  # (index, original token)
    covered = set()
    for index_set in candidates:
        if len(masked) >= num_to_predict:
            break
        # A whole word that would overshoot the budget is skipped, not cut.
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                replacement = "[MASK]"
            elif rng.random() < 0.5:
                replacement = tokens[index]
            else:
                replacement = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = replacement
            masked.append((index, tokens[index]))
    masked.sort(key=lambda pair: pair[0])
    return output_tokens, [p for p, _ in masked], [t for _, t in masked]


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Trims the longer list (B on ties), one token at a time, from a random end."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


# ------------------------------------------------------------------------------ output


def write_instance_to_example_files(
    instances, tokenizer, max_seq_length, max_predictions_per_seq, output_files
):
    import tensorflow as tf

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    def float_feature(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))

    writers = [tf.io.TFRecordWriter(path) for path in output_files]
    for index, instance in enumerate(instances):
        input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
        input_mask = [1] * len(input_ids)
        segment_ids = list(instance.segment_ids)
        padding = max_seq_length - len(input_ids)
        input_ids += [0] * padding
        input_mask += [0] * padding
        segment_ids += [0] * padding
        positions = list(instance.masked_lm_positions)
        ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
        weights = [1.0] * len(ids)
        padding = max_predictions_per_seq - len(positions)
        positions += [0] * padding
        ids += [0] * padding
        weights += [0.0] * padding
        features = collections.OrderedDict()
        features["input_ids"] = int_feature(input_ids)
        features["input_mask"] = int_feature(input_mask)
        features["segment_ids"] = int_feature(segment_ids)
        features["masked_lm_positions"] = int_feature(positions)
        features["masked_lm_ids"] = int_feature(ids)
        features["masked_lm_weights"] = float_feature(weights)
        features["next_sentence_labels"] = int_feature([1 if instance.is_random_next else 0])
        example = tf.train.Example(features=tf.train.Features(feature=features))
        writers[index % len(writers)].write(example.SerializeToString())
    for writer in writers:
        writer.close()
    return len(instances)


def run(
    input_file,
    output_file,
    vocab_file,
    do_lower_case=True,
    do_whole_word_mask=False,
    max_seq_length=128,
    max_predictions_per_seq=20,
    random_seed=12345,
    dupe_factor=10,
    masked_lm_prob=0.15,
    short_seq_prob=0.1,
):
    """The original's main(): returns the number of instances written."""
    tokenizer = FullTokenizer(vocab_file, do_lower_case)
    input_files = []
    for pattern in input_file.split(","):
        input_files.extend(sorted(glob.glob(pattern)))
    rng = random.Random(random_seed)
    instances = create_training_instances(
        input_files,
        tokenizer,
        max_seq_length,
        dupe_factor,
        short_seq_prob,
        masked_lm_prob,
        max_predictions_per_seq,
        rng,
        do_whole_word_mask,
    )
    return write_instance_to_example_files(
        instances, tokenizer, max_seq_length, max_predictions_per_seq, output_file.split(",")
    )


def main(argv):
    del argv
    from absl import flags

    f = flags.FLAGS
    written = run(
        f.input_file,
        f.output_file,
        f.vocab_file,
        f.do_lower_case,
        f.do_whole_word_mask,
        f.max_seq_length,
        f.max_predictions_per_seq,
        f.random_seed,
        f.dupe_factor,
        f.masked_lm_prob,
        f.short_seq_prob,
    )
    print(f"Wrote {written} total instances")


if __name__ == "__main__":
    from absl import app, flags

    flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated globs).")
    flags.DEFINE_string("output_file", None, "Output TFRecord file (or comma-separated files).")
    flags.DEFINE_string("vocab_file", None, "The vocabulary file.")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
    flags.DEFINE_bool("do_whole_word_mask", False, "Whole word masking.")
    flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked LM predictions.")
    flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
    flags.DEFINE_integer("dupe_factor", 10, "Times to duplicate the input with new masks.")
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
    flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length.")
    flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])
    app.run(main)
