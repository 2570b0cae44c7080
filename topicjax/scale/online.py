"""Corpora larger than memory: an on-disk batch store and online PLSA/ARTM (BigARTM's fit_online).

The batch store
---------------
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

Batches are runs of ``batch_size`` consecutive documents.  Converters stream their input and never
hold more than one group of documents: :func:`convert_uci` (UCI ``docword`` file, read line by
line), :func:`convert_vw` (Vowpal Wabbit text, parsed ``batch_size`` lines at a time by
:func:`topicjax.data.formats.read_vw`), and :func:`write_store` (any iterable of in-memory
:class:`~topicjax.data.corpus.Corpus` parts with one vocabulary, appended one after the other).

Online EM
---------
:func:`fit_online` is the online algorithm of BigARTM (``ARTM.fit_online``; Vorontsov et al.,
ARTM sec. 4 "online algorithm"; Hoffman et al. 2010 for the step size).  For each batch ``b``:

1. Θ_b of its documents starts from uniform and takes ``doc_passes`` iterations of ARTM
   eq. 16 with Φ fixed (with the regularizer's Θ terms, if any);
2. one full E-step at Θ_b gives the batch's counts ``n̂_wt = φ_wt ∂L_b/∂φ_wt`` (eq. 7), added
   up over ``update_every`` batches;
3. then ``n_wt ← (1 - ρ) n_wt + ρ n̂_wt`` with ``ρ = (τ0 + t)^(-κ)``, ``t`` the number of
   updates so far, and ``Φ ∝ (n_wt + φ ∂R/∂φ)_+`` (eq. 15) by the one M-step of
   :mod:`topicjax.core.mstep` (the counts enter as :func:`~topicjax.core.mstep.counts_likelihood`).

Steps 1-2 are the offline pass of ``ARTM(doc_passes=...)``, so with one batch and ρ = 1 the
online fit is the offline fit.  Each batch is one iteration of the driver of
:mod:`topicjax.core.driver` (progress, history, non-finite and collapse checks).

BigARTM's defaults are ``tau0 = 1024, kappa = 0.7, update_every = 1``.  Memory is Φ, n_wt (both
W x T) and one batch (its counts and its T x batch_size Θ): it does not grow with the number of
documents.  Every batch is padded to one shape, so the per-batch step compiles once.

>>> import tempfile, topicjax as tj
>>> from topicjax.scale import online
>>> corpus, _ = tj.datasets.make_bars(n_docs=300, seed=0)
>>> store = online.write_store([corpus], tempfile.mkdtemp(), batch_size=100)
>>> store.n_docs, store.n_batches
(300, 3)
>>> phi, history = online.fit_online(store, n_components=10, passes=2, progress=False)
>>> phi.shape
(25, 10)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import driver, em, estep, layout, mstep
from topicjax.data.corpus import INFERRED_SLACK, MAX_ID, Corpus, CorpusError, CorpusWarning, inferred_size_limit

__all__ = [
    "BatchStore",
    "Batch",
    "OnlineState",
    "write_store",
    "convert_uci",
    "convert_vw",
    "OnlineStatic",
    "online_init",
    "batch_step",
    "fit_online",
    "infer_theta",
]

FORMAT = "topicjax-batches/1"


# =============================================================================== the store
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
    """An on-disk corpus written by :func:`write_store`, :func:`convert_uci` or :func:`convert_vw`.

    ``store.batch(i)`` reads batch ``i`` through a memory map of just its byte range;
    iterating yields the batches in order.  ``store.corpus()`` loads everything as a
    :class:`~topicjax.data.corpus.Corpus` (only for corpora that fit in memory, e.g. in tests).
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        meta_path = self.folder / "meta.json"
        if not meta_path.is_file():
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

    def vocab(self) -> list[str]:
        path = self.folder / "vocab.txt"
        try:
            words = path.read_text(encoding="utf-8").split("\n")[:-1]
        except UnicodeDecodeError as e:
            raise CorpusError(f"{path}: not valid utf-8 ({e})") from None
        if len(words) != self.n_words:
            raise CorpusError(f"{path}: {len(words)} lines but meta.json says n_words={self.n_words}")
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
        last = min(self.n_docs, first + self.batch_size)
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
        for i in range(self.n_batches):
            yield self.batch(i)

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
        docs = np.repeat(np.arange(self.n_docs), np.diff(off))
        return Corpus.from_entries(docs, words, counts, vocab=self.vocab(), n_docs=self.n_docs, empty_docs=empty_docs)


