"""UCI bag of words: ``docword.NAME.txt[.gz]`` (header ``D``, ``W``, ``NNZ``, then ``docID wordID
count`` lines, 1-based) and ``vocab.NAME.txt``.  The line parser here is shared with the streaming
converter :func:`topicjax.scale.online.convert_uci`."""

from __future__ import annotations

import io
import itertools
import os
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from topicjax.data.entries import INFERRED_SLACK, MAX_ID, CorpusError, Entries, inferred_size_limit, present_documents
from topicjax.data.readers.common import (
    INT32_MAX,
    INT_PATTERN,
    BadValue,
    check_empty_docs,
    file_error,
    is_gzip,
    check_targets,
    open_write,
    parse_count,
    parse_id,
    read_vocab,
    report_missing,
    short,
    split_lines,
    stream_blocks,
    write_vocab,
)


DOCWORD_NAME = re.compile(r"^docword\.(?P<name>.+)\.txt(?:\.gz)?$")
#: What the readers say of a docword file without anything in it.
EMPTY_UCI = "the file is empty (expected the header D, W, NNZ, then 'docID wordID count' lines)"


def find_uci(path: Path, vocab_path, name: str | None):
    """(docword file, vocabulary file or the given vocabulary) for a folder or a docword file."""
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if DOCWORD_NAME.match(p.name) and p.is_file())
        if name is not None:
            found = [p for p in found if DOCWORD_NAME.match(p.name).group("name") == name]
        if not found:
            what = f"docword.{name}.txt[.gz]" if name else "docword.*.txt[.gz]"
            raise CorpusError(f"{path}: no {what} file in this folder (not a UCI bag-of-words folder)")
        if len(found) > 1:
            names = sorted({DOCWORD_NAME.match(p.name).group("name") for p in found})
            if len(names) > 1:
                raise CorpusError(
                    f"{path}: several UCI corpora in this folder ({', '.join(names)}); pass name=..."
                )
            raise CorpusError(f"{path}: both {found[0].name} and {found[1].name}; keep one")
        docword = found[0]
    elif path.is_file():
        docword = path
    else:
        raise FileNotFoundError(f"{path} does not exist")
    if vocab_path is not None:
        return docword, vocab_path
    m = DOCWORD_NAME.match(docword.name)
    if m:
        for cand in (f"vocab.{m.group('name')}.txt", f"vocab.{m.group('name')}.txt.gz"):
            if (docword.parent / cand).is_file():
                return docword, docword.parent / cand
        raise CorpusError(
            f"{docword}: no vocab.{m.group('name')}.txt beside it; pass the vocabulary file as vocab_path"
        )
    raise CorpusError(f"{docword}: not named docword.NAME.txt[.gz], so pass the vocabulary file as vocab_path")


def parse_uci_header(lines: Sequence[str], path) -> tuple[int, int, int]:
    """``(D, W, NNZ)`` from the first three lines of a docword file; an error naming the line
    when one is missing, not an integer, negative, or (``D``, ``W``) more than int32 ids hold, and
    one naming the file when it is empty."""
    if len(lines) < 3 and not "".join(lines).strip():  # the file ends before its header: nothing in it
        raise file_error(path, None, EMPTY_UCI)
    values = []
    for i, label in enumerate(("D (number of documents)", "W (number of words)", "NNZ (number of entries)")):
        if i >= len(lines) or not lines[i].strip():
            raise file_error(path, i + 1, f"truncated header: expected {label} on this line")
        tok = lines[i].strip()
        if not INT_PATTERN.fullmatch(tok):
            raise file_error(path, i + 1, f"header value {label} must be an integer, got {short(tok)}")
        v = int(tok)
        if v < 0:
            raise file_error(path, i + 1, f"header value {label} is negative ({v})")
        if i < 2 and v > MAX_ID:
            raise file_error(path, i + 1, f"header value {label} is {v}, more than {MAX_ID} (ids are stored as int32)")
        values.append(v)
    return values[0], values[1], values[2]


