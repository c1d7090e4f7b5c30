#!/usr/bin/env python3
"""tests/data_text/keras_reference.py — the Keras text pipeline in plain Python (no Keras needed), written
from keras.preprocessing.text.text_to_word_sequence, Tokenizer's ranking, imdb.load_data's index mapping,
pad_sequences and examples/imdb_fasttext.py, to cross-check the C readers on the real aclImdb tree.

Usage: keras_reference.py ACLIMDB_DIR OUT_FILE
Writes, for train then test (khost's sample order), one line per review: label, then the tokens with
fastText bigrams appended (ids by first occurrence, as khost documents), before padding. The first line
holds vocab_size, n_bigrams and max_features. `test_data_text_real --dump FILE` writes the same from C.
Differences allowed by khost's docs: lower-casing beyond Latin/Greek/Cyrillic (absent from aclImdb).
"""
import os
import re
import sys

FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'
TRANS = str.maketrans(FILTERS, ' ' * len(FILTERS))
NAME = re.compile(r'^(\d+)_(\d+)\.txt$')


def words(text):
    # Keras 2 text_to_word_sequence(lower=True, split=' ') after removing "<br />"
    text = text.lower().replace('<br />', ' ')
    return [w for w in text.translate(TRANS).split(' ') if w]


def listing(folder):
    names = [n for n in os.listdir(folder) if not n.startswith('.')]
    key = []
    for n in names:
        m = NAME.match(n)
        key.append((int(m.group(1)), int(m.group(2)), n))
    return [os.path.join(folder, k[2]) for k in sorted(key)]


def interleave(pos, neg):
    out = []
    m = min(len(pos), len(neg))
    for i in range(m):
        out.append((pos[i], 1))
        out.append((neg[i], 0))
    out += [(p, 1) for p in pos[m:]] + [(n, 0) for n in neg[m:]]
    return out


def main():
    root, out = sys.argv[1], sys.argv[2]
    read = lambda p: open(p, encoding='utf-8').read()
    tr = {s: listing(os.path.join(root, 'train', s)) for s in ('pos', 'neg')}
    te = {s: listing(os.path.join(root, 'test', s)) for s in ('pos', 'neg')}
    counts = {}  # insertion-ordered: first occurrence in reading order train/pos, train/neg
    cache = {}
    for p in tr['pos'] + tr['neg']:
        ws = words(read(p))
        cache[p] = ws
        for w in ws:
            counts[w] = counts.get(w, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: kv[1], reverse=True)  # stable, as Tokenizer
    index = {w: r + 1 + 3 for r, (w, _) in enumerate(ranked)}
    cap = lambda i: i if i < 20000 else 2
    def seq(ws):
        return [1] + [cap(index.get(w, 2)) for w in ws]
    xtr = [(seq(cache[p]), y) for p, y in interleave(tr['pos'], tr['neg'])]
    xte = [(seq(words(read(p))), y) for p, y in interleave(te['pos'], te['neg'])]
    table = {}
    for s, _ in xtr:
        for bg in zip(s, s[1:]):
            if bg not in table:
                table[bg] = 20001 + len(table)
    def add(s):
        return s + [table[bg] for bg in zip(s, s[1:]) if bg in table]
    with open(out, 'w') as f:
        f.write('%d %d %d\n' % (len(counts), len(table), 20001 + len(table)))
        for s, y in xtr + xte:
            f.write('%d %s\n' % (y, ' '.join(map(str, add(s)))))


if __name__ == '__main__':
    main()