def _meta_int(meta: dict, key: str, path, *, low: int = 0, high: int | None = None) -> int:
    """``meta[key]``: an integer in ``[low, high]``, else an error naming the file and the key."""
    v = meta.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < low or (high is not None and v > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise CorpusError(f"{path}: {key} must be an integer {bound}, got {v!r}")
    return v


class _Writer:
    """Appends documents (CSR pieces) to the flat files of a store."""

    def __init__(self, folder, batch_size: int, source: str):
        from topicjax.core.validation import check_int

        batch_size = check_int(batch_size, "batch_size", 1)  # documents per batch; 2.5 or "3" is refused
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "meta.json").unlink(missing_ok=True)  # a half-written store is not a store
        self.batch_size, self.source = int(batch_size), source
        self.fh = {n: open(self.folder / n, "wb") for n in ("offsets.bin", "words.bin", "counts.bin")}
        self.fh["offsets.bin"].write(np.zeros(1, np.int64).tobytes())
        self.n_docs = self.nnz = self.n_tokens = 0

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

    def abort(self) -> None:
        """Close the files of a conversion that failed (the folder stays without meta.json)."""
        for f in self.fh.values():
            f.close()

    def close(self, vocab: list[str], extra: dict | None = None) -> "BatchStore":
        for f in self.fh.values():
            f.close()
        if self.n_docs == 0:
            raise CorpusError(f"{self.source}: no documents to store")
        for i, w in enumerate(vocab):
            if not w or "\n" in w or w != w.strip():
                raise CorpusError(f"vocabulary entry {i} ({w!r}) cannot be stored one word per line")
        (self.folder / "vocab.txt").write_text("".join(f"{w}\n" for w in vocab), encoding="utf-8")
        meta = dict(format=FORMAT, n_docs=self.n_docs, n_words=len(vocab), nnz=self.nnz, n_tokens=self.n_tokens,
                    batch_size=self.batch_size, source=self.source, **(extra or {}))
        (self.folder / "meta.json").write_text(json.dumps(meta, indent=1))
        return BatchStore(self.folder)


def write_store(parts: Iterable[Corpus], folder, *, batch_size: int = 1000) -> BatchStore:
    """Write corpora one after another into a store (all with the first part's vocabulary).

    Only one part is in memory at a time when ``parts`` is a generator, so a corpus can be
    converted piece by piece.
    """
    writer = None
    vocab = None
    try:
        for i, part in enumerate(parts):
            if vocab is None:
                vocab = list(part.vocab)
                writer = _Writer(folder, batch_size, "corpus parts")
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


#: The longest line of a docword file read by :func:`convert_uci` (an entry is three integers;
#: a longer line is not an entry, and reading it whole could hold a gigabyte line in memory).
UCI_MAX_LINE = 1 << 12


def _binary(path):
    """The file's bytes as a stream, gunzipped on the fly when it starts with the gzip magic."""
    import gzip

    with open(path, "rb") as probe:
        gz = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _decode_failure(path, encoding: str) -> CorpusError:
    """The error for a file that is not valid ``encoding``, naming the first bad line (a second
    pass over the bytes, line by line: the text reader decodes in chunks, so it cannot say)."""
    try:
        with _binary(path) as raw:
            for ln, line in enumerate(raw, 1):
                try:
                    line.decode(encoding)
                except UnicodeDecodeError as e:
                    return CorpusError(f"{path}, line {ln}: byte {line[e.start:e.start + 1]!r} is not valid {encoding}; "
                                       "pass encoding='latin-1' (or the file's encoding)")
    except Exception:  # noqa: BLE001 - the stream's own fault is reported where it is met
        pass
    return CorpusError(f"{path}: not valid {encoding}; pass encoding='latin-1' (or the file's encoding)")


