"""How a :class:`~topicjax.data.corpus.Corpus` is built from coordinate entries, as named steps.

:meth:`Corpus.from_entries <topicjax.data.corpus.Corpus.from_entries>` is
:func:`corpus_fields`, which runs, in order:

1. :func:`entry_arrays` -- the entry arrays as numbers, ids as integers, one length;
2. :func:`vocabulary` -- the vocabulary (or placeholder names), then the counts and word ids
   checked (:func:`topicjax.data.entries.checked_counts`, :func:`~topicjax.data.entries.check_word_range`);
3. :func:`document_count` -- the number of documents, given or inferred from the ids;
4. :func:`topicjax.data.entries.sorted_entries` -- entries sorted, zeros dropped, duplicates summed;
5. :func:`check_inferred_documents` -- an inferred size within :func:`inferred_size_limit`;
6. :func:`labels_matrix`, :func:`modalities_array` -- labels and modalities normalised;
7. :func:`drop_empty` -- empty documents refused or dropped.

The array steps themselves (bounded temporaries, no copies of sorted input) are in
:mod:`topicjax.data.entries`; :func:`list_entries` turns gensim-style documents into entries.
"""

from __future__ import annotations

import numpy as np

from topicjax.data import entries
from topicjax.data.entries import (
    MAX_ID,
    MAX_PLACEHOLDER_WORDS,
    CorpusError,
    first_missing,
    inferred_size_limit,
)

__all__ = ["corpus_fields", "entry_arrays", "vocabulary", "document_count", "check_inferred_documents",
           "labels_matrix", "modalities_array", "drop_empty", "list_entries", "reindex", "check_size"]


def check_size(value, name: str) -> int:
    """A size given by the caller (``n_docs``, ``n_words``): an integer in ``[0, MAX_ID]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise CorpusError(f"{name} must be a non-negative integer, got {value!r}")
    value = int(value)
    if value < 0:
        raise CorpusError(f"{name} must be a non-negative integer, got {value}")
    if value > MAX_ID:
        raise CorpusError(f"{name}={value} is more than {MAX_ID} (ids are stored as int32)")
    return value


def vocabulary(vocab, n_words: int | None) -> tuple[str, ...]:
    """The vocabulary as a tuple of distinct strings (``w0, w1, ...`` when only ``n_words`` is given)."""
    if vocab is None:
        if n_words is None:
            raise CorpusError("either vocab or n_words must be given")
        n_words = check_size(n_words, "n_words")
        if n_words > MAX_PLACEHOLDER_WORDS:
            raise CorpusError(
                f"n_words={n_words} without a vocabulary: placeholder names are made for at most "
                f"{MAX_PLACEHOLDER_WORDS} words; pass the vocabulary"
            )
        return tuple(f"w{i}" for i in range(n_words))
    if isinstance(vocab, (str, bytes)):
        raise CorpusError(f"vocab must be a sequence of words, not a single string ({vocab[:40]!r})")
    vocab = tuple(str(v) for v in vocab)
    if len(vocab) > MAX_ID:
        raise CorpusError(f"the vocabulary has {len(vocab)} words, more than {MAX_ID} (ids are stored as int32)")
    if len(set(vocab)) != len(vocab):
        seen: dict[str, int] = {}
        for i, v in enumerate(vocab):
            if v in seen:
                raise CorpusError(f"vocabulary entry {v!r} appears twice (positions {seen[v]} and {i})")
            seen[v] = i
    return vocab


def _is_label_int(v) -> bool:
    """An integer label (a column index), excluding booleans, which are names ("True")."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def labels_matrix(labels, label_names, n_docs: int):
    """Normalise labels to a boolean ``(n_docs, n_labels)`` matrix and its column names.

    * a 2-d numpy array is the indicator matrix itself (columns named ``label_names`` or
      ``"0", "1", ...``);
    * otherwise one entry per document: a single label, or a collection (list, tuple, set,
      array) of labels for a multi-label document.  Integer labels are column indices when
      ``label_names`` is given or when every label is an integer (columns ``"0".."max"``);
      any other label is looked up by its string, the columns being the sorted distinct strings
      unless ``label_names`` fixes them.
    """
    if labels is None:
        return None, ()
    if isinstance(labels, np.ndarray) and labels.ndim == 2:
        m = labels.astype(bool)
        if m.shape[0] != n_docs:
            raise CorpusError(f"label matrix has {m.shape[0]} rows for {n_docs} documents")
        names = tuple(str(n) for n in label_names) if label_names is not None else tuple(str(i) for i in range(m.shape[1]))
        if len(names) != m.shape[1]:
            raise CorpusError(f"{len(names)} label names for {m.shape[1]} label columns")
        return m, names
    per_doc = [
        list(l) if isinstance(l, (list, tuple, set, frozenset, np.ndarray)) else [l] for l in labels
    ]
    if len(per_doc) != n_docs:
        raise CorpusError(f"{len(per_doc)} labels for {n_docs} documents")
    values = [v for ls in per_doc for v in ls]
    by_index = label_names is not None or (bool(values) and all(_is_label_int(v) for v in values))
    if label_names is not None:
        names = tuple(str(n) for n in label_names)
    elif by_index:
        for d, ls in enumerate(per_doc):
            for v in ls:
                if v < 0:
                    raise CorpusError(f"document {d}: label {v} is negative")
        n_distinct = len(set(int(v) for v in values))
        top = int(max(values))
        if top + 1 > inferred_size_limit(n_distinct):
            d = next(d for d, ls in enumerate(per_doc) if any(int(v) == top for v in ls))
            raise CorpusError(
                f"document {d}: integer label {top} would make {top + 1} label columns for {n_distinct} distinct "
                f"labels (more than {inferred_size_limit(n_distinct)} is not inferred); pass label_names or string labels"
            )
        names = tuple(str(i) for i in range(top + 1))
    else:
        names = tuple(sorted({str(v) for v in values}))
    index = {n: i for i, n in enumerate(names)}
    m = np.zeros((n_docs, len(names)), bool)
    for d, ls in enumerate(per_doc):
        for v in ls:
            if by_index and _is_label_int(v):
                if not 0 <= v < len(names):
                    raise CorpusError(f"document {d}: label {v} is outside [0, {len(names)})")
                m[d, int(v)] = True
            elif str(v) in index:
                m[d, index[str(v)]] = True
            else:
                raise CorpusError(f"document {d}: label {v!r} is not among the label names")
    return m, names


