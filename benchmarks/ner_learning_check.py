"""NER learning check: fine-tune the real MiniLM BERT on real news text tagged by a
gazetteer, and measure entity F1 on held-out articles with entities never seen in
training.

Why the figure means something:

- Text: the 300 real news articles of gensim's `lee_background.cor` (Australian
  Broadcasting Corporation news, 2001; ~60k words), split into sentences and
  CoNLL-style words.
- Labels: a gazetteer written here (PER / LOC / ORG / MISC, CoNLL-2003's types, with
  aliases such as "Yasser Arafat" / "Arafat"), matched case-sensitively, longest match
  first, written as IOB2. The labels are a rule of the cased text, but MiniLM's
  vocabulary is uncased: the model never sees the capitals, so "President Bush" vs
  "bush fires" or "Mr Howard" vs "howard" (the name) must come from context.
- Split: whole articles. A random set of gazetteer entities (all aliases together) is
  held out, chosen greedily so that about 30% of the articles mention one; those
  articles are the test set, the others the training set. So every held-out entity is
  absent from the training text: recognizing it needs context ("Palestinian leader
  ...", "in ...") and what pretraining put in the encoder, not memory of the labels.
- Baselines, on the same test sentences: a memorizing tagger that knows every entity
  string labelled in training (matched case-insensitively, as an uncased model would
  see them), a per-word majority tag learned from training, and the model before
  fine-tuning. Memorization scores 0 recall on held-out entities by construction; the
  fine-tuned model's recall on them (and an overall F1 above the baselines) is the
  evidence that fine-tuning learned to tag, end to end through our reader, windowed
  WordPiece features, BertTokenClassifier head, loss, predictions and conlleval metric.
- Caveat: real names outside the gazetteer stay `O` in the gold labels, so a model that
  generalizes well is also charged false positives for them; precision is a lower bound.

Usage (from the repository root):

    PYTHONPATH=. python benchmarks/ner_learning_check.py            # a few minutes on CPU
    PYTHONPATH=. python benchmarks/ner_learning_check.py --quick    # 100 steps, 200 test sentences
    [--epochs 3 | --steps N] [--batch_size 16] [--learning_rate 2e-4] [--max_seq_length 64]
    [--model_dir DIR] [--output_dir DIR] [--seed 0]

Prints the split sizes, then a table of entity precision/recall/F1 (conlleval) and the
recall on held-out vs seen entities for each system, and the verdict lines.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import random
import re
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

# (type, aliases): one entity per entry; all aliases are held out or seen together.
GAZETTEER = [
    # People
    ("PER", ["Yasser Arafat", "Arafat"]),
    ("PER", ["Osama bin Laden", "bin Laden"]),
    ("PER", ["Ariel Sharon", "Sharon"]),
    ("PER", ["George W Bush", "George Bush", "Bush"]),
    ("PER", ["John Howard", "Howard"]),
    ("PER", ["Peter Hollingworth", "Hollingworth"]),
    ("PER", ["David Hicks", "Hicks"]),
    ("PER", ["Anthony Zinni", "Zinni"]),
    ("PER", ["Colin Powell", "Powell"]),
    ("PER", ["Shane Warne", "Warne"]),
    ("PER", ["Brett Lee"]),
    ("PER", ["Steve Waugh", "Mark Waugh", "Waugh"]),
    ("PER", ["Ricky Ponting", "Ponting"]),
    ("PER", ["Jason Gillespie", "Gillespie"]),
    ("PER", ["Andy Bichel", "Bichel"]),
    ("PER", ["Justin Langer", "Langer"]),
    ("PER", ["Matthew Hayden", "Hayden"]),
    ("PER", ["Adam Gilchrist", "Gilchrist"]),
    ("PER", ["Glenn McGrath", "McGrath"]),
    ("PER", ["Shaun Pollock", "Pollock"]),
    ("PER", ["Jacques Kallis", "Kallis"]),
    ("PER", ["Allan Donald"]),
    ("PER", ["Lance Klusener", "Klusener"]),
    ("PER", ["Mark Boucher", "Boucher"]),
    ("PER", ["Gary Kirsten", "Kirsten"]),
    ("PER", ["Shane Bond"]),
    ("PER", ["Lleyton Hewitt", "Hewitt"]),
    ("PER", ["Pat Rafter", "Rafter"]),
    ("PER", ["Simon Crean", "Crean"]),
    ("PER", ["Alexander Downer", "Downer"]),
    ("PER", ["Philip Ruddock", "Ruddock"]),
    ("PER", ["Daryl Williams"]),
    ("PER", ["Hamid Karzai", "Karzai"]),
    ("PER", ["Pervez Musharraf", "Musharraf"]),
    ("PER", ["Suharto"]),
    ("PER", ["Rudolph Giuliani", "Giuliani"]),
    ("PER", ["Henry Kissinger", "Kissinger"]),
    ("PER", ["Burhanuddin Rabbani", "Rabbani"]),
    ("PER", ["Zacarias Moussaoui", "Moussaoui"]),
    ("PER", ["Ahmed Yassin", "Yassin"]),
    ("PER", ["Peter Costello", "Costello"]),
    ("PER", ["Robert Hill"]),
    ("PER", ["Kieren Perkins", "Perkins"]),
    ("PER", ["Doug Cameron"]),
    ("PER", ["Martin Kingham", "Kingham"]),
    ("PER", ["Claire Richards"]),
    ("PER", ["Stuart MacGill", "MacGill"]),
    ("PER", ["Gul Agha"]),
    ("PER", ["Monica Seles", "Seles"]),
    ("PER", ["George Harrison", "Harrison"]),
    ("PER", ["Ray Hass"]),
    # Places
    ("LOC", ["Australia"]),
    ("LOC", ["Afghanistan"]),
    ("LOC", ["Sydney"]),
    ("LOC", ["United States", "US", "America"]),
    ("LOC", ["Pakistan"]),
    ("LOC", ["Israel"]),
    ("LOC", ["West Bank"]),
    ("LOC", ["Tora Bora"]),
    ("LOC", ["New South Wales", "NSW"]),
    ("LOC", ["India"]),
    ("LOC", ["Melbourne"]),
    ("LOC", ["South Africa"]),
    ("LOC", ["Kandahar"]),
    ("LOC", ["Adelaide"]),
    ("LOC", ["Gaza Strip", "Gaza City", "Gaza"]),
    ("LOC", ["Queensland"]),
    ("LOC", ["Kabul"]),
    ("LOC", ["New York"]),
    ("LOC", ["Britain", "United Kingdom"]),
    ("LOC", ["Washington"]),
    ("LOC", ["Perth"]),
    ("LOC", ["East Timor"]),
    ("LOC", ["South Australia"]),
    ("LOC", ["Brisbane"]),
    ("LOC", ["Middle East"]),
    ("LOC", ["Victoria"]),
    ("LOC", ["Nauru"]),
    ("LOC", ["New Zealand"]),
    ("LOC", ["Blue Mountains"]),
    ("LOC", ["Tasmania"]),
    ("LOC", ["Hobart"]),
    ("LOC", ["Jenin"]),
    ("LOC", ["Indonesia"]),
    ("LOC", ["Bonn"]),
    ("LOC", ["Zimbabwe"]),
    ("LOC", ["Ramallah"]),
    ("LOC", ["Interlaken"]),
    ("LOC", ["Argentina"]),
    ("LOC", ["Japan"]),
    ("LOC", ["Woomera"]),
    ("LOC", ["Kashmir"]),
    ("LOC", ["Europe"]),
    ("LOC", ["France"]),
    ("LOC", ["Switzerland"]),
    ("LOC", ["New Delhi", "Delhi"]),
    ("LOC", ["Canberra"]),
    ("LOC", ["Germany"]),
    ("LOC", ["Nablus"]),
    ("LOC", ["Jerusalem"]),
    ("LOC", ["Haifa"]),
    ("LOC", ["Northern Territory"]),
    ("LOC", ["Western Australia"]),
    ("LOC", ["Paris"]),
    ("LOC", ["Launceston"]),
    ("LOC", ["Jalalabad"]),
    ("LOC", ["Hume Highway"]),
    ("LOC", ["Illawarra"]),
    ("LOC", ["Christmas Island"]),
    ("LOC", ["Islamabad"]),
    ("LOC", ["London"]),
    ("LOC", ["Brazil"]),
    ("LOC", ["Jakarta"]),
    ("LOC", ["Goulburn"]),
    ("LOC", ["Miami"]),
    ("LOC", ["Darwin"]),
    ("LOC", ["Iraq"]),
    ("LOC", ["Canada"]),
    ("LOC", ["Port Augusta"]),
    ("LOC", ["Brussels"]),
    ("LOC", ["Cairns"]),
    ("LOC", ["Pennsylvania"]),
    ("LOC", ["Hill Top"]),
    ("LOC", ["Mittagong"]),
    ("LOC", ["Hunter Valley"]),
    ("LOC", ["Ganges"]),
    ("LOC", ["Saudi Arabia"]),
    ("LOC", ["Shoalhaven"]),
    ("LOC", ["Hornsby"]),
    ("LOC", ["Corowa"]),
    ("LOC", ["Palmerston"]),
    ("LOC", ["Paktika"]),
    ("LOC", ["Mt Gambier", "Mount Gambier"]),
    ("LOC", ["Indian Ocean"]),
    ("LOC", ["Pacific"]),
    ("LOC", ["Russia"]),
    ("LOC", ["China"]),
    ("LOC", ["Egypt"]),
    ("LOC", ["Iran"]),
    # Organizations
    ("ORG", ["Taliban"]),
    ("ORG", ["Al Qaeda", "al Qaeda"]),
    ("ORG", ["Hamas"]),
    ("ORG", ["Qantas"]),
    ("ORG", ["Pentagon"]),
    ("ORG", ["Palestinian Authority"]),
    ("ORG", ["Northern Alliance"]),
    ("ORG", ["Labor Party", "Labor"]),
    ("ORG", ["Ansett"]),
    ("ORG", ["United Nations", "UN"]),
    ("ORG", ["Islamic Jihad"]),
    ("ORG", ["Industrial Relations Commission"]),
    ("ORG", ["Fatah"]),
    ("ORG", ["Rural Fire Service"]),
    ("ORG", ["Reserve Bank"]),
    ("ORG", ["Australian Federal Police", "AFP"]),
    ("ORG", ["Proteas"]),
    ("ORG", ["Austar"]),
    ("ORG", ["Centrelink"]),
    ("ORG", ["International Monetary Fund", "IMF"]),
    ("ORG", ["Security Council"]),
    ("ORG", ["Harris Scarfe"]),
    ("ORG", ["Australian Security Intelligence Organisation", "ASIO"]),
    ("ORG", ["National Australia Bank"]),
    ("ORG", ["Finance Sector Union"]),
    ("ORG", ["Soccer Australia"]),
    ("ORG", ["Reuters"]),
    ("ORG", ["Bureau of Meteorology"]),
    ("ORG", ["White House"]),
    ("ORG", ["American Airlines"]),
    ("ORG", ["European Union", "EU"]),
    ("ORG", ["Yallourn Energy"]),
    ("ORG", ["Australian Transport Safety Bureau"]),
    ("ORG", ["Immigration Department"]),
    ("ORG", ["Lashkar-e-Taiba"]),
    ("ORG", ["Traveland"]),
    ("ORG", ["Assa Abloy"]),
    ("ORG", ["Senate"]),
    ("ORG", ["Adventure World"]),
    # Nationalities, events and the like (CoNLL's MISC)
    ("MISC", ["Palestinian", "Palestinians"]),
    ("MISC", ["Australian", "Australians"]),
    ("MISC", ["Israeli", "Israelis"]),
    ("MISC", ["Afghan", "Afghans"]),
    ("MISC", ["British"]),
    ("MISC", ["Indian"]),
    ("MISC", ["American", "Americans"]),
    ("MISC", ["Swiss"]),
    ("MISC", ["Jewish"]),
    ("MISC", ["Muslim", "Muslims"]),
    ("MISC", ["Pakistani", "Pakistanis"]),
    ("MISC", ["Russian"]),
    ("MISC", ["South African", "South Africans"]),
    ("MISC", ["French"]),
    ("MISC", ["Japanese"]),
    ("MISC", ["Indonesian"]),
    ("MISC", ["Chechen"]),
    ("MISC", ["Pashtun"]),
    ("MISC", ["Kashmiri"]),
    ("MISC", ["Christian", "Christians"]),
    ("MISC", ["Aboriginal"]),
    ("MISC", ["Boxing Day Test"]),
    ("MISC", ["Hopman Cup"]),
    ("MISC", ["Davis Cup"]),
    ("MISC", ["World Cup"]),
    ("MISC", ["Beatles"]),
]

WORD = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9])")
HELD_OUT_ARTICLE_FRACTION = 0.3


def words_of(text):
    return WORD.findall(text)


def load_articles(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        articles = [line.strip() for line in f if line.strip()]
    return [
        [words_of(s) for s in SENTENCE_END.split(article) if words_of(s)] for article in articles
    ]


def build_matcher():
    """alias words -> (type, entity index); longest aliases tried first."""
    table = {}
    for index, (entity_type, aliases) in enumerate(GAZETTEER):
        for alias in aliases:
            table[tuple(words_of(alias))] = (entity_type, index)
    lengths = sorted({len(k) for k in table}, reverse=True)
    return table, lengths


def tag_sentence(words, table, lengths, lower=False):
    """IOB2 tags by longest match, and the matched (entity index, start, end)."""
    tags = ["O"] * len(words)
    keys = [w.lower() for w in words] if lower else words
    found = []
    i = 0
    while i < len(words):
        for n in lengths:
            entry = table.get(tuple(keys[i : i + n]))
            if entry is not None:
                entity_type, index = entry
                tags[i] = f"B-{entity_type}"
                for j in range(i + 1, i + n):
                    tags[j] = f"I-{entity_type}"
                found.append((index, i, i + n - 1))
                i += n
                break
        else:
            i += 1
    return tags, found


def choose_held_out(articles_entities, rng):
    """Entities to hold out: random order, kept while <= 30% of articles mention one."""
    order = list(range(len(GAZETTEER)))
    rng.shuffle(order)
    mentioned_by = collections.defaultdict(set)
    for article, entities in enumerate(articles_entities):
        for entity in entities:
            mentioned_by[entity].add(article)
    held_out, covered = set(), set()
    limit = HELD_OUT_ARTICLE_FRACTION * len(articles_entities)
    for entity in order:
        if not mentioned_by[entity]:
            continue
        union = covered | mentioned_by[entity]
        if len(union) <= limit:
            held_out.add(entity)
            covered = union
    return held_out, covered


def write_column_file(path, sentences):
    with open(path, "w", encoding="utf-8") as f:
        for words, tags in sentences:
            for word, tag in zip(words, tags, strict=True):
                f.write(f"{word} {tag}\n")
            f.write("\n")


def held_out_recall(gold_sentences, predicted, held_out_spans):
    """Recall on gold entities from held-out vs seen gazetteer entries."""
    from keras_bert_zoo.tasks.tagging.metrics import entities

    hits = collections.Counter()
    totals = collections.Counter()
    for index, (gold_tags, predicted_tags) in enumerate(
        zip(gold_sentences, predicted, strict=True)
    ):
        predicted_set = set(entities(predicted_tags))
        for entity in entities(gold_tags):
            kind = "held_out" if (index, entity[1], entity[2]) in held_out_spans else "seen"
            totals[kind] += 1
            hits[kind] += entity in predicted_set
    return {
        kind: hits[kind] / totals[kind] if totals[kind] else 0.0 for kind in ("held_out", "seen")
    }, totals


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few steps, small test")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--steps", type=int, default=None, help="overrides --epochs")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=2e-4)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--window_stride", type=int, default=32)
    parser.add_argument("--model_dir", default=None, help="HF-layout BERT; default: MiniLM")
    parser.add_argument("--output_dir", default=None, help="predictions, results.json, logs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import gensim
    import keras
    import tensorflow as tf

    from keras_bert_zoo import from_pretrained, tasks
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.tasks.tagging import metrics as entity_metrics
    from keras_bert_zoo.text import BertTokenizer

    corpus = os.path.join(
        os.path.dirname(gensim.__file__), "test", "test_data", "lee_background.cor"
    )
    model_dir = args.model_dir or demo_model_dir()
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="ner_learning_check_")
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, model {model_dir}")
    print(f"corpus {corpus}")

    # === Data: real articles, gazetteer labels, held-out entities ===
    rng = random.Random(args.seed)
    articles = load_articles(corpus)
    table, lengths = build_matcher()
    tagged = [[tag_sentence(words, table, lengths) for words in article] for article in articles]
    article_entities = [{e[0] for _, found in article for e in found} for article in tagged]
    held_out, test_articles = choose_held_out(article_entities, rng)
    train, test, held_out_spans = [], [], set()
    for index, (article, article_tagged) in enumerate(zip(articles, tagged, strict=True)):
        for words, (tags, found) in zip(article, article_tagged, strict=True):
            if index in test_articles:
                for entity, start, end in found:
                    if entity in held_out:
                        held_out_spans.add((len(test), start, end))
                test.append((words, tags))
            else:
                train.append((words, tags))
    if args.quick:
        test = test[:200]
        held_out_spans = {span for span in held_out_spans if span[0] < len(test)}
    data_dir = os.path.join(output_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    write_column_file(os.path.join(data_dir, "train.txt"), train)
    write_column_file(os.path.join(data_dir, "dev.txt"), test)
    print(
        f"articles {len(articles)} (test {len(test_articles)}), sentences train {len(train)} / "
        f"test {len(test)}, held-out entities {len(held_out)} of {len(GAZETTEER)} "
        f"({len(held_out_spans)} test mentions)"
    )

    # === Task, model ===
    keras.utils.set_random_seed(args.seed)
    all_tags = ",".join(["O"] + [f"{p}-{t}" for t in ("PER", "ORG", "LOC", "MISC") for p in "BI"])
    task = tasks.create_task(
        "token_classification",
        data_dir=data_dir,
        max_seq_length=args.max_seq_length,
        window_stride=args.window_stride,
        tag_set=all_tags,
        tag_scheme="IOB2",
    )
    train_examples, test_examples = task.read("train"), task.read("dev")
    tokenizer = BertTokenizer(os.path.join(model_dir, "vocab.txt"))
    preprocessor = task.make_preprocessor(tokenizer)
    windows = sum(1 for _ in task.features(train_examples, preprocessor, training=False))
    if args.steps is not None:
        steps = args.steps
    elif args.quick:
        steps = 100
    else:
        steps = max(1, int(args.epochs * windows / args.batch_size))
    print(f"train windows {windows}, steps {steps} x batch {args.batch_size}")

    model = task.build_model(from_pretrained(model_dir))
    schedule = keras.optimizers.schedules.PolynomialDecay(args.learning_rate, steps, 0.0)
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01),
        loss=task.loss(),
        metrics=task.metrics(),
        jit_compile=False,
    )
    gold = [list(e.tags) for e in test_examples]

    def score(name, predicted):
        report = entity_metrics.conll_report(gold, predicted, "IOB2")
        recall, totals = held_out_recall(gold, predicted, held_out_spans)
        return {
            "system": name,
            "precision": report["precision"],
            "recall": report["recall"],
            "f1": report["f1"],
            "held_out_recall": recall["held_out"],
            "seen_recall": recall["seen"],
            "held_out_mentions": totals["held_out"],
            "seen_mentions": totals["seen"],
        }

    results = []
    untrained = tasks.predict(task, model, test_examples, preprocessor, batch_size=64)
    results.append(score("model before fine-tuning", [list(a) for a in untrained]))

    dataset_fn = tasks.training_dataset_fn(
        task, train_examples, preprocessor, args.batch_size, seed=args.seed
    )
    callbacks = []
    if importlib.util.find_spec("tensorboard") is not None:
        callbacks.append(
            keras.callbacks.TensorBoard(os.path.join(output_dir, "logs"), update_freq=10)
        )
    else:
        print("tensorboard is not installed: no TensorBoard summaries")
    start = time.time()
    history = model.fit(
        dataset_fn(None), steps_per_epoch=steps, epochs=1, verbose=1, callbacks=callbacks
    )
    train_seconds = time.time() - start
    answers = tasks.predict(task, model, test_examples, preprocessor, batch_size=64)
    task.write_predictions(answers, test_examples, output_dir, "test")
    results.append(score("fine-tuned MiniLM", [list(a) for a in answers]))

    # === Baselines ===
    lexicon = collections.defaultdict(collections.Counter)
    word_tags = collections.defaultdict(collections.Counter)
    for words, tags in train:
        for entity_type, start, end in entity_metrics.entities(tags):
            lexicon[tuple(w.lower() for w in words[start : end + 1])][entity_type] += 1
        for word, tag in zip(words, tags, strict=True):
            word_tags[word.lower()][tag] += 1
    memory = {key: (types.most_common(1)[0][0], 0) for key, types in lexicon.items()}
    memory_lengths = sorted({len(k) for k in memory}, reverse=True) or [1]
    memorized = [
        tag_sentence(e.words, memory, memory_lengths, lower=True)[0] for e in test_examples
    ]
    results.append(score("memorize training entities (uncased)", memorized))
    majority = [
        [
            word_tags[w.lower()].most_common(1)[0][0] if w.lower() in word_tags else "O"
            for w in e.words
        ]
        for e in test_examples
    ]
    results.append(score("per-word majority tag", majority))

    # === Report ===
    final_loss = history.history["loss"][-1]
    print(f"\nfine-tuning: {steps} steps in {train_seconds:.0f} s, final loss {final_loss:.4f}")
    header = f"{'system':40s} {'P':>6s} {'R':>6s} {'F1':>6s} {'R held-out':>10s} {'R seen':>7s}"
    print(header)
    print("-" * len(header))
    for row in results:
        print(
            f"{row['system']:40s} {row['precision']:6.3f} {row['recall']:6.3f} {row['f1']:6.3f} "
            f"{row['held_out_recall']:10.3f} {row['seen_recall']:7.3f}"
        )
    print(
        f"(test mentions: {results[0]['held_out_mentions']} of held-out entities, "
        f"{results[0]['seen_mentions']} of seen ones)"
    )
    model_row, memory_row, majority_row = results[1], results[2], results[3]
    print(
        f"\nverdict: fine-tuned F1 {model_row['f1']:.3f} vs best baseline "
        f"{max(memory_row['f1'], majority_row['f1']):.3f}; held-out-entity recall "
        f"{model_row['held_out_recall']:.3f} vs memorization {memory_row['held_out_recall']:.3f}"
    )
    summary = {
        "args": vars(args),
        "train_sentences": len(train),
        "test_sentences": len(test),
        "held_out_entities": sorted(GAZETTEER[i][1][0] for i in held_out),
        "steps": steps,
        "train_seconds": train_seconds,
        "results": results,
    }
    with open(os.path.join(output_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print(f"predictions, results.json and TensorBoard logs in {output_dir}")
    return summary


if __name__ == "__main__":
    main()
