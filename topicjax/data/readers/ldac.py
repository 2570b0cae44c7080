"""lda-c: one document per line, ``N id:count ...`` with 0-based word ids; the vocabulary is a
separate file (``X.vocab`` beside ``X.ldac``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from topicjax.data.entries import MAX_ID, CorpusError, Entries, inferred_size_limit
from topicjax.data.readers.common import (
    EMPTY_FILE,
    INT_PATTERN,
    BadValue,
    check_empty_docs,
    file_error,
    check_targets,
    open_write,
    parse_count,
    parse_id,
    read_text,
    report_empty,
    short,
    split_lines,
    vocab_arg,
    write_vocab,
)


def _ldac_vocab_beside(path: Path) -> Path | None:
    """A vocabulary file named after an lda-c file: ``X.vocab``, ``X.tokens``, ``X.vocab.txt``
    (``X`` the name without ``.gz`` and without its extension) or ``NAME.vocab``."""
    base = path.with_suffix("") if path.suffix == ".gz" else path
    stem = base.with_suffix("")
    for cand in (
        stem.with_name(stem.name + ".vocab"),
        stem.with_name(stem.name + ".tokens"),
        stem.with_name(stem.name + ".vocab.txt"),
        base.with_name(base.name + ".vocab"),
    ):
        if cand.is_file():
            return cand
    return None


def ldac_entries(
    path,
    vocab=None,
    *,
    n_words: int | None = None,
    empty_docs: str = "error",
    encoding: str = "utf-8",
    **kwargs,
) -> Entries:
    """Read an lda-c file (:meth:`topicjax.data.Corpus.from_ldac`, :func:`topicjax.data.formats.read_ldac`): one document per line, ``N id:count ...`` with 0-based word ids.

    ``N`` must equal the number of pairs; a document without words is the line ``0`` (an error
    unless ``empty_docs="drop"``); a blank line inside the file is an error.  ``vocab`` is a
    file (one word per line) or a sequence of words; when it is None, a vocabulary file beside
    the corpus (``X.vocab``, ``X.tokens``, ``X.vocab.txt`` for ``X.ldac``) is used if there is
    one, else the vocabulary size is ``n_words`` or the largest id + 1 and the words are named
    ``w0, w1, ...``; the largest id + 1 is taken only within
    :func:`~topicjax.data.corpus.inferred_size_limit` of the number of distinct ids (``1 99999999999:1``
    is an error naming the line, asking for the vocabulary or ``n_words``; ids are never
    renumbered).  Other keywords go to :meth:`Corpus.from_entries` (``labels``...).
    """
    check_empty_docs(empty_docs)
    path = Path(path)
    if vocab is None:
        vocab = _ldac_vocab_beside(path)
    words, vsrc = vocab_arg(vocab, encoding)
    if n_words is not None and (
        isinstance(n_words, bool) or not isinstance(n_words, (int, np.integer)) or not 0 <= n_words <= MAX_ID
    ):
        raise CorpusError(f"n_words must be an integer in [0, {MAX_ID}], got {n_words!r}")
    if words is not None and n_words is not None and n_words != len(words):
        raise CorpusError(f"n_words={n_words} but {vsrc} has {len(words)} words")
    W = len(words) if words is not None else n_words
    lines = split_lines(read_text(path, encoding))
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise file_error(path, None, EMPTY_FILE)
    d_ids: list[int] = []
    w_ids: list[int] = []
    cnts: list[int] = []
    for d, line in enumerate(lines):
        ln = d + 1
        parts = line.split()
        try:
            if not parts:
                raise BadValue("blank line (a document without words is written '0')")
            if not INT_PATTERN.fullmatch(parts[0]):
                raise BadValue(f"expected the number of pairs first, got {short(parts[0])}")
            n = int(parts[0])
            if n != len(parts) - 1:
                raise BadValue(f"document {d}: the line starts with N={n} but has {len(parts) - 1} id:count pairs")
            for tok in parts[1:]:
                i, sep, c = tok.partition(":")
                if not sep or not i or not c:
                    raise BadValue(f"document {d}: malformed pair {tok!r} (expected id:count)")
                w = parse_id(i, "word id")
                if w < 0:
                    raise BadValue(f"document {d}: word id {w} is negative")
                if W is not None and w >= W:
                    src = vsrc or f"n_words={W}"
                    raise BadValue(f"document {d}: word id {w} is outside the vocabulary of {W} words ({src})")
                try:
                    cnt = parse_count(c)
                except BadValue as e:
                    raise BadValue(f"document {d}, word id {w}: {e}") from None
                d_ids.append(d)
                w_ids.append(w)
                cnts.append(cnt)
        except BadValue as e:
            raise file_error(path, ln, str(e)) from None
    n_docs = len(lines)
    if W is None:
        # A vocabulary of placeholder names, inferred from the largest id only within the bound of
        # inferred_size_limit: a stray id 99999999999 is an error here, not 1e11 names.
        W = max(w_ids) + 1 if w_ids else 0
        n_distinct = len(set(w_ids))
        if W > inferred_size_limit(n_distinct):
            i = w_ids.index(W - 1)
            raise file_error(
                path, d_ids[i] + 1,
                f"document {d_ids[i]}: word id {W - 1} would make a vocabulary of {W} placeholder words for "
                f"{n_distinct} distinct ids (more than {inferred_size_limit(n_distinct)} is not inferred); pass the "
                "vocabulary (vocab=..., or a file X.vocab beside the corpus) or n_words",
            )
    d_arr = np.asarray(d_ids, np.int64)
    c_arr = np.asarray(cnts, np.int64)
    if empty_docs == "error":
        report_empty(path, d_arr, c_arr, n_docs, lambda i: (i + 1, f"document {i}"))
    return Entries(d_arr, np.asarray(w_ids, np.int64), c_arr, dict(
        vocab=words, n_words=None if words is not None else W, n_docs=n_docs, empty_docs=empty_docs, **kwargs))


def write_ldac(corpus: "Corpus", path, vocab_path=None, *, compress: bool | None = None,
               overwrite: bool = False) -> tuple[Path, Path | None]:
    """Write an lda-c file and its vocabulary; gzip when the name ends in ``.gz``.

    ``vocab_path`` defaults to ``X.vocab`` beside ``X.ldac`` (where :func:`~topicjax.data.formats.read_ldac` looks);
    ``False`` writes no vocabulary.  Labels and document names are not part of the format.
    Returns ``(path, vocab_path)``.  Existing files are refused
    (:class:`~topicjax._outputs.OutputRefusedError`, before anything is written) unless
    ``overwrite=True``.
    """
    path = Path(path)
    if vocab_path is None:
        base = path.with_suffix("") if path.suffix == ".gz" else path
        stem = base.with_suffix("")
        vocab_path = stem.with_name(stem.name + ".vocab")
    check_targets([path] + ([vocab_path] if vocab_path is not False else []), "an lda-c corpus file", overwrite)
    off = corpus.doc_offsets
    wid, cnt = corpus.word_ids.tolist(), corpus.counts.tolist()
    with open_write(path, compress) as fh:
        for d in range(corpus.n_docs):
            s, e = int(off[d]), int(off[d + 1])
            pairs = " ".join(f"{w}:{c}" for w, c in zip(wid[s:e], cnt[s:e]))
            fh.write(f"{e - s} {pairs}\n" if pairs else "0\n")
    if vocab_path is False:
        return path, None
    write_vocab(corpus.vocab, vocab_path, overwrite=True)
    return path, Path(vocab_path)