def modalities_array(modalities, modality_names, n_words: int):
    """The modality of every word as ``int32`` indices and the modality names (``(None, ())`` for none)."""
    if modalities is None:
        return None, ()
    mod = np.asarray(modalities)
    if mod.shape != (n_words,):
        raise CorpusError(f"modalities must give one modality per word ({n_words}), got shape {mod.shape}")
    if mod.dtype.kind in "iu":
        if modality_names is None and mod.size:
            n_distinct = int(np.unique(mod).size)
            if mod.min() >= 0 and int(mod.max()) + 1 > inferred_size_limit(n_distinct):
                raise CorpusError(
                    f"word {int(np.argmax(mod))}: modality index {int(mod.max())} would make {int(mod.max()) + 1} "
                    f"modalities for {n_distinct} distinct indices; pass modality_names"
                )
        names = tuple(modality_names) if modality_names is not None else tuple(f"m{i}" for i in range(int(mod.max()) + 1 if mod.size else 0))
        if mod.size and (mod.min() < 0 or mod.max() >= len(names)):
            raise CorpusError(f"modality index outside [0, {len(names)})")
        return mod.astype(np.int32), names
    names = tuple(modality_names) if modality_names is not None else tuple(dict.fromkeys(str(m) for m in mod))
    index = {n: i for i, n in enumerate(names)}
    try:
        return np.array([index[str(m)] for m in mod], np.int32), names
    except KeyError as e:
        raise CorpusError(f"modality {e.args[0]!r} is not among the modality names") from None