def scan_uci_lines(lines, D: int, W: int, path, nnz: int, seen: int = 0) -> np.ndarray:
    """Parse numbered lines ``(line_number, text)`` of docword entries, line by line: the
    reference that names the first bad line (the fast paths of :func:`~topicjax.data.formats.read_uci` and
    :func:`topicjax.scale.online.convert_uci` fall back to it on any doubt, so both accept and refuse
    the same lines with the same messages).

    Blank lines are skipped; more than ``nnz - seen`` entries (``seen`` read before these lines)
    is an error naming the line ("more entries than NNZ").
    Returns an ``(entries, 3)`` int64 array ``docID, wordID, count`` (1-based ids).
    """
    rows: list[tuple[int, int, int]] = []
    for ln, line in lines:
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) != 3:
                raise BadValue(f"expected 'docID wordID count', got {short(line)}")
            d = parse_id(parts[0], "document id")
            w = parse_id(parts[1], "word id")
            if not 1 <= d <= D:
                raise BadValue(f"document id {d} is outside 1..{D} (D in the header)")
            if not 1 <= w <= W:
                raise BadValue(f"document {d}: word id {w} is outside 1..{W} (W in the header)")
            try:
                c = parse_count(parts[2])
            except BadValue as e:
                raise BadValue(f"document {d}, word id {w}: {e}") from None
        except BadValue as e:
            raise file_error(path, ln, str(e)) from None
        rows.append((d, w, c))
        if seen + len(rows) > nnz:
            raise file_error(path, ln, f"more entries than NNZ={nnz} given in the header")
    return np.asarray(rows, np.int64).reshape(-1, 3)


def parse_uci_entries(body: str, first_line: int, D: int, W: int, path, nnz: int, seen: int = 0) -> np.ndarray:
    """The entries of ``body``, consecutive docword lines of which the first is line
    ``first_line`` of the file (blank lines included, so lines keep their numbers): numpy's C
    parser when every line is a plain in-range entry, else :func:`scan_uci_lines`, which names the
    first bad line.  ``seen`` entries were read before; more than ``nnz`` in all is an error.
    Returns an ``(entries, 3)`` int64 array of 1-based ``docID, wordID, count``.
    """
    arr = _fast_uci(body, D, W)
    if arr is not None and seen + arr.shape[0] <= nnz:
        return arr
    return scan_uci_lines(enumerate(split_lines(body), first_line), D, W, path, nnz, seen)


def _fast_uci(body: str, D: int, W: int) -> np.ndarray | None:
    """numpy's C parser for entries that are plain in-range integers; None on any doubt."""
    if not body.strip():
        return np.zeros((0, 3), np.int64)
    if not body.isascii() or "_" in body:  # what the line scanner refuses, numpy might take
        return None
    try:
        arr = np.loadtxt(io.StringIO(body), dtype=np.int64, comments=None, ndmin=2)
    except (ValueError, OverflowError):
        return None
    if arr.shape[1:] != (3,) or (arr.size and not (
        arr[:, 0].min() >= 1 and arr[:, 0].max() <= D and arr[:, 1].min() >= 1 and arr[:, 1].max() <= W
        and arr[:, 2].min() >= 0 and arr[:, 2].max() <= INT32_MAX
    )):
        return None
    return arr


def empty_run_error(doc_id: int, n_before: int, path, line: int | None = None) -> CorpusError | None:
    """The error for a document ``doc_id`` (1-based) with entries that has only ``n_before``
    documents with entries before it, when the documents without entries before it are more than
    :func:`~topicjax.data.corpus.inferred_size_limit` allows (more than ``n_before + 1 + 1024``);
    None when it is within the bound.  The rule of :func:`check_uci_documents`, shared by
    :func:`topicjax.scale.online.convert_uci`, which applies it block by block."""
    if doc_id <= inferred_size_limit(n_before + 1):
        return None
    return file_error(
        path, line,
        f"document {doc_id} comes after {doc_id - 1 - n_before} documents without entries but only {n_before} with "
        "entries (empty documents may outnumber those with entries by at most 1024); is the document id or D right?",
    )


def check_uci_documents(doc_ids: np.ndarray, D: int, path) -> None:
    """The documents of a docword file against its entries (0-based ``doc_ids``): documents
    without entries are empty documents, allowed only up to
    :func:`~topicjax.data.corpus.inferred_size_limit` of those with entries, both before any document
    and in all (the header's ``D``).  A header ``D = 10**9`` over a few entries, or one document
    id of 10**9, is an error instead of gigabytes of per-document arrays."""
    present = np.unique(doc_ids)
    bad = np.flatnonzero(present + 1 > 2 * np.arange(1, present.size + 1) + INFERRED_SLACK)
    if bad.size:
        k = int(bad[0])
        raise empty_run_error(int(present[k]) + 1, k, path)
    if D > inferred_size_limit(present.size):
        raise file_error(
            path, 1,
            f"the header says D={D} documents but only {present.size} have entries (empty documents may outnumber "
            "those with entries by at most 1024); is the header right?",
        )