def _numbered_lines(path, encoding: str, max_line: int | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a text file read as a stream (gzip recognised by its magic).

    Lines end at ``\\n`` only, as in :func:`topicjax.data.formats.split_lines`, so that line numbers
    agree with the in-memory readers, and a byte-order mark at the start is dropped, as they drop
    it.  A decoding error, a corrupt or truncated gzip stream, or a line longer than ``max_line``
    characters is a :class:`CorpusError` naming the file.
    """
    import gzip
    import io
    import zlib

    from topicjax.data.readers.common import strip_bom

    ln = 0
    with io.TextIOWrapper(_binary(path), encoding=encoding, newline="\n") as fh:
        while True:
            try:
                line = fh.readline(max_line + 1 if max_line else -1)
            except UnicodeDecodeError:
                raise _decode_failure(path, encoding) from None
            except EOFError:
                raise CorpusError(f"{path}: the gzip stream ends early (truncated file)") from None
            except (gzip.BadGzipFile, zlib.error, OSError) as e:
                raise CorpusError(f"{path}: corrupt gzip data ({e})") from None
            if not line:
                return
            ln += 1
            if ln == 1:  # a byte-order mark is not part of the first line (as read_text strips it)
                line = strip_bom(line)
            if max_line and len(line) > max_line and not line.endswith("\n"):
                raise CorpusError(f"{path}, line {ln}: longer than {max_line} characters (not a docword entry)")
            yield ln, line


def convert_uci(path, folder, *, vocab_path=None, name: str | None = None, batch_size: int = 1000,
                block_lines: int = 200_000, encoding: str = "utf-8") -> BatchStore:
    """Stream a UCI bag-of-words corpus (``docword.NAME.txt[.gz]`` + ``vocab.NAME.txt``) into a store.

    The docword file is read ``block_lines`` lines at a time, so memory is one block whatever the
    corpus size; its entries must be grouped by document in increasing order (as UCI files are).
    Each block is parsed by :func:`topicjax.data.formats.parse_uci_entries`, so lines are accepted or
    refused, with the same messages naming the file and line, exactly as by
    :func:`topicjax.data.formats.read_uci`.  Documents of the header's D without entries are kept as
    empty documents, within :func:`~topicjax.data.corpus.inferred_size_limit` of the documents that have
    entries (a header ``D = 10**9`` or a jump of the document ids to 10**9 is an error, not a
    gigabyte of offsets).
    """
    from topicjax.data import formats

    from topicjax.core.validation import check_int

    block_lines = check_int(block_lines, "block_lines", 1)  # np.int64 too
    docword, vocab_src = formats.find_uci(Path(path), vocab_path, name)
    vocab = formats.read_vocab(vocab_src, encoding=encoding) if isinstance(vocab_src, (str, os.PathLike)) \
        else [str(v) for v in vocab_src]
    lines = _numbered_lines(docword, encoding, UCI_MAX_LINE)
    header = [text for _, (_, text) in zip(range(3), lines)]
    D, W, nnz = formats.parse_uci_header(header, docword)
    if W != len(vocab):
        raise CorpusError(f"{docword}: the header says W={W} but {vocab_src} has {len(vocab)} words")
    writer = _Writer(folder, batch_size, str(docword))
    try:
        empty = np.zeros(0, np.int64)
        pend_d, pend_w, pend_c = empty, empty, empty  # entries of the document that may continue
        current = 0  # 0-based id of the first document not yet written
        last = 0  # 1-based id of the last document seen (ids must not decrease)
        seen = 0
        n_with = 0  # documents with entries so far
        line_no = 3
        while True:
            block = [text for _, (_, text) in zip(range(block_lines), lines)]
            if not block:
                break
            first_line = line_no + 1
            line_no += len(block)
            body = "".join(block)
            arr = formats.parse_uci_entries(body, first_line, D, W, docword, nnz, seen)
            if arr.shape[0] == 0:
                continue
            d, w, c = arr[:, 0], arr[:, 1], arr[:, 2]
            prev = np.concatenate([[last], d[:-1]])
            down = np.flatnonzero(d < prev)
            if down.size:
                j = int(down[0])
                raise CorpusError(f"{docword}, line {_entry_line(body, first_line, j)}: document {d[j]} comes after "
                                  f"document {prev[j]}; entries must be grouped by document in increasing order")
            new_doc = d != prev
            rank = n_with + np.cumsum(new_doc)  # documents with entries up to each entry
            jump = np.flatnonzero(new_doc & (d > 2 * rank + INFERRED_SLACK))
            if jump.size:
                j = int(jump[0])
                raise formats.empty_run_error(int(d[j]), int(rank[j]) - 1, docword, _entry_line(body, first_line, j))
            n_with = int(rank[-1])
            seen += d.size
            last = int(d[-1])
            keep = c > 0
            d = np.concatenate([pend_d, d[keep] - 1])
            w = np.concatenate([pend_w, w[keep] - 1])
            c = np.concatenate([pend_c, c[keep]])
            # Every document before the block's last one is complete: write them.
            open_doc = last - 1
            done = d < open_doc
            lengths = np.bincount(d[done] - current, minlength=open_doc - current)
            writer.append(lengths, w[done], c[done])
            current = open_doc
            pend_d, pend_w, pend_c = d[~done], w[~done], c[~done]
        if seen != nnz:
            raise CorpusError(f"{docword}: the header says NNZ={nnz} but the file has {seen} entries (truncated?)")
        if D > inferred_size_limit(n_with):  # the rule of formats.check_uci_documents, as read_uci applies it
            formats.check_uci_documents(np.arange(n_with), D, docword)
        writer.append(np.bincount(pend_d - current, minlength=D - current), pend_w, pend_c)
        return writer.close(vocab)
    except BaseException:
        writer.abort()
        raise


def _entry_line(body: str, first_line: int, j: int) -> int:
    """The line number of the ``j``-th entry (0-based) of ``body``, blank lines skipped."""
    k = -1
    for ln, text in enumerate(body.split("\n"), first_line):
        if text.split():
            k += 1
            if k == j:
                return ln
    return first_line


def convert_vw(path, folder, *, batch_size: int = 1000, encoding: str = "utf-8", **read_kwargs) -> BatchStore:
    """Stream a Vowpal Wabbit text file (BigARTM's format) into a store, ``batch_size`` lines at a
    time, each group parsed by :func:`topicjax.data.formats.read_vw` (same tokens, namespaces,
    vocabulary keys and messages, with the line numbers of the whole file).  The vocabulary is
    numbered in order of first appearance; documents without tokens are dropped (as
    ``empty_docs="drop"``) and counted in ``meta.json``.  Document names are not stored, so
    repeated names (a warning of :func:`~topicjax.data.formats.read_vw`) do not matter here; nor are
    labels (the ``@labels`` namespace, read as labels by default, not as words).
    """
    import tempfile
    import warnings

    from topicjax.data import formats
    from topicjax.data.readers.common import EMPTY_FILE

    writer = _Writer(folder, batch_size, str(path))
    try:
        keys: dict[str, int] = {}
        dropped = n_read = 0
        lines = _numbered_lines(path, encoding)
        with tempfile.TemporaryDirectory() as tmp:
            group_file = Path(tmp) / "group.vw"
            first_line = 1
            while True:
                group = [text for _, (_, text) in zip(range(batch_size), lines)]
                if not group:
                    break
                if not "".join(group).strip():  # blank lines only: no document (read_vw refuses such a file)
                    first_line += len(group)
                    continue
                group_file.write_text("".join(group), encoding="utf-8")
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", CorpusWarning)
                        part = formats.read_vw(group_file, empty_docs="drop", first_index=n_read, **read_kwargs)
                except CorpusError as e:  # name the line in the whole file, not in the group
                    msg = str(e).replace(str(group_file), str(path))
                    msg = re.sub(r"line (\d+)", lambda m: f"line {int(m.group(1)) + first_line - 1}", msg, count=1)
                    raise CorpusError(msg) from None
                first_line += len(group)
                n_read += part.n_docs + int(part.dropped_docs.size)
                dropped += int(part.dropped_docs.size)
                mapping = np.array([keys.setdefault(k, len(keys)) for k in part.vocab], np.int64)
                writer.append(np.diff(part.doc_offsets), mapping[part.word_ids], part.counts)
        if n_read == 0:
            raise CorpusError(f"{path}: {EMPTY_FILE}")  # as read_vw says it
        return writer.close(list(keys), {"dropped_docs": dropped})
    except BaseException:
        writer.abort()
        raise


# =============================================================================== online EM
class OnlineState(NamedTuple):
    """Φ (W, T), the running counts n_wt (W, T), the pending batch counts, the update count, the
    last batch's log-likelihood and the regularizers' data."""

    phi: jax.Array
    n_wt: jax.Array
    pending: jax.Array
    updates: jax.Array
    loglik: jax.Array
    params: tuple = ()


class OnlineStatic(NamedTuple):
    doc_passes: int = 10
    kappa: float = 0.7
    tau0: float = 1024.0


def online_init(key, n_words: int, n_components: int, *, reg=None, dtype=jnp.float32, phi=None) -> OnlineState:
    """The start of the online algorithm: Φ as :func:`topicjax.core.em.init` draws it (the same Φ
    for the same key; or a fitted model's ``phi``) and running counts ``n_wt = Φ``, a pseudo-count
    mass of one per topic spread over every word (BigARTM's start: its n_wt after ``initialize``
    is its random p_wt).

    Why not zero counts: the E-step is multiplicative (``n̂_wt = φ_wt ∂L/∂φ_wt``), so a word with
    ``φ_wt = 0`` never receives counts again.  From zero counts the first update makes Φ zero on
    every word the first batch does not contain, for ever (10,861 of 22,379 words of 20 Newsgroups
    in batches of 1,000 documents).  The start's mass is positive on every word but small against
    one batch's counts (ρ n̂ holds ρ x the batch's tokens), so it keeps every word alive until its
    batch comes without holding Φ near its random start."""
    if phi is None:
        phi = em.init(key, n_words, 1, n_components, dtype=dtype).phi
    else:
        phi = jnp.asarray(phi, dtype)
    n_wt = phi
    return OnlineState(phi, n_wt, jnp.zeros_like(phi), jnp.zeros((), jnp.int32), jnp.zeros((), dtype),
                       () if reg is None else reg.params)


def batch_step(state: OnlineState, data: layout.DocWordCounts, reg, apply_update, static: OnlineStatic, n_docs: int):
    """One batch of the online algorithm: the pass of :func:`topicjax.core.em.step` with
    ``doc_passes`` (Θ of the batch from uniform, ``doc_passes`` Θ-only iterations, then one
    full E-step whose counts ``n̂_wt`` are added to ``pending``); when ``apply_update`` (traced)
    ``n_wt ← (1 - ρ) n_wt + ρ pending``, ``ρ = (tau0 + t)^(-kappa)``, and Φ is the one M-step
    :func:`topicjax.core.mstep.m_step` of the counts ``n_wt`` with the regularizer's Φ terms at
    the batch's Θ (eq. 15)."""
    phi = state.phi
    T = phi.shape[1]
    it = state.updates + 1
    penalty, keep = em.penalties(reg, state.params, it)
    theta = em.theta_passes(phi, jnp.full((T, n_docs), 1.0 / T, phi.dtype), data, penalty, keep, static.doc_passes)
    ll, g_phi, _ = estep.expected_counts(phi, theta, data, need_theta=False)
    pending = state.pending + phi * g_phi

    def update(_):
        rho = jnp.power(static.tau0 + state.updates.astype(phi.dtype), -static.kappa)
        n_wt = (1 - rho) * state.n_wt + rho * pending
        new_phi = mstep.m_step(mstep.counts_likelihood(n_wt), phi, theta, penalty, keep=keep)[2]
        return state._replace(phi=new_phi, n_wt=n_wt, pending=jnp.zeros_like(pending), updates=state.updates + 1)

    state = jax.lax.cond(apply_update, update, lambda _: state._replace(pending=pending), None)
    return state._replace(loglik=ll)


def _algo_step(state, args, static):
    data, reg, apply_update, _ = args
    return batch_step(state, data, reg, apply_update, static[0], static[1])


def _algo_objective(state, args, static):
    return state.loglik


def _algo_record(state, args, static):
    return {"updates": state.updates}


def _algo_health(state, static):
    return jnp.isfinite(state.phi).all() & jnp.isfinite(state.loglik), jnp.any(state.phi.sum(0) > 0)


#: The online algorithm for :func:`topicjax.core.driver.run` (one iteration = one batch).
ALGORITHM = driver.Algorithm(step=_algo_step, objective=_algo_objective, record=_algo_record, health=_algo_health)


def _batch_data(batch: Batch, n_docs: int, n_chunks: int, k: int, dtype) -> layout.DocWordCounts:
    """A batch in the sliced layout with ``n_docs`` Θ columns and exactly ``n_chunks`` chunks."""
    off = batch.offsets
    if batch.n_docs < n_docs:  # the last batch: empty documents fill the fixed Θ shape
        off = np.concatenate([off, np.full(n_docs - batch.n_docs, off[-1])])
    arrays = layout.sliced_layout(off, batch.words, batch.counts, layout.PIECE, k, n_chunks, dtype=dtype)
    return layout.DocWordCounts(*(jnp.asarray(a) for a in arrays))


def fit_online(store: BatchStore | str | os.PathLike, n_components: int, *, passes: int = 1, update_every: int = 1,
               tau0: float = 1024.0, kappa: float = 0.7, doc_passes: int = 10, regularizers=None,
               random_state=0, state: OnlineState | None = None, progress: bool = True):
    """Online PLSA/ARTM over a batch store (BigARTM's ``fit_online``; see the module docstring).

    ``passes`` sweeps over the store, batches in order; the step size counter continues across
    passes.  ``regularizers``: anything :func:`topicjax.regularizers.as_regularizer` accepts (bound
    to the batch's shape: regularizers with data about particular documents, or that need corpus
    statistics, are refused with a clear error).  ``state`` resumes a previous fit.  Returns
    ``(phi (W, T) numpy, history)`` where history has one record per batch: ``pass``, ``batch``,
    ``objective`` (log-likelihood of the batch under the Φ *before* the batch's update, with the
    batch's own Θ), ``perplexity`` and ``rho`` of the update when one was applied.  In the first
    pass that is a progressive-validation score: words that no earlier batch contained have φ = 0
    there, which makes it large (Φ is plain PLSA unless a smoothing regularizer is given).

    With one batch holding every document, ``kappa=0`` (ρ = 1) and ``update_every=1``, each pass
    is the offline pass of ``ARTM(doc_passes=doc_passes)``: the same model up to round-off.
    """
    from topicjax.artm.model import check_regularizers
    from topicjax.core.random import as_key, check_random_state
    from topicjax.core.validation import check_bool, check_int, check_number
    from topicjax.regularizers import Context, as_regularizer

    store = store if isinstance(store, BatchStore) else BatchStore(store)
    check_int(n_components, "n_components", 1)
    check_int(update_every, "update_every", 1)
    check_int(doc_passes, "doc_passes", 1)
    check_int(passes, "passes", 0)
    check_number(kappa, "kappa", 0.0)
    check_number(tau0, "tau0", 0.0)
    check_random_state(random_state)
    check_bool(progress, "progress")
    if state is not None and not isinstance(state, OnlineState):
        raise ValueError(f"state must be None or an OnlineState of a previous fit, got {type(state).__name__}")
    reg = as_regularizer(check_regularizers(regularizers))
    for t in reg.terms:
        if t.per_document:
            raise ValueError(f"regularizer {t.name!r} holds data about particular documents; the online fit sees "
                             "batches, not documents by index")
    k = layout.DEFAULT_CHUNK // layout.PIECE
    n_chunks = max(1, -(-store.max_pieces() // k))
    n_docs = min(store.batch_size, store.n_docs)
    ctx = Context(n_words=store.n_words, n_topics=int(n_components), n_docs=n_docs)
    reg = reg.bind(ctx).resolve(max(passes * store.n_batches, 1)).cast(jnp.float32)
    if reg.on_host:
        raise ValueError("the online fit does not support schedules of the score history")
    if state is None:
        state = online_init(as_key(random_state), store.n_words, int(n_components), reg=reg)
    if state.phi.shape != (store.n_words, n_components):
        raise ValueError(f"the state's Φ is {state.phi.shape}, the store needs ({store.n_words}, {n_components})")
    reg.check(state.phi, jnp.full((int(n_components), n_docs), 1.0 / n_components, state.phi.dtype), state.params)
    total = passes * store.n_batches
    static = (OnlineStatic(int(doc_passes), float(kappa), float(tau0)), int(n_docs))
    meta = []  # (pass, batch, tokens, rho) of each iteration, for the history

    def before(iteration, history):
        p, i = divmod(iteration - 1, store.n_batches)
        batch = store.batch(i)
        apply = (iteration % update_every == 0) or (iteration == total)
        updates = sum(1 for m in meta if m[3] is not None)
        meta.append((p + 1, i, int(batch.counts.sum()),
                     float(np.power(tau0 + updates, -kappa)) if apply else None))
        return _batch_data(batch, n_docs, n_chunks, k, np.float32), reg, jnp.asarray(apply), None

    state, records = driver.run(ALGORITHM, static, state, None, max_iter=total, progress=progress, desc="online EM",
                                before=before)
    history = []
    for r, (p, i, n_tok, rho) in zip(records, meta):
        rec = {"iteration": r["iteration"], "pass": p, "batch": i, "objective": r["objective"],
               "perplexity": float(np.exp(-r["objective"] / n_tok)) if n_tok else float("nan"),
               "seconds": r["seconds"]}
        if rho is not None:
            rec["rho"] = rho
        history.append(rec)
    return np.asarray(state.phi), history


def infer_theta(store: BatchStore | str | os.PathLike, phi, *, n_iter: int = 30,
                regularizers=None) -> Iterator[tuple[int, np.ndarray]]:
    """Θ of the store's documents with Φ fixed, batch by batch: yields ``(first_doc, theta (T, n))``."""
    from topicjax.regularizers import Context, as_regularizer

    store = store if isinstance(store, BatchStore) else BatchStore(store)
    phi = jnp.asarray(phi, jnp.float32)
    for batch in store:
        data = layout.DocWordCounts(*(jnp.asarray(a) for a in layout.sliced_layout(
            batch.offsets, batch.words, batch.counts, layout.PIECE, layout.DEFAULT_CHUNK // layout.PIECE)))
        ctx = Context(n_words=phi.shape[0], n_topics=phi.shape[1], n_docs=batch.n_docs, phase="transform")
        reg = as_regularizer(regularizers).bind(ctx).cast(jnp.float32)
        theta = em.infer_theta(phi, data, batch.n_docs, reg, n_iter=n_iter)
        yield batch.first, np.asarray(theta)