# ------------------------------------------------------------------------------ the steps of from_entries
def entry_arrays(doc_ids, word_ids, counts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 1: the three entry arrays as numbers, ids as integers, one length, 1-d."""
    doc_ids = entries.as_numbers(doc_ids, "document id")
    word_ids = entries.as_numbers(word_ids, "word id")
    counts = entries.as_numbers(counts, "count")
    if not (doc_ids.shape == word_ids.shape == counts.shape) or doc_ids.ndim != 1:
        raise CorpusError(
            f"doc_ids, word_ids and counts must be 1-d arrays of one length, got shapes "
            f"{doc_ids.shape}, {word_ids.shape}, {counts.shape}"
        )
    return entries.integer_ids(doc_ids, "document id"), entries.integer_ids(word_ids, "word id"), counts


def document_count(doc_ids: np.ndarray, n_docs, doc_names, labels) -> tuple[int, int | None]:
    """Step 3: the number of documents, given (checked against the ids) or inferred from the
    largest id (and from per-document names or labels, when given); returns ``(n_docs,
    n_docs_from_ids)``, the latter None when ``n_docs`` was given."""
    if n_docs is not None:
        n_docs = check_size(n_docs, "n_docs")
        if doc_ids.size and int(doc_ids.max()) >= n_docs:
            i = int(np.argmax(doc_ids))
            raise CorpusError(f"entry {i}: document id {int(doc_ids[i])} is outside [0, {n_docs})")
        return n_docs, None
    # Documents after the last one with an entry are empty; the per-document names or labels,
    # when given, say how many documents there are.
    n_docs = int(doc_ids.max()) + 1 if doc_ids.size else 0
    if n_docs > MAX_ID:
        i = int(np.argmax(doc_ids))
        raise CorpusError(f"entry {i}: document id {int(doc_ids[i])} is more than {MAX_ID - 1} (int32)")
    from_ids = n_docs
    if doc_names is not None:
        n_docs = max(n_docs, len(doc_names))
    if labels is not None and hasattr(labels, "__len__"):
        n_docs = max(n_docs, len(labels))
    return n_docs, from_ids


def check_inferred_documents(n_docs: int, n_docs_from_ids: int | None, n_present: int) -> None:
    """Step 5: a number of documents inferred from the largest id stays within
    :func:`inferred_size_limit` of the documents that have tokens."""
    if (n_docs_from_ids is not None and n_docs == n_docs_from_ids and n_docs > n_present
            and n_docs > inferred_size_limit(n_present)):
        raise CorpusError(
            f"document id {n_docs - 1} would make {n_docs} documents of which only {n_present} have "
            f"tokens (more than {inferred_size_limit(n_present)} is not inferred from ids); pass n_docs"
        )


def drop_empty(fields: dict, present: np.ndarray, empty_docs: str) -> dict:
    """Step 7: documents without tokens -- an error naming the first (``empty_docs="error"``), or
    removed, the rest renumbered and the removed ones listed in ``dropped_docs``."""
    n_docs, doc_names = fields["n_docs"], fields["doc_names"]
    n_empty = n_docs - int(present.size)
    if not n_empty:
        return fields
    if empty_docs == "error":
        first = first_missing(present, n_docs)
        which = f"document {first}" + (f" ({doc_names[first]})" if doc_names is not None else "")
        raise CorpusError(f"{which} has no tokens ({n_empty} empty document(s) in all); "
                          "pass empty_docs='drop' to remove them")
    # O(entries) renumbering; the only array of size n_docs is dropped_docs itself.
    empty_mask = np.ones(n_docs, bool)
    empty_mask[present] = False
    return {
        **fields,
        "doc_ids": entries.renumber(fields["doc_ids"]),
        "labels": fields["labels"][present] if fields["labels"] is not None else None,
        "doc_names": tuple(doc_names[i] for i in present.tolist()) if doc_names is not None else None,
        "n_docs": int(present.size),
        "dropped_docs": np.flatnonzero(empty_mask).astype(np.int64),
    }


def corpus_fields(doc_ids, word_ids, counts, *, vocab=None, n_words=None, n_docs=None, labels=None,
                  label_names=None, modalities=None, modality_names=None, doc_names=None,
                  empty_docs: str = "error", copy: bool = True) -> dict:
    """The fields of a :class:`~topicjax.data.corpus.Corpus` from coordinate entries, validated and
    normalised by the named steps of this module (see :meth:`Corpus.from_entries` for the
    arguments; ``copy=False``: the entry arrays are handed over, and become the Corpus's own when
    they already are int32 and in order, as a file reader's are).  Sizes are checked before anything of that size is allocated (a placeholder
    vocabulary, per-document arrays): see :func:`inferred_size_limit`."""
    if empty_docs not in ("error", "drop"):
        raise ValueError(f"empty_docs must be 'error' or 'drop', got {empty_docs!r}")
    doc_ids, word_ids, counts = entry_arrays(doc_ids, word_ids, counts)  # 1
    vocab_t = vocabulary(vocab, n_words)  # 2
    if n_words is not None and vocab is not None and n_words != len(vocab_t):
        raise CorpusError(f"n_words={n_words} but the vocabulary has {len(vocab_t)} entries")
    W = len(vocab_t)
    counts = entries.checked_counts(counts, doc_ids, word_ids)
    if doc_ids.size and int(doc_ids.min()) < 0:
        i = int(np.argmin(doc_ids))
        raise CorpusError(f"entry {i}: document id {int(doc_ids[i])} is negative")
    entries.check_word_range(word_ids, W, doc_ids)
    n_docs, n_docs_from_ids = document_count(doc_ids, n_docs, doc_names, labels)  # 3
    # 4: zero entries carry no information: dropped; duplicates merged by summing.
    doc_ids, word_ids, counts = entries.sorted_entries(doc_ids, word_ids, counts, W, copy)
    present = entries.present_documents(doc_ids)
    check_inferred_documents(n_docs, n_docs_from_ids, int(present.size))  # 5
    labels_m, label_names_t = labels_matrix(labels, label_names, n_docs)  # 6: per-document and per-word data
    modalities_a, modality_names_t = modalities_array(modalities, modality_names, W)
    if doc_names is not None:
        doc_names = tuple(str(n) for n in doc_names)
        if len(doc_names) != n_docs:
            raise CorpusError(f"{len(doc_names)} document names for {n_docs} documents")
    fields = dict(doc_ids=doc_ids, word_ids=word_ids, counts=counts, vocab=vocab_t, n_docs=int(n_docs),
                  labels=labels_m, label_names=label_names_t, modalities=modalities_a,
                  modality_names=modality_names_t, doc_names=doc_names, dropped_docs=np.zeros(0, np.int64))
    return drop_empty(fields, present, empty_docs)  # 7


def reindex(vocab: tuple, word_ids: np.ndarray, modalities, target: tuple, unknown: str):
    """The entries of a corpus with vocabulary ``vocab`` re-indexed onto ``target``: ``(keep, new
    word ids, modalities on target)``, ``keep`` the entries whose word is in ``target`` (a word
    outside is dropped, or an error naming it with ``unknown="error"``)."""
    if unknown not in ("drop", "error"):
        raise ValueError(f"unknown must be 'drop' or 'error', got {unknown!r}")
    index = {w: i for i, w in enumerate(target)}
    mapping = np.array([index.get(w, -1) for w in vocab], np.int64)
    new_w = mapping[word_ids] if word_ids.size else np.zeros(0, np.int64)
    missing = new_w < 0
    if unknown == "error" and missing.any():
        w = vocab[int(word_ids[np.flatnonzero(missing)[0]])]
        raise CorpusError(f"word {w!r} is not in the target vocabulary ({int(missing.sum())} entries affected)")
    new_modalities = None
    if modalities is not None:
        new_modalities = np.zeros(len(target), np.int32)
        has = mapping >= 0
        new_modalities[mapping[has]] = modalities[has]
    return ~missing, new_w, new_modalities


def list_entries(docs, vocab, kwargs: dict):
    """gensim-style documents (``[(word_id, count), ...]`` each) as ``(doc_ids, word_ids, counts,
    vocab, kwargs)`` for :meth:`Corpus.from_entries`: the vocabulary of a mapping (a gensim
    ``Dictionary``) as a list, ``n_docs`` and, without a vocabulary, ``n_words`` inferred within
    :func:`inferred_size_limit` of the distinct ids."""
    kwargs = dict(kwargs)
    d_list, w_list, c_list = [], [], []
    n = 0
    for d, doc in enumerate(docs):
        n = d + 1
        for item in doc:
            try:
                w, c = item
            except (TypeError, ValueError):
                raise CorpusError(f"document {d}: entry {item!r} is not a (word_id, count) pair") from None
            d_list.append(d)
            w_list.append(w)
            c_list.append(c)
    if vocab is not None and not isinstance(vocab, (list, tuple, np.ndarray)):
        mapping = dict(vocab.items()) if hasattr(vocab, "items") else dict(enumerate(vocab))
        gaps = [i for i in range(len(mapping)) if i not in mapping]
        if gaps:
            raise CorpusError(f"the vocabulary mapping has no word for id {gaps[0]} (ids must be 0..{len(mapping) - 1})")
        vocab = [mapping[i] for i in range(len(mapping))]
    kwargs.setdefault("n_docs", n)
    w_arr = entries.as_numbers(w_list, "word id")
    if vocab is None and kwargs.get("n_words") is None:
        kwargs["n_words"] = 0
        if w_arr.size:
            ok = np.issubdtype(w_arr.dtype, np.number) and bool(np.all(np.isfinite(w_arr)))
            top = int(np.max(w_arr)) if ok else 0
            if ok and top >= 0 and np.all(w_arr == np.round(w_arr)):
                n_distinct = int(np.unique(w_arr).size)
                if top + 1 > inferred_size_limit(n_distinct):
                    i = int(np.argmax(w_arr))
                    raise CorpusError(
                        f"document {d_list[i]}: word id {top} would make a vocabulary of {top + 1} words for "
                        f"{n_distinct} distinct ids (more than {inferred_size_limit(n_distinct)} is not "
                        "inferred); pass vocab or n_words"
                    )
                kwargs["n_words"] = top + 1
            # otherwise from_entries names the bad id
    return np.asarray(d_list, np.int64), w_arr, entries.as_numbers(c_list, "count"), vocab, kwargs