def uci_entries(
    path,
    vocab_path=None,
    *,
    name: str | None = None,
    empty_docs: str = "error",
    encoding: str = "utf-8",
    **kwargs,
) -> Entries:
    """Read a UCI bag-of-words corpus (:meth:`topicjax.data.Corpus.from_uci`,
    :func:`topicjax.data.formats.read_uci`).

    ``path`` is a folder holding ``docword.NAME.txt[.gz]`` and ``vocab.NAME.txt`` (``name``
    chooses one when the folder has several), or the docword file itself, whose vocabulary is
    found beside it by name unless ``vocab_path`` gives it (a file, or a sequence of words).
    gzip is recognised by its magic bytes.  The header's ``D``, ``W`` and ``NNZ`` must agree with
    the entries and the vocabulary; repeated ``(doc, word)`` entries are summed.  Other keywords
    go to :meth:`Corpus.from_entries` (``labels``, ``doc_names``...).

    Errors name the file and line: a malformed line, an id out of range, a negative, NaN or
    non-integer count, fewer or more entries than ``NNZ`` (a truncated file), a vocabulary of
    the wrong size, a header ``D`` far above the documents that have entries (see
    :func:`check_uci_documents`).  Nothing is allocated in proportion to a header value before it
    is checked against the data.

    Memory: the file is read as a stream, :data:`BLOCK_CHARS` characters at a time, each block
    parsed into int32 columns that become the Corpus's own arrays (no copy), so the peak is those
    arrays plus one block: 1.21 GiB in all for NYTimes' 66.5 M entries (0.74 GiB of arrays; the
    whole text read at once took 7.2 GiB).
    """
    check_empty_docs(empty_docs)
    docword, vocab_src = find_uci(Path(path), vocab_path, name)
    blocks = stream_blocks(docword, encoding, BLOCK_CHARS, UCI_MAX_LINE, "a docword entry")
    text = ""
    for _, block in blocks:  # the header's three lines, and what came with them
        text += block
        if text.count("\n") >= 3:
            break
    if not text.strip() and not any(block.strip() for _, block in blocks):
        raise file_error(docword, None, EMPTY_UCI)
    head = text.split("\n", 3)
    D, W, nnz = parse_uci_header(head, docword)
    if D == 0:  # not a corpus of no documents, which no model can be fitted to
        raise file_error(docword, 1, "the header says D=0: the corpus has no documents")
    body = head[3] if len(head) > 3 else ""
    if isinstance(vocab_src, (str, os.PathLike)):
        vocab = read_vocab(vocab_src, encoding=encoding)
        vsrc = vocab_src
    else:
        vocab = [str(v) for v in vocab_src]
        vsrc = "the given vocabulary"
    if len(vocab) != W:
        raise CorpusError(f"{vsrc}: {len(vocab)} words but the header of {docword} says W={W}")

    cols = _EntryColumns(nnz, _entries_bound(docword))
    last = 3  # the last line with an entry, where a truncated file is reported
    for line, piece in itertools.chain([(4, body)], blocks):
        # numpy's C parser; any doubt falls back to the line-by-line scan, which names the first
        # bad line (and accepts the few forms numpy refuses, such as a count written 3.0)
        cols.append(parse_uci_entries(piece, line, D, W, docword, nnz, cols.n))
        if piece.strip():
            last = line + piece.rstrip().count("\n")
    if cols.n < nnz:
        raise file_error(docword, last, f"the file ends after {cols.n} entries but the header says NNZ={nnz} (truncated file?)")
    present, with_tokens = cols.documents()
    check_uci_documents(present, D, docword)
    if empty_docs == "error":
        report_missing(docword, with_tokens, D, lambda i: (None, f"document {i + 1} (1-based, as in the file)"))
    doc_ids, word_ids, counts = cols.arrays()
    return Entries(doc_ids, word_ids, counts, dict(vocab=vocab, n_docs=D, empty_docs=empty_docs, **kwargs))


#: characters of a docword file read and parsed at a time by :func:`uci_entries`
BLOCK_CHARS = 1 << 24
#: The longest line of a docword file (an entry is three integers; a longer line is not an entry,
#: and reading it whole could hold a gigabyte line in memory).
UCI_MAX_LINE = 1 << 12


def _entries_bound(path) -> int:
    """The most entries a docword file can hold (an entry takes at least 6 characters, ``1 1 1``
    and its line end), from its size; for gzip a first guess from the uncompressed size its
    trailer records (modulo 2**32, and only the last member's), at most what deflate's largest
    ratio (1032:1) allows, so that a forged trailer reserves nothing large."""
    size = os.path.getsize(path)
    if is_gzip(path):
        with open(path, "rb") as fh:
            fh.seek(max(size - 4, 0))
            size = min(int.from_bytes(fh.read(4).ljust(4, b"\0"), "little"), 1032 * size)
    return (size + 1) // 6


