"""Vowpal Wabbit text in BigARTM's form: one document per line, namespaces as modalities
(see :mod:`topicjax.data.formats` for the vocabulary keys ``"m|word"``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from topicjax.data.entries import CorpusError, CorpusWarning, Entries
from topicjax.data.readers.common import (
    EMPTY_FILE,
    BadValue,
    check_empty_docs,
    file_error,
    check_targets,
    open_write,
    parse_count,
    read_text,
    report_empty,
    split_lines,
    vocab_arg,
    write_vocab,
)

#: Modality of VW tokens before the first namespace and of namespaces without a name (BigARTM).
DEFAULT_MODALITY = "@default_class"
#: The namespace of document labels, written by :func:`write_vw` and read back by :func:`~topicjax.data.formats.read_vw`
#: (the name of the class modality of ARTM, :data:`topicjax.regularizers.LABELS_MODALITY`).
LABELS_NAMESPACE = "@labels"


class _DefaultNamespace(str):
    """The default ``label_modality`` of :func:`~topicjax.data.formats.read_vw`, told apart from an explicit ``"@labels"``
    by identity (labels passed by the caller then win over a file without labels)."""


_DEFAULT_LABELS = _DefaultNamespace(LABELS_NAMESPACE)


def _vw_key(modality: str, word: str) -> str:
    return word if modality == DEFAULT_MODALITY else f"{modality}|{word}"


def vw_token(key: str) -> tuple[str, str]:
    """Split a vocabulary key of a VW corpus into ``(modality, word)``.

    >>> vw_token("sport"), vw_token("@tag|sport")
    (('@default_class', 'sport'), ('@tag', 'sport'))
    """
    modality, sep, word = key.partition("|")
    return (modality, word) if sep else (DEFAULT_MODALITY, key)


def _split_token(tok: str) -> tuple[str, int]:
    """``word`` -> (word, 1); ``word:count`` -> (word, count); the last ``:`` separates the count."""
    if ":" not in tok:
        return tok, 1
    word, _, c = tok.rpartition(":")
    if not word or not c:
        raise BadValue(f"malformed token {tok!r} (expected word or word:count)")
    try:
        return word, parse_count(c)
    except BadValue as e:
        raise BadValue(f"token {tok!r}: {e}") from None


def vw_entries(
    path,
    *,
    label_modality: str | None = _DEFAULT_LABELS,
    vocab=None,
    empty_docs: str = "error",
    encoding: str = "utf-8",
    first_index: int = 0,
    **kwargs,
) -> Entries:
    """Read a Vowpal Wabbit text file in BigARTM's form (:meth:`topicjax.data.Corpus.from_vw`,
    :func:`topicjax.data.formats.read_vw`).

    Each non-blank line is a document ``name tok tok |ns tok tok:3 |ns2 ...``; tokens are ``word``
    (count 1) or ``word:count`` (a non-negative integer); a word repeated in a document adds up.
    Namespaces become modalities, with keys as described in the module docstring (``"m|word"``
    outside ``"@default_class"``).  A line that starts with ``|`` has no name; it is named
    ``doc{index}``, the index counting documents (non-blank lines) from ``first_index`` (for a
    file read in pieces, as :func:`topicjax.scale.online.convert_vw` does).

    ``label_modality``: the namespace holding document labels, by default ``"@labels"``, where
    :func:`write_vw` writes them, so that what it writes reads back identically: its tokens
    become labels (multi-label when a document has several) instead of words; a label token may
    not carry a count other than 1; a file where no document has a label gives a corpus without
    labels.  ``None`` reads every namespace as words.  Label columns are sorted by name unless
    ``label_names`` is given or the vocabulary holds them.  ``vocab``: a sequence of keys or a
    vocabulary file (one key per line, as :func:`write_vw` writes with ``vocab_path``) fixing the
    vocabulary and its order (a word outside it is an error naming the line); its keys
    ``"<label_modality>|name"`` are the label columns, in order (a label outside them is an
    error).  Otherwise words are numbered in order of first appearance.  Other keywords go to
    :meth:`Corpus.from_entries`.

    Two lines with the same document name are two documents (as in BigARTM, where the name is a
    title, not a key): both are kept, and a :class:`~topicjax.data.corpus.CorpusWarning` names the
    first repeated name and its lines, since ``doc_names`` then do not identify the documents
    (pass ``doc_names=`` to name them yourself, which silences it).
    """
    check_empty_docs(empty_docs)
    if label_modality is not None and "labels" in kwargs and label_modality is not _DEFAULT_LABELS:
        raise ValueError("pass either label_modality (labels read from the file) or labels, not both")
    words, vsrc = vocab_arg(vocab, encoding)
    fixed = words is not None
    keys: dict[str, int] = {}
    key_modality: list[str] = []
    fixed_labels: dict[str, int] | None = None
    if fixed:
        seen: set[str] = set()
        for i, k in enumerate(words):
            if k in seen:
                raise CorpusError(f"{vsrc}: word {k!r} appears twice (entries {words.index(k)} and {i})")
            seen.add(k)
            modality, word = vw_token(k)
            if label_modality is not None and modality == label_modality:
                fixed_labels = {} if fixed_labels is None else fixed_labels
                fixed_labels[word] = len(fixed_labels)
                continue
            keys[k] = len(key_modality)
            key_modality.append(modality)
        if fixed_labels is not None and "label_names" in kwargs:
            raise ValueError(f"{vsrc} holds the label names ({label_modality!r} keys); do not pass label_names too")
    text = read_text(path, encoding)
    d_ids: list[int] = []
    w_ids: list[int] = []
    cnts: list[int] = []
    names: list[str] = []
    line_of: list[int] = []
    doc_labels: list[list[str]] = []
    for ln, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        d = len(names)
        segments = line.split("|")
        head = segments[0].split()
        name = head[0] if head else f"doc{first_index + d}"
        groups = [(DEFAULT_MODALITY, head[1:])]
        for seg in segments[1:]:
            if not seg or seg[0].isspace():
                groups.append((DEFAULT_MODALITY, seg.split()))
            else:
                parts = seg.split()
                groups.append((parts[0], parts[1:]))
        labels_here: list[str] = []
        try:
            for ns, toks in groups:
                for tok in toks:
                    word, c = _split_token(tok)
                    if ns == label_modality:
                        if c != 1:
                            raise BadValue(f"label {tok!r} has a count; labels of {ns!r} must be plain names")
                        if fixed_labels is not None and word not in fixed_labels:
                            raise BadValue(f"label {word!r} is not among the labels of {vsrc}")
                        labels_here.append(word)
                        continue
                    key = _vw_key(ns, word)
                    w = keys.get(key)
                    if w is None:
                        if fixed:
                            raise BadValue(f"word {word!r} of modality {ns!r} is not in {vsrc}")
                        w = keys[key] = len(key_modality)
                        key_modality.append(ns)
                    d_ids.append(d)
                    w_ids.append(w)
                    cnts.append(c)
        except BadValue as e:
            raise file_error(path, ln, f"document {name!r}: {e}") from None
        names.append(name)
        line_of.append(ln)
        doc_labels.append(labels_here)

    n_docs = len(names)
    if n_docs == 0:  # not a corpus of no documents, which no model can be fitted to
        raise file_error(path, None, EMPTY_FILE)
    d_arr = np.asarray(d_ids, np.int64)
    c_arr = np.asarray(cnts, np.int64)
    if empty_docs == "error":
        report_empty(path, d_arr, c_arr, n_docs, lambda i: (line_of[i], f"document {names[i]!r}"))
    if "doc_names" not in kwargs:
        _warn_duplicate_names(path, names, line_of)
    vocab_keys = list(keys)  # insertion order = word index
    if all(m == DEFAULT_MODALITY for m in key_modality):
        modalities = modality_names = None
    else:
        modality_names = list(dict.fromkeys(key_modality))
        modalities = key_modality
    kwargs.setdefault("doc_names", names)
    if "labels" in kwargs and label_modality is not None and any(doc_labels):
        d = next(i for i, ls in enumerate(doc_labels) if ls)
        raise ValueError(f"{path}, line {line_of[d]}: the file has labels in {label_modality!r} and labels= was "
                         "passed too; pass either (label_modality=None reads that namespace as words)")
    if "labels" not in kwargs and label_modality is not None and (fixed_labels is not None or any(doc_labels)):
        kwargs["labels"] = doc_labels
        if fixed_labels is not None:
            kwargs["label_names"] = list(fixed_labels)
    return Entries(d_arr, np.asarray(w_ids, np.int64), c_arr, dict(
        vocab=vocab_keys, n_docs=n_docs, modalities=modalities, modality_names=modality_names, empty_docs=empty_docs,
        **kwargs))


def _warn_duplicate_names(path, names: list[str], line_of: list[int]) -> None:
    """A :class:`~topicjax.data.corpus.CorpusWarning` naming the first repeated document name."""
    first: dict[str, int] = {}
    repeated = 0
    example = None
    for name, ln in zip(names, line_of):
        if name in first:
            repeated += 1
            if example is None:
                example = (name, first[name], ln)
        else:
            first[name] = ln
    if example is not None:
        name, a, b = example
        warnings.warn(
            f"{path}, line {b}: document name {name!r} was already used on line {a} ({repeated} repeated "
            "name(s) in all); every line is kept as its own document, but doc_names do not identify them",
            CorpusWarning, stacklevel=3,
        )


def _check_vw_name(s: str, what: str) -> None:
    if not s or any(ch.isspace() for ch in s) or "|" in s:
        raise CorpusError(f"{what} {s!r} cannot be written in Vowpal Wabbit format (empty, white space or '|')")


def write_vw(
    corpus: "Corpus",
    path,
    *,
    label_modality: str | None = LABELS_NAMESPACE,
    vocab_path=None,
    compress: bool | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a Vowpal Wabbit text file (BigARTM's form); gzip when the name ends in ``.gz``.

    One line per document: its name (``doc_names``, else ``doc{index}``), then ``|modality``
    and its tokens for every modality present in the document (``|@default_class`` for a corpus
    without modalities), ``word`` for a count of 1 and ``word:count`` otherwise.  Labels are
    written as the namespace ``label_modality`` (``None``: labels are not written), where
    :func:`~topicjax.data.formats.read_vw` reads them by default; a modality of words with that name is an error (write
    it with ``label_modality=None`` and read it back with ``label_modality=None``).

    ``read_vw(path)`` gives back the same corpus (:meth:`Corpus.equals`, labels and document names
    included) when the vocabulary is in order of first appearance, every word occurs and the
    label names are sorted and used (modalities are numbered in order of first appearance in
    the vocabulary, as :func:`~topicjax.data.formats.read_vw` numbers them).  The format has no vocabulary, so for any other corpus pass
    ``vocab_path``: the vocabulary keys are written there, one per line, followed by the label
    names as keys ``"<label_modality>|name"``, and ``read_vw(path, vocab=vocab_path)`` gives back
    the same corpus.  Returns ``path``.  Existing files (``path``, ``vocab_path``) are refused
    (:class:`~topicjax._outputs.OutputRefusedError`, before anything is written) unless
    ``overwrite=True``.
    """
    path = Path(path)
    check_targets([path] + ([vocab_path] if vocab_path is not None else []), "a Vowpal Wabbit corpus file", overwrite)
    W = corpus.n_words
    if corpus.modalities is None:
        mod_of = np.zeros(W, np.int64)
        mod_names = [DEFAULT_MODALITY]
    else:
        mod_of = corpus.modalities.astype(np.int64)
        mod_names = list(corpus.modality_names)
    for m in mod_names:
        _check_vw_name(m, "modality")
        if ":" in m:
            raise CorpusError(f"modality {m!r} cannot be written in Vowpal Wabbit format (contains ':')")
        if m == label_modality:
            raise CorpusError(f"modality {m!r} of the words is the namespace of labels; pass label_modality=None to "
                              "write it as words (and read it back with label_modality=None)")
    tokens = []
    for w, key in enumerate(corpus.vocab):
        m = mod_names[mod_of[w]]
        tok = key[len(m) + 1:] if m != DEFAULT_MODALITY and key.startswith(m + "|") else key
        _check_vw_name(tok, "word")
        tokens.append(tok)
    if corpus.labels is not None and label_modality is not None:
        _check_vw_name(label_modality, "label modality")
        if label_modality in mod_names:
            raise CorpusError(f"label_modality {label_modality!r} is also a modality of the words")
        for lab in corpus.label_names:
            _check_vw_name(lab, "label")
            if ":" in lab:
                raise CorpusError(f"label {lab!r} cannot be written in Vowpal Wabbit format (contains ':')")
    names = corpus.doc_names if corpus.doc_names is not None else [f"doc{d}" for d in range(corpus.n_docs)]
    for n in names:
        _check_vw_name(n, "document name")

    off = corpus.doc_offsets
    wid, cnt = corpus.word_ids, corpus.counts
    with open_write(path, compress) as fh:
        for d in range(corpus.n_docs):
            s, e = off[d], off[d + 1]
            ws, cs = wid[s:e], cnt[s:e]
            ms = mod_of[ws]
            parts = [names[d]]
            for m in np.unique(ms):  # modalities in index order
                sel = ms == m
                toks = [
                    tokens[w] if c == 1 and ":" not in tokens[w] else f"{tokens[w]}:{c}"
                    for w, c in zip(ws[sel].tolist(), cs[sel].tolist())
                ]
                parts.append(f"|{mod_names[m]} " + " ".join(toks))
            if corpus.labels is not None and label_modality is not None and corpus.labels[d].any():
                labs = [corpus.label_names[j] for j in np.flatnonzero(corpus.labels[d])]
                parts.append(f"|{label_modality} " + " ".join(labs))
            fh.write(" ".join(parts) + "\n")
    if vocab_path is not None:
        label_keys = []
        if corpus.labels is not None and label_modality is not None:
            label_keys = [f"{label_modality}|{name}" for name in corpus.label_names]
        write_vocab(list(corpus.vocab) + label_keys, vocab_path, overwrite=True)
    return path
