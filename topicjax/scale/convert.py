"""Corpus files streamed into a batch store (:mod:`topicjax.scale.store`), never held whole.

The converters read their input as a stream (:func:`topicjax.data.readers.common.stream_lines`:
gzip by its magic, byte-order mark, decoding and gzip errors as every reader reports them) and
hold one group of documents at a time; each group is parsed by the in-memory readers' own
functions, so a line is accepted or refused, with the same message naming the file and line,
exactly as :func:`topicjax.data.formats.read_uci` or :func:`~topicjax.data.formats.read_vw`
would:

* :func:`convert_uci` -- a UCI ``docword`` file, ``block_lines`` lines at a time
  (:func:`~topicjax.data.formats.parse_uci_entries`);
* :func:`convert_vw` -- a Vowpal Wabbit text file, ``batch_size`` lines at a time
  (:func:`~topicjax.data.formats.read_vw`).

The store folder follows the rule of every writer (:class:`~topicjax.scale.store.StoreWriter`):
new, empty or holding a store (replaced only when the conversion succeeds), never a file read nor
the folder holding it; anything else is refused with
:class:`~topicjax._outputs.OutputRefusedError` before the input is read.

>>> import os, tempfile, topicjax as tj
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=30, seed=0)
>>> folder = tempfile.mkdtemp()
>>> docword, _ = tj.data.formats.write_uci(corpus, folder, "bars")
>>> store = convert_uci(docword, os.path.join(folder, "store"), batch_size=10)
>>> store.n_docs, store.n_batches, store.corpus().equals(corpus)
(30, 3, True)
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np

from topicjax.core.validation import check_int
from topicjax.data import formats
from topicjax.data.corpus import INFERRED_SLACK, CorpusError, CorpusWarning, inferred_size_limit
from topicjax.data.readers.common import EMPTY_FILE, stream_lines
from topicjax.data.readers.uci import UCI_MAX_LINE
from topicjax.scale.store import BatchStore, StoreWriter, check_store_target

__all__ = ["convert_uci", "convert_vw", "UCI_MAX_LINE"]




def convert_uci(path, folder, *, vocab_path=None, name: str | None = None, batch_size: int = 1000,
                block_lines: int = 200_000, encoding: str = "utf-8", shuffle: bool = False,
                seed: int = 0) -> BatchStore:
    """Stream a UCI bag-of-words corpus (``docword.NAME.txt[.gz]`` + ``vocab.NAME.txt``) into a store.

    The docword file is read ``block_lines`` lines at a time, so memory is one block whatever the
    corpus size; its entries must be grouped by document in increasing order (as UCI files are).
    Each block is parsed by :func:`topicjax.data.formats.parse_uci_entries`, so lines are accepted or
    refused, with the same messages naming the file and line, exactly as by
    :func:`topicjax.data.formats.read_uci`.  Documents of the header's D without entries are kept as
    empty documents, within :func:`~topicjax.data.corpus.inferred_size_limit` of the documents that have
    entries (a header ``D = 10**9`` or a jump of the document ids to 10**9 is an error, not a
    gigabyte of offsets).  ``shuffle=True`` stores the documents in an order permuted by ``seed``
    (:class:`~topicjax.scale.store.StoreWriter`), after the whole file is read.
    """
    block_lines = check_int(block_lines, "block_lines", 1)  # np.int64 too
    docword, vocab_src = formats.find_uci(Path(path), vocab_path, name)
    # the files read (never the folder that holds them, nor a folder holding it; a new store
    # inside the corpus's folder reads nothing of it and is allowed)
    inputs = [docword] + ([vocab_src] if isinstance(vocab_src, (str, os.PathLike)) else [])
    check_store_target(folder, inputs)
    vocab = formats.read_vocab(vocab_src, encoding=encoding) if isinstance(vocab_src, (str, os.PathLike)) \
        else [str(v) for v in vocab_src]
    lines = stream_lines(docword, encoding, UCI_MAX_LINE, "a docword entry")
    header = [text for _, (_, text) in zip(range(3), lines)]
    D, W, nnz = formats.parse_uci_header(header, docword)
    if W != len(vocab):
        raise CorpusError(f"{docword}: the header says W={W} but {vocab_src} has {len(vocab)} words")
    writer = StoreWriter(folder, batch_size, str(docword), inputs=inputs, shuffle=shuffle, seed=seed)
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


def convert_vw(path, folder, *, batch_size: int = 1000, encoding: str = "utf-8", shuffle: bool = False,
               seed: int = 0, **read_kwargs) -> BatchStore:
    """Stream a Vowpal Wabbit text file (BigARTM's format) into a store, ``batch_size`` lines at a
    time, each group parsed by :func:`topicjax.data.formats.read_vw` (same tokens, namespaces,
    vocabulary keys and messages, with the line numbers of the whole file).  The vocabulary is
    numbered in order of first appearance; documents without tokens are dropped (as
    ``empty_docs="drop"``) and counted in ``meta.json``.  Document names are not stored, so
    repeated names (a warning of :func:`~topicjax.data.formats.read_vw`) do not matter here; nor are
    labels (the ``@labels`` namespace, read as labels by default, not as words).  ``shuffle=True``
    stores the documents in an order permuted by ``seed`` (:class:`~topicjax.scale.store.StoreWriter`).
    """
    vocab = read_kwargs.get("vocab")
    writer = StoreWriter(folder, batch_size, str(path),
                         inputs=[path] + ([vocab] if isinstance(vocab, (str, os.PathLike)) else []),
                         shuffle=shuffle, seed=seed)
    try:
        keys: dict[str, int] = {}
        dropped = n_read = 0
        lines = stream_lines(path, encoding)
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
