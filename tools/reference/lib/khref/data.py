"""khref.data — the six tasks' data, read from the same files through the same rules as khost's readers
(kit/data/*.c, include/khost/kit/data_image.h and data_text.h). numpy only, so every reference framework
shares it.

Every loader returns a Task-independent `Data` with:
  x_train, y_train, x_val, y_val   numpy arrays (images: uint8 NHWC; sequences: int32 (N, T)); x_val may be None
  info                              dict of facts for describe/the record (sizes, vocabulary, ...)
and khost's sample order and limit rules, so `--limit-train N` selects the same samples as khost's
`--limit-train N`.
"""
import gzip
import hashlib
import os
import struct
import sys
import time

import numpy as np


class DataError(Exception):
    pass


class Data:
    def __init__(self, x_train, y_train, x_val, y_val, info):
        self.x_train, self.y_train, self.x_val, self.y_val, self.info = x_train, y_train, x_val, y_val, info


def data_dir(arg=None):
    """--data, else $KHOST_DATA, else <repo>/data (the repository holding this file)."""
    if arg:
        return arg
    env = os.environ.get("KHOST_DATA")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "..", "data"))


def tree_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def _cache_dir():
    base = os.environ.get("KHREF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "khost-ref")
    os.makedirs(base, exist_ok=True)
    return base


def _cached(kind, key_parts, build, use_cache=True):
    """Memoise build() -> dict of numpy arrays (+ 'info' as a JSON string) in ~/.cache/khost-ref, keyed on
    the inputs' paths, sizes and mtimes. The cache is derived data outside the repository; KHREF_CACHE=off
    disables it."""
    if not use_cache or os.environ.get("KHREF_CACHE") == "off":
        return build()
    h = hashlib.sha256(repr((kind, 3) + tuple(key_parts)).encode()).hexdigest()[:20]
    path = os.path.join(_cache_dir(), "%s-%s.npz" % (kind, h))
    if os.path.exists(path):
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except Exception:  # a torn or stale cache file: rebuild it
            pass
    out = build()
    tmp = "%s.tmp.%d.npz" % (path[:-4], os.getpid())
    np.savez(tmp, **out)
    os.replace(tmp, path)
    return out


def _stat_key(paths):
    key = []
    for p in paths:
        st = os.stat(p)
        key.append((p, st.st_size, st.st_mtime_ns))
    return key


# --- IDX (MNIST) ---------------------------------------------------------------------------------------------
def _idx_find(d, name):
    """kh_idx_find: the plain file first, then .gz."""
    for cand in (os.path.join(d, name), os.path.join(d, name + ".gz")):
        if os.path.isfile(cand):
            return cand
    raise DataError("%s.gz: not found (run: tools/fetch-datasets mnist)" % os.path.join(d, name))


def _idx_read(path, limit):
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open  # gzip detected from content, as khost
    with opener(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        rank = magic & 0xFF
        if magic >> 8 != 0x08 or rank not in (1, 3):
            raise DataError("%s: bad IDX magic 0x%08x" % (path, magic))
        dims = struct.unpack(">%dI" % rank, f.read(4 * rank))
        n = dims[0] if not limit or limit >= dims[0] else limit
        per = int(np.prod(dims[1:])) if rank > 1 else 1
        buf = f.read(n * per)
        if len(buf) != n * per:
            raise DataError("%s: truncated" % path)
    a = np.frombuffer(buf, dtype=np.uint8)
    return a.reshape((n,) + tuple(dims[1:])) if rank > 1 else a


def load_mnist(root, limit_train=0, limit_val=0, dataset="mnist"):
    d = os.path.join(root, dataset)
    out = []
    for split, lim in (("train", limit_train), ("t10k", limit_val)):
        x = _idx_read(_idx_find(d, "%s-images-idx3-ubyte" % split), lim)
        y = _idx_read(_idx_find(d, "%s-labels-idx1-ubyte" % split), lim)
        if len(x) != len(y):
            raise DataError("%s: %d images but %d labels" % (d, len(x), len(y)))
        out += [x[..., None], y.astype(np.int64)]  # (N, 28, 28, 1) u8 HWC, as khost keeps it
    return Data(out[0], out[1], out[2], out[3],
                {"dataset": dataset, "format": "IDX", "path": d, "dataset_bytes": tree_bytes(d)})


# --- CIFAR-10 (JPEG image folders or binary batches) ----------------------------------------------------------
CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
_IMG_EXT = (b".jpg", b".jpeg", b".png")


def _folder_plan(root, limit):
    """kh_image_folder_read's file selection: classes = sub-folders sorted bytewise (hidden skipped), files
    *.jpg|*.jpeg|*.png (any case) sorted bytewise; a limit takes files round-robin over the classes (the
    first file of every class, then the second, ...) but the output stays class-major."""
    broot = os.fsencode(root)
    if not os.path.isdir(broot):
        raise DataError("%s: no such folder" % root)
    classes = sorted(e for e in os.listdir(broot) if not e.startswith(b".") and os.path.isdir(os.path.join(broot, e)))
    files = []
    for c in classes:
        fl = sorted(e for e in os.listdir(os.path.join(broot, c))
                    if not e.startswith(b".") and e.lower().endswith(_IMG_EXT)
                    and os.path.isfile(os.path.join(broot, c, e)))
        if not fl:
            raise DataError("%s: class folder has no *.jpg, *.jpeg or *.png files" % os.path.join(root, os.fsdecode(c)))
        files.append(fl)
    take = [len(f) for f in files]
    if limit and limit < sum(take):
        take = [0] * len(files)
        left, j = limit, 0
        while left > 0:
            for k in range(len(files)):
                if left > 0 and j < len(files[k]):
                    take[k] += 1
                    left -= 1
            j += 1
    plan = [(os.path.join(broot, classes[k], files[k][i]), k) for k in range(len(files)) for i in range(take[k])]
    return [os.fsdecode(c) for c in classes], plan


def _decode_folder(plan, side=32):
    from PIL import Image  # pillow decodes with libjpeg-turbo, as khost's reader (default DCT, fancy upsampling)
    x = np.empty((len(plan), side, side, 3), dtype=np.uint8)
    y = np.empty(len(plan), dtype=np.int64)
    for i, (p, k) in enumerate(plan):
        with Image.open(p) as im:
            if im.size != (side, side):
                raise DataError("%s: image is %dx%d, expected %dx%d" % (os.fsdecode(p), im.size[0], im.size[1], side, side))
            x[i] = np.asarray(im.convert("RGB"))
        y[i] = k
    return x, y


def load_cifar10(root, limit_train=0, limit_val=0):
    d = os.path.join(root, "cifar10")
    binp = os.path.join(d, "cifar-10-batches-bin")
    if os.path.isfile(os.path.join(binp, "data_batch_1.bin")):  # khost prefers the canonical batches
        def read(files, lim):
            raw = b"".join(open(os.path.join(binp, f), "rb").read() for f in files)
            a = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3073)
            if lim:
                a = a[:lim]
            return a[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), a[:, 0].astype(np.int64)
        xt, yt = read(["data_batch_%d.bin" % i for i in range(1, 6)], limit_train)
        xv, yv = read(["test_batch.bin"], limit_val)
        return Data(xt, yt, xv, yv, {"dataset": "cifar10", "format": "CIFAR-10 binary batches", "path": binp,
                                     "dataset_bytes": tree_bytes(d)})
    jpg = os.path.join(d, "cifar-10-jpg")
    if not os.path.isdir(os.path.join(jpg, "train")):
        raise DataError("%s/data_batch_1.bin: not found, nor %s/train (run: tools/fetch-datasets cifar10)" % (binp, jpg))
    out = []
    for split, lim in (("train", limit_train), ("test", limit_val)):
        classes, plan = _folder_plan(os.path.join(jpg, split), lim)
        if classes != CIFAR_CLASSES:
            raise DataError("%s/%s: classes %s, expected the canonical CIFAR-10 order" % (jpg, split, classes))
        key = _stat_key([os.path.join(jpg, split)] + [os.path.join(jpg, split, c) for c in classes])
        # the full decode (~2 s per 10000 images here) is cached; a limited subset is decoded directly
        z = _cached("cifar-" + split, key + [len(plan)], lambda: dict(zip(("x", "y"), _decode_folder(plan))),
                    use_cache=not lim)
        out += [z["x"], z["y"]]
    return Data(out[0], out[1], out[2], out[3], {"dataset": "cifar10", "format": "JPEG image folders", "path": jpg,
                                                 "dataset_bytes": tree_bytes(d)})


# --- Keras's tokeniser with khost's lower-casing -------------------------------------------------------------
def _kh_unicode_lower(cp):
    """Port of kh_unicode_lower (kit/data/text_tokenize.c): Python's str.lower() where it maps one code
    point to one code point of the same UTF-8 length (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic);
    U+0130 stays, capital sigma always becomes small sigma."""
    if cp < 0x80:
        return cp + 32 if 0x41 <= cp <= 0x5A else cp
    if 0xC0 <= cp <= 0xDE and cp != 0xD7:
        return cp + 32
    if 0x100 <= cp <= 0x17F:
        if cp == 0x130:
            return cp
        if cp == 0x178:
            return 0xFF
        if cp <= 0x137 or 0x14A <= cp <= 0x177:
            return cp if cp & 1 else cp + 1
        if 0x139 <= cp <= 0x148 or 0x179 <= cp <= 0x17E:
            return cp + 1 if cp & 1 else cp
        return cp
    if 0x391 <= cp <= 0x3AB and cp != 0x3A2:
        return cp + 32
    if cp == 0x386:
        return 0x3AC
    if 0x388 <= cp <= 0x38A:
        return cp + 37
    if cp == 0x38C:
        return 0x3CC
    if cp in (0x38E, 0x38F):
        return cp + 63
    if 0x400 <= cp <= 0x40F:
        return cp + 80
    if 0x410 <= cp <= 0x42F:
        return cp + 32
    return cp


KH_LOWER = {cp: _kh_unicode_lower(cp) for cp in range(0x530) if _kh_unicode_lower(cp) != cp}
KERAS_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'  # text_to_word_sequence's default filters
_FILTER_STR = {ord(c): " " for c in KERAS_FILTERS}
_FILTER_BYTES = bytes.maketrans(KERAS_FILTERS.encode(), b" " * len(KERAS_FILTERS))


def keras_words(raw):
    """text_to_word_sequence(text.lower().replace('<br />', ' ')) on the UTF-8 bytes of a review, lower-cased
    as khost does (KH_LOWER); words are returned as UTF-8 bytes. Only ' ' splits, as Keras."""
    if raw.isascii():
        s = raw.lower().replace(b"<br />", b" ").translate(_FILTER_BYTES)
        return [w for w in s.split(b" ") if w]
    t = raw.decode("utf-8").translate(KH_LOWER).replace("<br />", " ").translate(_FILTER_STR)
    return [w.encode("utf-8") for w in t.split(" ") if w]


# --- aclImdb, indexed as keras.datasets.imdb (khost/kit/data_text.h) -----------------------------------------------
def _imdb_folder(root, sub):
    d = os.path.join(root, sub)
    if not os.path.isdir(d):
        raise DataError("%s: not found; run: tools/fetch-datasets imdb" % d)
    rev = []
    for name in os.listdir(d):
        if name.startswith("."):
            continue
        stem, _, ext = name.partition(".")
        a, _, b = stem.partition("_")
        if ext != "txt" or not a.isdigit() or not b.isdigit() or not 1 <= int(b) <= 10:
            raise DataError("%s/%s: file name is not <id>_<rating>.txt with a rating of 1..10" % (d, name))
        rev.append((int(a), int(b), name))
    if not rev:
        raise DataError("%s: no reviews (<id>_<rating>.txt files) in the folder" % d)
    rev.sort()  # ascending numeric id, then rating
    return [os.path.join(d, r[2]) for r in rev]


def _interleave(npos, nneg):
    """Sample k -> (is_pos, j): pos 0, neg 0, pos 1, neg 1, ..., the longer folder's rest at the end."""
    m = min(npos, nneg)
    order = []
    for k in range(npos + nneg):
        if k < 2 * m:
            order.append((k % 2 == 0, k // 2))
        else:
            order.append((npos > m, m + (k - 2 * m)))
    return order


def _read(p):
    with open(p, "rb") as f:
        return f.read()


def _imdb_build(root, num_words, index_from=3, start_char=1, oov_char=2):
    """Both splits in full, in sample order (limits are prefixes of it, so they slice the cached result; the
    vocabulary always comes from the whole training split, as in khost)."""
    t0 = time.time()
    tr = [_imdb_folder(root, "train/pos"), _imdb_folder(root, "train/neg")]
    te = [_imdb_folder(root, "test/pos"), _imdb_folder(root, "test/neg")]
    # pass 1: every training review in reading order (pos then neg), words interned by first occurrence
    vocab = {}
    seqs = []
    for files in tr:
        for p in files:
            ids = []
            for w in keras_words(_read(p)):
                i = vocab.get(w)
                if i is None:
                    i = vocab[w] = len(vocab)
                ids.append(i)
            seqs.append(np.asarray(ids, dtype=np.int64))
    counts = np.bincount(np.concatenate(seqs), minlength=len(vocab)) if seqs else np.zeros(0, np.int64)
    # ranks: count descending, ties by first occurrence (Keras's stable sort of its ordered count dict)
    by_rank = np.argsort(-counts, kind="stable")
    index = np.empty(len(vocab), dtype=np.int64)
    index[by_rank] = np.arange(len(vocab)) + 1 + index_from
    capped = np.where((num_words > 0) & (index >= num_words), oov_char, index).astype(np.int32)

    def assemble(order, get):
        offs, toks, labels = [0], [], []
        for pos, j in order:
            s = get(pos, j)
            toks.append(np.int32(start_char))
            toks.append(s)
            offs.append(offs[-1] + 1 + len(s))
            labels.append(1 if pos else 0)
        flat = np.concatenate([np.atleast_1d(t) for t in toks]).astype(np.int32) if toks else np.zeros(0, np.int32)
        return flat, np.asarray(offs, np.int64), np.asarray(labels, np.int64)

    order_tr = _interleave(len(tr[0]), len(tr[1]))
    ttok, toff, tlab = assemble(order_tr, lambda pos, j: capped[seqs[j if pos else len(tr[0]) + j]])
    order_te = _interleave(len(te[0]), len(te[1]))
    unseen = [0]

    def test_seq(pos, j):
        ws = keras_words(_read(te[0 if pos else 1][j]))
        ids = [vocab.get(w, -1) for w in ws]
        a = np.asarray(ids, dtype=np.int64)
        unseen[0] += int((a < 0).sum())
        return np.where(a < 0, oov_char, capped[np.maximum(a, 0)]).astype(np.int32)

    vtok, voff, vlab = assemble(order_te, test_seq)
    top = [w.decode("utf-8", "replace") for w in _top_words(vocab, by_rank, 12)]
    return {"train_tok": ttok, "train_off": toff, "train_lab": tlab, "val_tok": vtok, "val_off": voff,
            "val_lab": vlab, "vocab_size": np.int64(len(vocab)), "train_words": np.int64(counts.sum()),
            "test_oov_unseen": np.int64(unseen[0]), "top": np.asarray(top), "build_s": np.float64(time.time() - t0)}


def _top_words(vocab, by_rank, n):
    words = list(vocab.keys())
    return [words[i] for i in by_rank[:n]]


def _split_seqs(tok, off):
    return [tok[off[i]:off[i + 1]] for i in range(len(off) - 1)]


def fasttext_bigrams(train, test, start_index):
    """examples/imdb_fasttext.py with ngram_range 2, ids in khost's order: every bigram of the training
    sequences gets start_index + (rank of its first occurrence over train in sample order); each sequence
    (train and test) gets the ids of its bigrams that are in the table appended, in order of occurrence."""
    def keys(seqs):
        k = [s[:-1].astype(np.int64) * (1 << 32) + s[1:].astype(np.int64) for s in seqs]
        return (np.concatenate(k) if k else np.zeros(0, np.int64)), np.cumsum([0] + [len(x) for x in k])

    ktr, otr = keys(train)
    uniq, first, inv = np.unique(ktr, return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))  # ids by first occurrence
    ids_tr = (start_index + rank[inv]).astype(np.int32)
    kte, ote = keys(test)
    if len(uniq):
        pos = np.minimum(np.searchsorted(uniq, kte), len(uniq) - 1)
        ids_te = np.where(uniq[pos] == kte, start_index + rank[pos], -1).astype(np.int32)  # training bigrams only
    else:
        ids_te = np.full(len(kte), -1, np.int32)

    def add(seqs, ids, off):
        out = []
        for i, s in enumerate(seqs):
            b = ids[off[i]:off[i + 1]]
            out.append(np.concatenate([s, b[b >= 0]]))
        return out

    return add(train, ids_tr, otr), add(test, ids_te, ote), len(uniq), start_index + len(uniq)


def pad_sequences(seqs, maxlen):
    """pad_sequences(padding='pre', truncating='pre', value=0): the last maxlen tokens, right-aligned."""
    out = np.zeros((len(seqs), maxlen), dtype=np.int32)
    for i, s in enumerate(seqs):
        k = min(len(s), maxlen)
        if k:
            out[i, maxlen - k:] = s[len(s) - k:]
    return out


def load_imdb(root, limit_train=0, limit_val=0, num_words=20000, maxlen=100, bigrams=False):
    d = os.path.join(root, "imdb", "aclImdb")
    if not os.path.isdir(d):
        raise DataError("%s: not found; run: tools/fetch-datasets imdb" % d)
    subs = [os.path.join(d, s) for s in ("train/pos", "train/neg", "test/pos", "test/neg")]
    z = _cached("imdb", _stat_key(subs) + [num_words], lambda: _imdb_build(d, num_words))
    train = _split_seqs(z["train_tok"], z["train_off"])
    test = _split_seqs(z["val_tok"], z["val_off"])
    ytr, yte = z["train_lab"], z["val_lab"]
    if limit_train:
        train, ytr = train[:limit_train], ytr[:limit_train]
    if limit_val:
        test, yte = test[:limit_val], yte[:limit_val]
    info = {"dataset": "imdb", "format": "aclImdb review folders", "path": d, "dataset_bytes": tree_bytes(os.path.join(root, "imdb")),
            "vocab_size": int(z["vocab_size"]), "train_words": int(z["train_words"]),
            "test_oov_unseen": int(z["test_oov_unseen"]), "top_words": [str(w) for w in z["top"]],
            "max_features": num_words,
            "mean_len_train": float(np.mean([len(s) for s in train])) if train else 0.0}
    if bigrams:
        # examples/imdb_fasttext.py: start_index = max_features + 1; the table comes from the (limited)
        # training sequences, as in khost. Cached: ~10 s of numpy on this machine.
        def build():
            tr, te, nb, mf = fasttext_bigrams(train, test, num_words + 1)
            return {"x": pad_sequences(tr, maxlen), "xv": pad_sequences(te, maxlen), "nb": np.int64(nb),
                    "mf": np.int64(mf)}
        f = _cached("fasttext", _stat_key(subs) + [(num_words, limit_train, limit_val, maxlen)], build)
        info.update(n_bigrams=int(f["nb"]), max_features=int(f["mf"]))
        return Data(f["x"], ytr, f["xv"], yte, info)
    return Data(pad_sequences(train, maxlen), ytr, pad_sequences(test, maxlen), yte, info)


# --- Nietzsche character windows ---------------------------------------------------------------------------------
def load_nietzsche(root, limit_train=0, maxlen=40, step=3):
    p = os.path.join(root, "nietzsche", "nietzsche.txt")
    if not os.path.isfile(p):
        raise DataError("%s: not found; run: tools/fetch-datasets nietzsche" % p)
    # io.open(path, encoding='utf-8').read().lower(): universal newlines, then khost's lower-casing
    text = _read(p).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n").translate(KH_LOWER)
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    alphabet = np.unique(cps)  # sorted(set(text))
    idx = np.searchsorted(alphabet, cps).astype(np.int32)
    n_windows = len(range(0, len(idx) - maxlen, step))
    n = min(limit_train, n_windows) if limit_train else n_windows
    info = {"dataset": "nietzsche", "format": "UTF-8 text", "path": p, "dataset_bytes": os.path.getsize(p),
            "n_chars": int(len(idx)), "n_distinct": int(len(alphabet)), "n_windows": int(n_windows),
            "alphabet": "".join(chr(c) for c in alphabet), "maxlen": maxlen, "step": step}
    # windows are cut per batch from the index text (CharWindows), never materialised
    return Data(CharWindows(idx, n, maxlen, step), None, None, None, info)


class CharWindows:
    """The first n windows of a character-index text: window w = text[w*step : w*step+maxlen], label the
    next character."""

    def __init__(self, text, n, maxlen, step):
        self.text, self.n, self.maxlen, self.step = text, n, maxlen, step
        self._ar = np.arange(maxlen)

    def __len__(self):
        return self.n

    def batch(self, w):
        s = np.asarray(w, dtype=np.int64) * self.step
        return self.text[s[:, None] + self._ar], self.text[s + self.maxlen].astype(np.int64)


# --- CIFAR augmentation -------------------------------------------------------------------------------------------
def augment_shift_flip(x, rng, width_shift=0.1, height_shift=0.1, flip=True):
    """kh_augment_shift_flip on a uint8/float NHWC batch: per image row_off = floor(U(-hs,hs)*H + 0.5),
    col_off likewise, then a horizontal flip with probability 1/2; shifted(r,c) = x(clamp(r+row_off),
    clamp(c+col_off)) ('nearest' fill), flipped(r,c) = shifted(r, W-1-c). Same distributions as khost; the
    random stream is numpy's, not kh_rng."""
    n, h, w = x.shape[:3]
    ro = np.floor(rng.uniform(-height_shift, height_shift, n) * h + 0.5).astype(np.int64)
    co = np.floor(rng.uniform(-width_shift, width_shift, n) * w + 0.5).astype(np.int64)
    fl = rng.uniform(0, 1, n) < 0.5 if flip else np.zeros(n, bool)
    rows = np.clip(np.arange(h)[None, :] + ro[:, None], 0, h - 1)
    cols = np.clip(np.arange(w)[None, :] + co[:, None], 0, w - 1)
    cols = np.where(fl[:, None], cols[:, ::-1], cols)
    return x[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]


def eprint(*a):
    print(*a, file=sys.stderr, flush=True)
