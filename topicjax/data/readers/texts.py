"""Raw texts, tokenised by scikit-learn's ``CountVectorizer``: a list of strings or a folder of
files (sub-folders as labels)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence


from topicjax.data.entries import CorpusError, Entries, csr_entries
from topicjax.data.readers.common import check_empty_docs, read_text, report_empty


def texts_entries(
    texts,
    labels=None,
    *,
    empty_docs: str = "error",
    doc_names: Sequence[str] | None = None,
    **vectorizer_kwargs,
) -> Entries:
    """Tokenise raw texts with scikit-learn's ``CountVectorizer`` (:meth:`topicjax.data.Corpus.from_texts`,
    :func:`topicjax.data.formats.read_texts`).

    Keyword arguments configure ``CountVectorizer`` (``stop_words="english"``, ``min_df``,
    ``max_df``, ``max_features``, ``token_pattern``, ``lowercase``, ``vocabulary`` to reuse a
    training vocabulary...).  The vocabulary is sorted, as ``CountVectorizer`` gives it.  A text
    left without tokens (only stop words, or only rare words removed by ``min_df``) is an error
    naming it, unless ``empty_docs="drop"``.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    check_empty_docs(empty_docs)
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a sequence of documents, not a single string")
    texts = list(texts)
    if not texts:
        raise CorpusError("texts: no texts (the sequence is empty)")
    for i, t in enumerate(texts):
        if not isinstance(t, (str, bytes)):
            raise CorpusError(f"text {i} is a {type(t).__name__}, not a string")
    if labels is not None and len(labels) != len(texts):
        raise CorpusError(f"{len(labels)} labels for {len(texts)} texts")
    if doc_names is not None and len(doc_names) != len(texts):
        raise CorpusError(f"{len(doc_names)} document names for {len(texts)} texts")
    vectorizer = CountVectorizer(**vectorizer_kwargs)
    try:
        X = vectorizer.fit_transform(texts)
    except ValueError as e:  # empty vocabulary, min_df/max_df leaving nothing
        raise CorpusError(f"CountVectorizer found no usable words: {e}") from None
    vocab = vectorizer.get_feature_names_out().tolist()
    if empty_docs == "error":
        coo = X.tocoo()

        def describe(i):
            name = f" ({doc_names[i]})" if doc_names is not None else ""
            return None, f"text {i}{name}, after tokenising (stop words, min_df, max_df, token pattern),"

        report_empty("texts", coo.row, coo.data, X.shape[0], describe)
    rows, cols, data = csr_entries(X)
    return Entries(rows, cols, data, dict(vocab=vocab, n_words=X.shape[1], n_docs=X.shape[0], labels=labels,
                                          doc_names=doc_names, empty_docs=empty_docs))


#: Files taken as text documents when a folder is read by :func:`topicjax.data.formats.read_corpus`:
#: names ending in ``.txt`` or ``.text``, and names without a suffix (the posts of 20 Newsgroups);
#: ``""`` in ``suffixes`` stands for "no suffix".
TEXT_SUFFIXES = (".txt", ".text", "")


def matches_suffixes(name: str, suffixes) -> bool:
    """Whether a file name ends in one of ``suffixes`` (``""``: the name has no suffix at all;
    ``None``: every name matches)."""
    if suffixes is None:
        return True
    lower = name.lower()
    return any((s == "" and "." not in name) or (s and lower.endswith(s.lower())) for s in suffixes)


def folder_files(root, suffixes=None) -> tuple[list[Path], list[Path]]:
    """``(matching, others)``: the files under ``root`` (hidden files and folders skipped), in
    sorted order, split by :func:`matches_suffixes`."""
    root = Path(root)
    match, other = [], []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(filenames):
            if f.startswith("."):
                continue
            (match if matches_suffixes(f, suffixes) else other).append(Path(dirpath) / f)

    def key(p):
        return p.relative_to(root).parts

    return sorted(match, key=key), sorted(other, key=key)


def text_folder_entries(
    path,
    *,
    suffixes: Sequence[str] | None = None,
    encoding: str = "utf-8",
    labels: bool | None = None,
    empty_docs: str = "error",
    **vectorizer_kwargs,
) -> Entries:
    """Read a folder of raw text files, one document per file, through :func:`texts_entries`
    (:meth:`topicjax.data.Corpus.from_text_folder`, :func:`topicjax.data.formats.read_text_folder`).

    Files are taken in sorted order (hidden files and folders skipped; ``suffixes`` such as
    ``(".txt",)`` restricts them, ``""`` standing for names without a suffix, as in
    :data:`TEXT_SUFFIXES`).  When the files lie in sub-folders (the layout of
    20 Newsgroups, ``group/post``), the name of each file's folder is its label; ``labels=False``
    ignores them, ``labels=True`` requires them.  Files both at the top and in sub-folders are an
    error when labels are used.  Document names are the paths relative to ``path``.  A file that
    is not valid ``encoding`` is an error naming it (20 Newsgroups needs ``encoding="latin-1"``).
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    files, others = folder_files(root, suffixes)
    if not files:
        kinds = "" if suffixes is None else f" (files named {', '.join('*' + s if s else 'without a suffix' for s in suffixes)})"
        found = f"; it holds {describe_files(root, others)}" if others else ""
        raise CorpusError(f"{root}: no text files in this folder{kinds}{found}")
    in_sub = [p.parent != root for p in files]
    if labels is None:
        labels = all(in_sub)
        if any(in_sub) and not all(in_sub):
            top = files[in_sub.index(False)]
            raise CorpusError(
                f"{root}: files both at the top ({top.name}) and in sub-folders; the sub-folder labels would "
                "be incomplete (pass labels=False to ignore them)"
            )
    elif labels and not all(in_sub):
        raise CorpusError(f"{root}: labels=True but {files[in_sub.index(False)].name} is not in a sub-folder")
    texts = [read_text(p, encoding) for p in files]
    if not any(t.strip() for t in texts):
        what = f"the file {files[0].name} is empty" if len(files) == 1 else f"all {len(files)} text files are empty"
        raise CorpusError(f"{root}: {what} (no words to read)")
    names = ["/".join(p.relative_to(root).parts) for p in files]
    doc_labels = [p.parent.name for p in files] if labels else None
    return texts_entries(texts, doc_labels, empty_docs=empty_docs, doc_names=names, **vectorizer_kwargs)


def describe_files(root, files, n: int = 4) -> str:
    """``a.json, b.tsv and 3 more`` (paths relative to ``root``), for messages."""
    names = ["/".join(Path(f).relative_to(root).parts) for f in files]
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more
