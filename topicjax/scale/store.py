"""An on-disk corpus read one batch at a time: the batch store of the online fit.

A folder holding the corpus in compressed-sparse-row form, as flat binary arrays that are
memory-mapped one batch at a time (only the pages of the batch being read are mapped, and the
map is dropped after the batch is copied, so reading never holds more than a batch):

* ``offsets.bin`` — int64, D + 1 entries: document ``d`` owns entries ``offsets[d]:offsets[d+1]``;
* ``words.bin`` — int32 word ids, ``counts.bin`` — int32 counts (one entry per distinct word of a
  document; a word repeated within a document may occur as several entries, which the E-step
  adds up exactly);
* ``vocab.txt`` — one vocabulary key per line (VW keys of other modalities are ``"m|word"``,
  as in :mod:`topicjax.data.formats`);
* ``meta.json`` — sizes, the number of documents per batch, the source.

Batches are runs of ``batch_size`` consecutive documents.  :func:`write_store` writes any
iterable of in-memory :class:`~topicjax.data.corpus.Corpus` parts with one vocabulary, appended
one after the other; the streaming converters of files (:mod:`topicjax.scale.convert`) write
through the same :class:`StoreWriter`.

>>> import tempfile, topicjax as tj
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=300, seed=0)
>>> store = write_store([corpus], tempfile.mkdtemp(), batch_size=100)
>>> store.n_docs, store.n_batches, store.batch(2).first
(300, 3, 200)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

import numpy as np

from topicjax._outputs import check_folder, check_not_input, folder_lock
from topicjax.core import layout
from topicjax.core.validation import check_int
from topicjax.data.corpus import MAX_ID, Corpus, CorpusError

__all__ = ["FORMAT", "Batch", "BatchStore", "StoreWriter", "write_store", "is_store", "check_store_target"]

#: The ``format`` of a store's ``meta.json``.
FORMAT = "topicjax-batches/1"


class Batch(NamedTuple):
    """One batch read from a store: documents ``first .. first + n_docs - 1`` in CSR form."""

    first: int
    offsets: np.ndarray  # (n_docs + 1,), starting at 0
    words: np.ndarray
    counts: np.ndarray

    @property
    def n_docs(self) -> int:
        return self.offsets.size - 1


class BatchStore:
    """An on-disk corpus written by :func:`write_store` or a converter of :mod:`topicjax.scale.convert`.

    ``store.batch(i)`` reads batch ``i`` through a memory map of just its byte range;
    iterating yields the batches in order.  ``store.corpus()`` loads everything as a
    :class:`~topicjax.data.corpus.Corpus` (only for corpora that fit in memory, e.g. in tests).
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        meta_path = self.folder / "meta.json"
        if not meta_path.is_file():
            if (self.folder / MARKER).is_file():
                raise CorpusError(f"{self.folder}: a write of this batch store was interrupted (no meta.json); write "
                                  "the store again")
            raise FileNotFoundError(f"{self.folder} is not a batch store (no meta.json)")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise CorpusError(f"{meta_path}: not valid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise CorpusError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
        if meta.get("format") != FORMAT:
            raise CorpusError(f"{meta_path}: unknown format {meta.get('format')!r} (expected {FORMAT!r})")
        self.meta = meta
        self._identity = _identity(meta_path)  # a store replaced while this one is read is noticed
        # Every size is checked against the files actually present before anything is read, so
        # a hostile meta.json cannot make the store allocate more than its files hold.
        self.n_docs = _meta_int(meta, "n_docs", meta_path, high=MAX_ID)
        self.n_words = _meta_int(meta, "n_words", meta_path, high=MAX_ID)
        self.nnz = _meta_int(meta, "nnz", meta_path)
        self.n_tokens = _meta_int(meta, "n_tokens", meta_path)
        self.batch_size = _meta_int(meta, "batch_size", meta_path, low=1)
        for name, size in (("offsets.bin", 8 * (self.n_docs + 1)), ("words.bin", 4 * self.nnz),
                           ("counts.bin", 4 * self.nnz)):
            actual = (self.folder / name).stat().st_size if (self.folder / name).is_file() else -1
            if actual != size:
                raise CorpusError(f"{self.folder / name}: {actual} bytes, expected {size} (truncated or missing)")
        first, last = self._read("offsets.bin", np.int64, 0, 1)[0], self._read(
            "offsets.bin", np.int64, self.n_docs, self.n_docs + 1)[0]
        if first != 0 or last != self.nnz:
            raise CorpusError(f"{self.folder / 'offsets.bin'}: offsets run from {first} to {last}, expected 0 to "
                              f"nnz={self.nnz}")
        vocab_path = self.folder / "vocab.txt"
        if not vocab_path.is_file():
            raise CorpusError(f"{vocab_path}: missing")
        n_lines = 0
        with open(vocab_path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                n_lines += chunk.count(b"\n")
        if n_lines != self.n_words:
            raise CorpusError(f"{vocab_path}: {n_lines} lines but meta.json says n_words={self.n_words}")

    @property
    def n_batches(self) -> int:
        return -(-self.n_docs // self.batch_size)

    def __repr__(self) -> str:
        # from meta.json as read at opening: a repr reads no file
        return (f"BatchStore({str(self.folder)!r}, docs={self.n_docs:,}, words={self.n_words:,}, "
                f"tokens={self.n_tokens:,}, batches={self.n_batches:,} of {self.batch_size:,} documents)")

    def vocab(self) -> list[str]:
        path = self.folder / "vocab.txt"
        try:
            words = path.read_text(encoding="utf-8").split("\n")[:-1]
        except UnicodeDecodeError as e:
            raise CorpusError(f"{path}: not valid utf-8 ({e})") from None
        if len(words) != self.n_words:
            raise CorpusError(f"{path}: {len(words)} lines but meta.json says n_words={self.n_words}")
        if len(set(words)) != len(words):
            first: dict[str, int] = {}
            for i, w in enumerate(words):
                if first.setdefault(w, i) != i:
                    raise CorpusError(f"{path}: line {i + 1} repeats the word {w!r} of line {first[w] + 1}; a store's "
                                      "words must be distinct")
        return words

    def _read(self, name: str, dtype, start: int, stop: int) -> np.ndarray:
        """Entries [start, stop) of a flat binary array, through a map of that range only."""
        if stop <= start:
            return np.zeros(0, dtype)
        item = np.dtype(dtype).itemsize
        mm = np.memmap(self.folder / name, dtype=dtype, mode="r", offset=start * item, shape=(stop - start,))
        out = np.array(mm)  # a private copy; dropping the map releases its pages
        del mm
        return out

    def _offsets(self, first: int, last: int) -> np.ndarray:
        """Offsets of documents ``first .. last`` (``last + 1`` values), checked: non-decreasing
        and within ``[0, nnz]`` (so no read beyond the entries is ever attempted)."""
        off = self._read("offsets.bin", np.int64, first, last + 1)
        bad = np.flatnonzero((off[1:] < off[:-1]) | (off[1:] > self.nnz))
        if bad.size or (off.size and not 0 <= off[0] <= self.nnz):
            d = first + (int(bad[0]) if bad.size else 0)
            raise CorpusError(f"{self.folder / 'offsets.bin'}: document {d}: offsets {off[d - first]} .. "
                              f"{off[d - first + 1] if d - first + 1 < off.size else '?'} are not a range of "
                              f"0..{self.nnz} (corrupt store)")
        return off

    def batch(self, i: int) -> Batch:
        if not 0 <= i < self.n_batches:
            raise IndexError(f"batch {i} is outside 0..{self.n_batches - 1}")
        first = i * self.batch_size
        return self.documents(first, min(self.n_docs, first + self.batch_size))

    def doc_offsets(self) -> np.ndarray:
        """The whole of ``offsets.bin`` (D + 1 int64, checked as every read checks it): what a
        sharded fit splits the documents by, without reading any entry."""
        return self._offsets(0, self.n_docs)

    def documents(self, first: int, last: int) -> Batch:
        """Documents ``first .. last - 1`` (any range, not only a batch): only their byte ranges of
        ``words.bin`` and ``counts.bin`` are mapped and read, and checked (word ids inside the
        vocabulary, counts >= 0).  A sharded fit reads each device's documents this way, so a
        process never reads the entries of another process's documents."""
        if not 0 <= first <= last <= self.n_docs:
            raise IndexError(f"documents {first}..{last - 1} are outside 0..{self.n_docs - 1}")
        if _identity(self.folder / "meta.json") != self._identity:
            raise CorpusError(f"{self.folder}: the batch store was replaced or is being rewritten while it is read; "
                              "open it again once the writer has finished")
        off = self._offsets(first, last)
        words = self._read("words.bin", np.int32, int(off[0]), int(off[-1]))
        counts = self._read("counts.bin", np.int32, int(off[0]), int(off[-1]))
        for name, arr, high in (("words.bin", words, self.n_words), ("counts.bin", counts, None)):
            bad = np.flatnonzero((arr < 0) | (arr >= high if high is not None else False))
            if bad.size:
                j = int(bad[0])
                d = first + int(np.searchsorted(off, off[0] + j, side="right")) - 1
                what = f"word id {arr[j]} is outside 0..{high - 1}" if high is not None else f"count {arr[j]} is negative"
                raise CorpusError(f"{self.folder / name}: document {d}: {what} (corrupt store)")
        return Batch(first, off - off[0], words, counts)

    def __iter__(self) -> Iterator[Batch]:
        """The batches in order; once all are read, their counts are checked against meta.json's
        ``n_tokens`` (a store altered after it was written is an error, not a silently other corpus;
        reads of a part, as a sharded fit makes, read only that part and check what they read)."""
        tokens = 0
        for i in range(self.n_batches):
            b = self.batch(i)
            tokens += int(b.counts.sum(dtype=np.int64))
            yield b
        self.check_tokens(tokens)

    def check_tokens(self, tokens: int) -> None:
        """Refuse (:class:`CorpusError`) a whole pass whose counts add up to ``tokens`` when
        meta.json says otherwise: the store was altered after it was written."""
        if tokens != self.n_tokens:
            raise CorpusError(f"{self.folder / 'counts.bin'}: the counts add up to {tokens} tokens but meta.json says "
                              f"n_tokens={self.n_tokens} (the store was altered after it was written)")

    def __len__(self) -> int:
        return self.n_batches

    def max_pieces(self, width: int = layout.PIECE) -> int:
        """The largest number of document pieces of ``width`` slots in one batch (streamed)."""
        best = 0
        for i in range(self.n_batches):
            first = i * self.batch_size
            off = self._offsets(first, min(self.n_docs, first + self.batch_size))
            best = max(best, int((-(-np.diff(off) // width)).sum()))
        return best

    def corpus(self, empty_docs: str = "error") -> Corpus:
        """The whole store as a Corpus (loads everything: for small stores).  ``empty_docs`` as in
        :meth:`Corpus.from_entries` (``"drop"`` renumbers the remaining documents)."""
        off = self._offsets(0, self.n_docs)
        words = self._read("words.bin", np.int32, 0, self.nnz)
        counts = self._read("counts.bin", np.int32, 0, self.nnz)
        if (counts < 0).any():
            raise CorpusError(f"{self.folder / 'counts.bin'}: entry {int(np.argmax(counts < 0))}: a negative count "
                              "(corrupt store)")
        self.check_tokens(int(counts.sum(dtype=np.int64)))
        docs = np.repeat(np.arange(self.n_docs), np.diff(off))
        return Corpus.from_entries(docs, words, counts, vocab=self.vocab(), n_docs=self.n_docs, empty_docs=empty_docs)


def _identity(meta_path: Path):
    """What changes when a writer replaces a store (its meta.json is a new file): device, inode,
    modification time; ``None`` when it is missing (a replacement under way)."""
    try:
        st = os.stat(meta_path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _meta_int(meta: dict, key: str, path, *, low: int = 0, high: int | None = None) -> int:
    """``meta[key]``: an integer in ``[low, high]``, else an error naming the file and the key."""
    v = meta.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < low or (high is not None and v > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise CorpusError(f"{path}: {key} must be an integer {bound}, got {v!r}")
    return v


#: The files a store consists of; a replacement rewrites every one of them.
STORE_FILES = ("offsets.bin", "words.bin", "counts.bin", "vocab.txt", "meta.json")
#: A hidden file in every store folder: it marks the folder as a store's while ``meta.json`` is
#: absent (a replacement killed between its renames), and its lock keeps two writers apart.
MARKER = ".topicjax-store"
_PENDING = ".writing-"


def is_store(folder) -> bool:
    """Whether ``folder`` holds a batch store (``meta.json`` of :data:`FORMAT`, or the marker of a
    store whose replacement was interrupted): the only folder a store writer replaces."""
    folder = Path(folder)
    if (folder / MARKER).is_file():
        return True
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == FORMAT


def _ours(name: str) -> bool:
    """The hidden files of a store write in progress (and the marker): not "other files"."""
    return name.startswith(MARKER) or (name.startswith(".") and _PENDING in name
                                       and name[1:].split(_PENDING)[0] in STORE_FILES)


def check_store_target(folder, inputs=()) -> Path:
    """``folder`` as a Path if a store may be written there -- a new folder, an empty one or one
    that :func:`is_store` (replaced) -- and it is not, does not hold and is not inside any of
    ``inputs`` (the files the conversion reads); else an
    :class:`~topicjax._outputs.OutputRefusedError` naming it.  Writes nothing."""
    check_not_input(folder, inputs, "the store")
    return check_folder(folder, owns=is_store, kind="a batch store", ignore=_ours)


def _check_shuffle(shuffle, seed) -> tuple[bool, int]:
    """``shuffle`` (a bool) and ``seed`` (an int >= 0) of a store writer, or a ValueError naming them."""
    if not isinstance(shuffle, (bool, np.bool_)):
        raise ValueError(f"shuffle must be True or False, got {shuffle!r}")
    return bool(shuffle), check_int(seed, "seed", 0)


class StoreWriter:
    """Appends documents (CSR pieces) to the flat files of a store.

    The rule of every writer (:mod:`topicjax._outputs`): the folder must be new, empty or hold a
    store (:func:`check_store_target`; ``inputs`` are the paths the conversion reads, which the
    store may not be, hold or lie inside).  Everything is written to hidden files inside the folder
    and renamed over the store's files only by :meth:`close`, ``meta.json`` last, so a conversion
    that fails or is killed leaves the earlier store (or nothing) as it was; other files in the
    folder are kept.  Two writers of one folder are refused (a lock).

    With ``shuffle=True`` the documents are stored in the order of a permutation seeded by ``seed``
    (``numpy.random.default_rng(seed).permutation(n_docs)``: stored document ``i`` is appended
    document ``perm[i]``), applied by :meth:`close` to the appended files, one block of documents
    at a time (memory: the D + 1 offsets and one block, not the corpus).  Batches are runs of
    consecutive stored documents, so a corpus appended sorted by label (20 Newsgroups) gives
    batches that each mix every label, as the online algorithm assumes.
    """

    def __init__(self, folder, batch_size: int, source: str, inputs=(), *, shuffle: bool = False, seed: int = 0):
        batch_size = check_int(batch_size, "batch_size", 1)  # documents per batch; 2.5 or "3" is refused
        self.shuffle, self.seed = _check_shuffle(shuffle, seed)
        self.folder = check_store_target(folder, inputs)
        self.created = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = contextlib.ExitStack()
        try:
            self._lock.enter_context(folder_lock(self.folder / f"{MARKER}.lock", f"a batch store to {self.folder}"))
            check_store_target(self.folder)  # again, now that no other writer can change it
            for e in os.scandir(self.folder):  # what killed writes left (no writer runs: the lock is ours)
                if e.name.startswith(".") and _PENDING in e.name and _ours(e.name):
                    os.unlink(e.path)
            self.id = secrets.token_hex(6)
            self.batch_size, self.source = int(batch_size), source
            self.fh = {n: open(self._pending(n), "xb") for n in ("offsets.bin", "words.bin", "counts.bin")}
        except BaseException:
            self._release()
            raise
        self.fh["offsets.bin"].write(np.zeros(1, np.int64).tobytes())
        self.n_docs = self.nnz = self.n_tokens = 0

    def _pending(self, name: str) -> Path:
        return self.folder / f".{name}{_PENDING}{self.id}"

    def append(self, lengths: np.ndarray, words: np.ndarray, counts: np.ndarray) -> None:
        lengths = np.asarray(lengths, np.int64)
        if lengths.size == 0:
            return
        ends = self.nnz + np.cumsum(lengths)
        self.fh["offsets.bin"].write(ends.astype(np.int64).tobytes())
        self.fh["words.bin"].write(np.asarray(words, np.int32).tobytes())
        self.fh["counts.bin"].write(np.asarray(counts, np.int32).tobytes())
        self.n_docs += int(lengths.size)
        self.nnz = int(ends[-1])
        self.n_tokens += int(np.asarray(counts, np.int64).sum())

    def _release(self) -> None:
        """Remove this write's hidden files (and the folder, if this writer made it and nothing else
        is in it), then drop the lock."""
        for f in getattr(self, "fh", {}).values():
            f.close()
        if hasattr(self, "id"):
            for name in STORE_FILES:
                self._pending(name).unlink(missing_ok=True)
        if self.created:
            with contextlib.suppress(OSError):
                (self.folder / f"{MARKER}.lock").unlink(missing_ok=True)
                self.folder.rmdir()  # only if empty: a store or another file that appeared stays
        self._lock.close()

    def _permute(self, block_docs: int = 1 << 16) -> None:
        """Rewrite the appended (closed) files in the seeded order of the documents."""
        offsets = np.fromfile(self._pending("offsets.bin"), np.int64)
        perm = np.random.default_rng(self.seed).permutation(self.n_docs)
        lengths = np.diff(offsets)[perm]
        src = {n: np.memmap(self._pending(n), np.int32, "r") if self.nnz else np.zeros(0, np.int32)
               for n in ("words.bin", "counts.bin")}
        tmp = {n: self.folder / f".{n}{_PENDING}{self.id}.shuffled" for n in src}
        try:
            with open(tmp["words.bin"], "xb") as fw, open(tmp["counts.bin"], "xb") as fc:
                for lo in range(0, self.n_docs, block_docs):
                    docs, lens = perm[lo:lo + block_docs], lengths[lo:lo + block_docs]
                    # the entries of the block's documents, in the new order: each document's run
                    # starts at its old offset (a run-length expansion of the starts)
                    run_start = np.repeat(offsets[docs] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
                    idx = run_start + np.arange(int(lens.sum()), dtype=np.int64)
                    fw.write(np.asarray(src["words.bin"][idx], np.int32).tobytes())
                    fc.write(np.asarray(src["counts.bin"][idx], np.int32).tobytes())
            del src
            for n, t in tmp.items():
                os.replace(t, self._pending(n))
        finally:
            for t in tmp.values():
                t.unlink(missing_ok=True)
        new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._pending("offsets.bin").write_bytes(new_offsets.tobytes())

    def abort(self) -> None:
        """Give up a conversion that failed: its hidden files go, an earlier store is untouched."""
        self._release()

    def close(self, vocab: list[str], extra: dict | None = None) -> "BatchStore":
        try:
            for f in self.fh.values():
                f.close()
            if self.n_docs == 0:
                raise CorpusError(f"{self.source}: no documents to store")
            if self.shuffle:
                self._permute()
            seen: dict[str, int] = {}
            for i, w in enumerate(vocab):
                if not w or "\n" in w or w != w.strip():
                    raise CorpusError(f"vocabulary entry {i} ({w!r}) cannot be stored one word per line")
                if seen.setdefault(w, i) != i:
                    raise CorpusError(f"{self.source}: the vocabulary repeats {w!r} (entries {seen[w]} and {i}); a "
                                      "store's words must be distinct")
            self._pending("vocab.txt").write_text("".join(f"{w}\n" for w in vocab), encoding="utf-8")
            meta = dict(format=FORMAT, n_docs=self.n_docs, n_words=len(vocab), nnz=self.nnz, n_tokens=self.n_tokens,
                        batch_size=self.batch_size, source=self.source, **(extra or {}),
                        **({"shuffle_seed": self.seed} if self.shuffle else {}))
            self._pending("meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
            # The marker first and meta.json last: a kill in between leaves a folder that is still
            # recognised as a store's (and replaced by the next write) but never read as a store.
            (self.folder / MARKER).write_text(FORMAT + "\n", encoding="utf-8")
            (self.folder / "meta.json").unlink(missing_ok=True)
            for name in STORE_FILES:
                os.replace(self._pending(name), self.folder / name)
            self.created = False  # the folder holds a store now: never removed
        finally:
            self._release()
        return BatchStore(self.folder)


def write_store(parts: Iterable[Corpus], folder, *, batch_size: int = 1000, shuffle: bool = False,
                seed: int = 0) -> BatchStore:
    """Write corpora one after another into a store (all with the first part's vocabulary).

    ``shuffle=True`` stores the documents of all parts in an order permuted by ``seed`` (an int
    >= 0; see :class:`StoreWriter`): the online fit reads batches in the store's order, so a corpus
    sorted by label is best stored shuffled.  ``meta.json`` records the seed as ``shuffle_seed``.

    Only one part is in memory at a time when ``parts`` is a generator, so a corpus can be
    converted piece by piece.  ``folder`` must be new, empty or hold a store, which is replaced
    only once every part is written (:class:`StoreWriter`); anything else is refused with
    :class:`~topicjax._outputs.OutputRefusedError` before the first part is read.

    Raises:
        OutputRefusedError: ``folder`` is ``.``, a file, a folder of other files, or being written
            by another process.
        CorpusError: no parts, parts with different vocabularies, a vocabulary that repeats a word.
    """
    check_store_target(folder)  # before the first part is made
    _check_shuffle(shuffle, seed)
    writer = None
    vocab = None
    try:
        for i, part in enumerate(parts):
            if vocab is None:
                vocab = list(part.vocab)
                writer = StoreWriter(folder, batch_size, "corpus parts", shuffle=shuffle, seed=seed)
            elif tuple(part.vocab) != tuple(vocab):
                raise CorpusError(f"part {i} has another vocabulary than part 0 (re-index it with Corpus.with_vocab)")
            writer.append(np.diff(part.doc_offsets), part.word_ids, part.counts)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is None:
        raise CorpusError("no corpus parts to store")
    return writer.close(vocab)
