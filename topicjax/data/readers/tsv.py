"""A table of documents, one per line: ``text[<TAB>partition]<TAB>label`` (OCTIS's ``corpus.tsv``).

Read only when asked (:func:`topicjax.data.formats.read_tsv`, ``read_corpus(path, format="tsv")``, ``topicjax fit
--format tsv``): a folder holding a table is not a folder of text documents."""

from __future__ import annotations

from pathlib import Path
from typing import Collection

import numpy as np

from topicjax.data.entries import CorpusError, Entries
from topicjax.data.readers.texts import texts_entries
from topicjax.data.readers.common import (
    check_empty_docs,
    file_error,
    read_text,
    read_vocab,
    report_empty,
    short,
    split_lines,
)

#: Vocabulary files looked for beside a table (OCTIS names its ``vocabulary.txt``).
VOCAB_NAMES = ("vocabulary.txt", "vocab.txt")


def find_table(path) -> Path:
    """``path`` itself when it is a file, else the one ``*.tsv`` file of the folder ``path``."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    if p.is_file():
        return p
    tables = sorted(q for q in p.iterdir() if q.is_file() and q.name.lower().endswith((".tsv", ".tsv.gz")))
    if not tables:
        raise CorpusError(f"{p}: no *.tsv table of documents in this folder")
    if len(tables) > 1:
        raise CorpusError(f"{p}: several tables ({', '.join(q.name for q in tables)}); name the one to read")
    return tables[0]


def tsv_entries(
    path,
    *,
    vocab=None,
    labels: bool | None = None,
    partitions: Collection[str] | None = None,
    encoding: str = "utf-8",
    empty_docs: str = "error",
    **vectorizer_kwargs,
) -> Entries:
    """Read a table of documents, one per line, columns separated by tabs
    (:meth:`topicjax.data.Corpus.from_tsv`, :func:`topicjax.data.formats.read_tsv`).

    Columns: ``text`` alone; ``text, label``; or ``text, partition, label`` (OCTIS's
    ``corpus.tsv``, partitions ``train``/``val``/``test``).  Every line has the same number of
    columns (an error names the first line that differs); blank lines are skipped; there is no
    header line.  ``path`` is the table or a folder holding exactly one ``*.tsv``.

    Words: when a vocabulary is given (``vocab``: a file or a sequence of words) or found beside
    the table (``vocabulary.txt``, ``vocab.txt``), the text is taken as already tokenised --
    words separated by white space, each of them in the vocabulary (an error names the line and
    the word) -- and the vocabulary keeps its order.  Otherwise the texts are tokenised by
    :func:`~topicjax.data.readers.texts.texts_entries` (``CountVectorizer``; its keywords are
    accepted here).

    ``labels``: ``None`` reads the label column when there is one, ``False`` ignores it,
    ``True`` requires it.  ``partitions``: keep only the lines whose partition is one of these
    (e.g. ``{"train", "val"}``; needs the partition column).  Document names are ``line N``.
    """
    check_empty_docs(empty_docs)
    table = find_table(path)
    if vocab is None:
        for name in VOCAB_NAMES:
            if (table.parent / name).is_file():
                vocab = table.parent / name
                break
    lines = split_lines(read_text(table, encoding))
    rows: list[tuple[int, list[str]]] = []
    width = None
    for ln, line in enumerate(lines, 1):
        if not line.strip():
            continue
        cols = line.rstrip("\r").split("\t")
        if width is None:
            width = len(cols)
            if width > 3:
                raise file_error(table, ln, f"{width} tab-separated columns; expected text[, partition], label "
                                            "(at most 3)")
        elif len(cols) != width:
            raise file_error(table, ln, f"{len(cols)} tab-separated columns, but line {rows[0][0]} has {width}")
        rows.append((ln, cols))
    if not rows:
        raise CorpusError(f"{table}: no documents (the table is empty)")
    has_label = width >= 2
    if labels and not has_label:
        raise CorpusError(f"{table}: labels=True but the table has only a text column")
    use_labels = has_label if labels is None else bool(labels) and has_label
    if partitions is not None:
        if width != 3:
            raise CorpusError(f"{table}: partitions={sorted(partitions)} but the table has no partition column "
                              "(text, partition, label)")
        wanted = set(partitions)
        seen = sorted({cols[1] for _, cols in rows})
        if not wanted & set(seen):
            raise CorpusError(f"{table}: no line of partitions {sorted(wanted)}; the table has {seen}")
        rows = [(ln, cols) for ln, cols in rows if cols[1] in wanted]
    texts = [cols[0] for _, cols in rows]
    doc_labels = [cols[-1].strip() for _, cols in rows] if use_labels else None
    names = [f"line {ln}" for ln, _ in rows]
    if vocab is None:
        return _tokenised_by_vectorizer(texts, doc_labels, names, empty_docs, vectorizer_kwargs)
    if vectorizer_kwargs:
        raise ValueError(f"{table}: the texts are read with the vocabulary {vocab}; tokenizer options "
                         f"{sorted(vectorizer_kwargs)} do not apply")
    words = read_vocab(vocab, encoding=encoding) if not isinstance(vocab, (list, tuple)) else [str(w) for w in vocab]
    index = {w: i for i, w in enumerate(words)}
    d_ids: list[int] = []
    w_ids: list[int] = []
    for d, ((ln, _), text) in enumerate(zip(rows, texts)):
        for tok in text.split():
            w = index.get(tok)
            if w is None:
                raise file_error(table, ln, f"word {short(tok)} is not in the vocabulary {vocab}")
            d_ids.append(d)
            w_ids.append(w)
    d_arr = np.asarray(d_ids, np.int64)
    c_arr = np.ones(d_arr.size, np.int64)
    if empty_docs == "error":
        report_empty(table, d_arr, c_arr, len(rows), lambda i: (rows[i][0], f"document {names[i]!r}"))
    return Entries(d_arr, np.asarray(w_ids, np.int64), c_arr, dict(vocab=words, n_docs=len(rows), labels=doc_labels,
                                                                  doc_names=names, empty_docs=empty_docs))


def _tokenised_by_vectorizer(texts, doc_labels, names, empty_docs, vectorizer_kwargs) -> Entries:
    return texts_entries(texts, doc_labels, empty_docs=empty_docs, doc_names=names, **vectorizer_kwargs)