class _EntryColumns:
    """The int32 columns ``doc_ids, word_ids, counts`` (0-based ids) of a docword file, filled a
    parsed block at a time, and the distinct documents seen (with entries, with tokens).

    The first segment holds ``min(NNZ, bound)`` entries (``bound``: what the file's size allows),
    so a valid file is read into arrays of exactly its entries, without a copy at the end, and a
    hostile ``NNZ`` in a header reserves no more than the file could hold (untouched pages of
    ``np.empty`` are not resident).  Only when a gzip trailer guessed short are more segments
    added and joined at the end.
    """

    def __init__(self, nnz: int, bound: int):
        self.nnz, self.n, self.segments = nnz, 0, []
        self._new_segment(max(min(nnz, bound), 0))
        self._present: list[np.ndarray] = []
        self._with_tokens: list[np.ndarray] = []

    def _new_segment(self, size: int) -> None:
        self.segments.append([np.empty(size, np.int32) for _ in range(3)] + [0])

    def append(self, arr: np.ndarray) -> None:
        """Add a parsed ``(entries, 3)`` block of 1-based ``docID, wordID, count``."""
        if not arr.shape[0]:
            return
        d = arr[:, 0] - 1
        self._present.append(_distinct(d))
        self._with_tokens.append(_distinct(d[arr[:, 2] > 0]))
        done = 0
        while done < arr.shape[0]:
            seg = self.segments[-1]
            room = seg[0].size - seg[3]
            if not room:
                # the parser refused entries beyond NNZ, so those left fit in NNZ - n
                self._new_segment(max(min(max(self.n // 2, 1 << 20), self.nnz - self.n), arr.shape[0] - done))
                continue
            k = min(room, arr.shape[0] - done)
            for j, col in enumerate(seg[:3]):
                col[seg[3]:seg[3] + k] = arr[done:done + k, j] - (j < 2)
            seg[3] += k
            done += k
            self.n += k

    def documents(self) -> tuple[np.ndarray, np.ndarray]:
        """The sorted distinct 0-based documents with entries, and those with tokens (count > 0)."""
        join = lambda parts: np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)  # noqa: E731
        return join(self._present), join(self._with_tokens)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The three columns; a single segment is returned as it is (filled exactly when the file is valid)."""
        segs, self.segments = self.segments, []
        if len(segs) == 1:
            return tuple(col[:segs[0][3]] for col in segs[0][:3])
        out = []
        for j in range(3):  # one column at a time: at most one column is held twice
            out.append(np.concatenate([seg[j][:seg[3]] for seg in segs]))
            for seg in segs:
                seg[j] = None
        return tuple(out)


def _distinct(ids: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``ids``; one pass when they are already in order (UCI files)."""
    return present_documents(ids) if np.all(ids[1:] >= ids[:-1]) else np.unique(ids)


def write_uci(corpus: "Corpus", folder, name: str = "corpus", *, compress: bool = False,
              overwrite: bool = False) -> tuple[Path, Path]:
    """Write ``folder/docword.NAME.txt[.gz]`` and ``folder/vocab.NAME.txt`` (folder created).

    Returns the two paths.  Labels, modalities and document names are not part of the format.
    Existing files of those names are refused (:class:`~topicjax._outputs.OutputRefusedError`,
    before anything is written) unless ``overwrite=True``, which replaces them and removes the
    other form of the docword file (``.txt`` beside ``.txt.gz``), so the folder never holds two
    docword files of one name.
    """
    if not name or any(c in name for c in "/\\") or name != name.strip():
        raise ValueError(f"name must be a plain file-name part, got {name!r}")
    folder = Path(folder)
    docword = folder / (f"docword.{name}.txt" + (".gz" if compress else ""))
    twin = folder / (f"docword.{name}.txt" + ("" if compress else ".gz"))
    vocab_file = folder / f"vocab.{name}.txt"
    check_targets([docword, vocab_file, twin], "a UCI corpus file", overwrite)
    write_vocab(corpus.vocab, vocab_file, overwrite=True)
    twin.unlink(missing_ok=True)
    with open_write(docword, compress) as fh:
        fh.write(f"{corpus.n_docs}\n{corpus.n_words}\n{corpus.nnz}\n")
        rows = zip((corpus.doc_ids + 1).tolist(), (corpus.word_ids + 1).tolist(), corpus.counts.tolist())
        fh.write("".join(f"{d} {w} {c}\n" for d, w, c in rows))
    return docword, vocab_file
