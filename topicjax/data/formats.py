"""Readers and writers of corpus files; every reader ends in :meth:`Corpus.from_entries`.

Formats
-------
UCI bag of words (:func:`read_uci`, :func:`write_uci`)
    ``docword.NAME.txt[.gz]``: three header lines ``D``, ``W``, ``NNZ``, then ``NNZ`` lines
    ``docID wordID count`` with 1-based ids; ``vocab.NAME.txt``: line ``k`` is word ``k``.
    The header is checked against the content (ids in range, exactly ``NNZ`` entries, so a
    truncated file is an error).
Vowpal Wabbit text, as used by BigARTM (:func:`read_vw`, :func:`write_vw`)
    one document per line, ``doc_name word word:3 |@default_class word |@tag t1 t2``: the first
    token names the document, ``|name`` opens a namespace, which becomes a *modality* of the
    corpus (:attr:`Corpus.modalities`, :attr:`Corpus.modality_names`); tokens before the first
    ``|`` and tokens of a namespace without a name belong to ``"@default_class"``.
lda-c (:func:`read_ldac`, :func:`write_ldac`)
    one document per line, ``N id:count id:count ...`` with ``N`` pairs and 0-based word ids
    (the format of Blei's lda-c and of the PTM reference code); the vocabulary is a separate file,
    one word per line.
Raw text (:func:`read_texts`, :func:`read_text_folder`)
    tokenised by scikit-learn's ``CountVectorizer`` (stop words, ``min_df``, ``max_df``...).

:func:`read_corpus` chooses the reader from the form of a path (used by ``topicjax fit CORPUS``).

Vocabulary keys of a multimodal (VW) corpus
-------------------------------------------
:class:`Corpus` needs distinct vocabulary strings, but the same word may occur in two modalities
(a word ``"sport"`` of the text and a tag ``"sport"``), and these must be two vocabulary entries.
The rule is: the key of a word of modality ``"@default_class"`` is the word itself; the key of a
word ``w`` of any other modality ``m`` is ``"m|w"``.  ``|`` cannot occur inside a VW token or a
namespace name, so keys never collide, and :func:`write_vw` strips the prefix again.
:func:`vw_token` splits a key back into ``(modality, word)``.  A corpus whose words are all in
``"@default_class"`` is read with ``modalities=None`` (a plain bag of words).

Errors
------
Bad content raises :class:`~topicjax.data.corpus.CorpusError` (a ``ValueError``) whose one-line
message starts with the file and line and names the document and the offending value, e.g.
``docword.kos.txt, line 17: document 1: word id 7000 is outside 1..6906 (W in the header)``.
A compressed file that ends early is reported as truncated.  Nothing is silently clipped or
dropped: documents without tokens are an error unless ``empty_docs="drop"`` (then counted in
:attr:`Corpus.dropped_docs`).

>>> import tempfile, os, topicjax as tj
>>> c = tj.Corpus.from_entries([0, 0, 1], [0, 2, 1], [2, 1, 3], vocab=["a", "b", "c"])
>>> folder = tempfile.mkdtemp()
>>> _ = write_ldac(c, os.path.join(folder, "c.ldac"))
>>> open(os.path.join(folder, "c.ldac")).read()
'2 0:2 2:1\\n1 1:3\\n'
>>> read_corpus(os.path.join(folder, "c.ldac")).equals(c)
True
"""

from __future__ import annotations

import gzip
import io
import math
import os
import re
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from topicjax.data.corpus import Corpus, CorpusError

__all__ = [
    "DEFAULT_MODALITY",
    "read_uci",
    "write_uci",
    "read_vw",
    "write_vw",
    "vw_token",
    "read_ldac",
    "write_ldac",
    "read_texts",
    "read_text_folder",
    "read_corpus",
    "corpus_kind",
    "read_vocab",
]

#: Modality of VW tokens before the first namespace and of namespaces without a name (BigARTM).
DEFAULT_MODALITY = "@default_class"

_INT32_MAX = int(np.iinfo(np.int32).max)


# ---------------------------------------------------------------------- shared helpers
class _Bad(Exception):
    """A malformed value; the caller adds the file and line."""


def _err(path, line: int | None, message: str) -> CorpusError:
    where = f"{path}, line {line}" if line is not None else f"{path}"
    return CorpusError(f"{where}: {message}")


def _short(text: str, n: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= n else text[: n - 3] + "...")


def _check_empty_docs(empty_docs: str) -> None:
    if empty_docs not in ("error", "drop"):
        raise ValueError(f"empty_docs must be 'error' or 'drop', got {empty_docs!r}")


def _read_text(path, encoding: str = "utf-8") -> str:
    """The decoded content of a file, gunzipped when it starts with the gzip magic bytes."""
    path = Path(path)
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except EOFError:
            raise _err(path, None, "the gzip stream ends early (truncated file)") from None
        except (gzip.BadGzipFile, zlib.error, OSError) as e:
            raise _err(path, None, f"corrupt gzip data ({e})") from None
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise _err(
            path, line, f"byte {raw[e.start:e.start + 1]!r} is not valid {encoding}; pass encoding='latin-1' "
            "(or the file's encoding)"
        ) from None


def _open_write(path, compress: bool | None):
    """A text handle for writing; gzip when ``compress`` (or, if None, when the name ends in .gz).

    gzip output has a zero timestamp so that the same corpus always gives the same bytes.
    """
    path = Path(path)
    if compress is None:
        compress = path.suffix == ".gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        raw = open(path, "wb")
        gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
        return _Closing(io.TextIOWrapper(gz, encoding="utf-8", newline="\n"), raw)
    return open(path, "w", encoding="utf-8", newline="\n")


class _Closing:
    """Text wrapper over a GzipFile that also closes the underlying file."""

    def __init__(self, text, raw):
        self._text, self._raw = text, raw

    def __enter__(self):
        return self._text

    def __exit__(self, *exc):
        self._text.close()
        self._raw.close()


def _parse_count(tok: str) -> int:
    """A count token: a non-negative integer (``3`` or ``3.0``); anything else is ``_Bad``."""
    try:
        v = int(tok)
    except ValueError:
        try:
            f = float(tok)
        except ValueError:
            raise _Bad(f"count {tok!r} is not a number") from None
        if math.isnan(f):
            raise _Bad(f"count {tok!r} is NaN") from None
        if math.isinf(f):
            raise _Bad(f"count {tok!r} is not finite") from None
        if not f.is_integer():
            raise _Bad(f"count {tok!r} is not an integer") from None
        v = int(f)
    if v < 0:
        raise _Bad(f"count {tok!r} is negative")
    if v > _INT32_MAX:
        raise _Bad(f"count {tok!r} does not fit in int32")
    return v


def _parse_id(tok: str, what: str) -> int:
    try:
        return int(tok)
    except ValueError:
        raise _Bad(f"{what} {tok!r} is not an integer") from None


def read_vocab(path, *, encoding: str = "utf-8") -> list[str]:
    """A vocabulary file, one word per line (surrounding white space removed).

    Blank lines at the end are ignored; a blank line inside the file, or a word that appears
    twice, is an error naming the line.
    """
    lines = _read_text(path, encoding).splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    words: list[str] = []
    seen: dict[str, int] = {}
    for ln, line in enumerate(lines, 1):
        w = line.strip()
        if not w:
            raise _err(path, ln, "blank line inside the vocabulary")
        if w in seen:
            raise _err(path, ln, f"word {w!r} already appears on line {seen[w]}")
        seen[w] = ln
        words.append(w)
    return words


def _vocab_arg(vocab, encoding: str = "utf-8") -> tuple[list[str] | None, str | None]:
    """``vocab`` given as a file path or a sequence of words -> (words, source for messages)."""
    if vocab is None:
        return None, None
    if isinstance(vocab, (str, os.PathLike)):
        return read_vocab(vocab, encoding=encoding), str(vocab)
    return [str(v) for v in vocab], "the given vocabulary"


def _report_empty(path, lengths: np.ndarray, describe) -> None:
    """Raise for the first empty document (``describe(i)`` names it) when ``empty_docs='error'``."""
    empty = np.flatnonzero(lengths == 0)
    if empty.size:
        where, what = describe(int(empty[0]))
        raise _err(
            path, where,
            f"{what} has no tokens ({empty.size} empty document(s) in all); pass empty_docs='drop' to remove them",
        )


def _write_vocab(words: Sequence[str], path) -> None:
    for i, w in enumerate(words):
        if not w or w != w.strip() or "\n" in w or "\r" in w:
            raise CorpusError(f"vocabulary entry {i} ({w!r}) cannot be written one word per line")
    with _open_write(path, False) as fh:
        fh.write("".join(f"{w}\n" for w in words))


# ---------------------------------------------------------------------- UCI bag of words
_DOCWORD = re.compile(r"^docword\.(?P<name>.+)\.txt(?:\.gz)?$")


def _find_uci(path: Path, vocab_path, name: str | None):
    """(docword file, vocabulary file or the given vocabulary) for a folder or a docword file."""
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if _DOCWORD.match(p.name) and p.is_file())
        if name is not None:
            found = [p for p in found if _DOCWORD.match(p.name).group("name") == name]
        if not found:
            what = f"docword.{name}.txt[.gz]" if name else "docword.*.txt[.gz]"
            raise CorpusError(f"{path}: no {what} file in this folder (not a UCI bag-of-words folder)")
        if len(found) > 1:
            names = sorted({_DOCWORD.match(p.name).group("name") for p in found})
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
    m = _DOCWORD.match(docword.name)
    if m:
        for cand in (f"vocab.{m.group('name')}.txt", f"vocab.{m.group('name')}.txt.gz"):
            if (docword.parent / cand).is_file():
                return docword, docword.parent / cand
        raise CorpusError(
            f"{docword}: no vocab.{m.group('name')}.txt beside it; pass the vocabulary file as vocab_path"
        )
    raise CorpusError(f"{docword}: not named docword.NAME.txt[.gz], so pass the vocabulary file as vocab_path")


def _parse_header(lines: list[str], path) -> tuple[int, int, int]:
    values = []
    for i, label in enumerate(("D (number of documents)", "W (number of words)", "NNZ (number of entries)")):
        if i >= len(lines) or not lines[i].strip():
            raise _err(path, i + 1, f"truncated header: expected {label} on this line")
        tok = lines[i].strip()
        try:
            v = int(tok)
        except ValueError:
            raise _err(path, i + 1, f"header value {label} must be an integer, got {_short(tok)}") from None
        if v < 0:
            raise _err(path, i + 1, f"header value {label} is negative ({v})")
        values.append(v)
    return values[0], values[1], values[2]


def _scan_uci(body: str, first_line: int, D: int, W: int, nnz: int, path) -> np.ndarray:
    """Line-by-line parse of the entries: the reference that names the first bad line.

    Returns an ``(nnz, 3)`` array ``docID, wordID, count`` (1-based ids) when all is well.
    """
    rows: list[tuple[int, int, int]] = []
    last = first_line - 1
    for ln, line in enumerate(body.split("\n"), first_line):
        parts = line.split()
        if not parts:
            continue
        last = ln
        try:
            if len(parts) != 3:
                raise _Bad(f"expected 'docID wordID count', got {_short(line)}")
            d = _parse_id(parts[0], "document id")
            w = _parse_id(parts[1], "word id")
            if not 1 <= d <= D:
                raise _Bad(f"document id {d} is outside 1..{D} (D in the header)")
            if not 1 <= w <= W:
                raise _Bad(f"document {d}: word id {w} is outside 1..{W} (W in the header)")
            try:
                c = _parse_count(parts[2])
            except _Bad as e:
                raise _Bad(f"document {d}, word id {w}: {e}") from None
        except _Bad as e:
            raise _err(path, ln, str(e)) from None
        rows.append((d, w, c))
        if len(rows) > nnz:
            raise _err(path, ln, f"more entries than NNZ={nnz} given in the header")
    if len(rows) < nnz:
        raise _err(
            path, last,
            f"the file ends after {len(rows)} entries but the header says NNZ={nnz} (truncated file?)",
        )
    return np.asarray(rows, np.int64).reshape(-1, 3)


def read_uci(
    path,
    vocab_path=None,
    *,
    name: str | None = None,
    empty_docs: str = "error",
    encoding: str = "utf-8",
    **kwargs,
) -> Corpus:
    """Read a UCI bag-of-words corpus.

    ``path`` is a folder holding ``docword.NAME.txt[.gz]`` and ``vocab.NAME.txt`` (``name``
    chooses one when the folder has several), or the docword file itself, whose vocabulary is
    found beside it by name unless ``vocab_path`` gives it (a file, or a sequence of words).
    gzip is recognised by its magic bytes.  The header's ``D``, ``W`` and ``NNZ`` must agree with
    the entries and the vocabulary; repeated ``(doc, word)`` entries are summed.  Other keywords
    go to :meth:`Corpus.from_entries` (``labels``, ``doc_names``...).

    Errors name the file and line: a malformed line, an id out of range, a negative, NaN or
    non-integer count, fewer or more entries than ``NNZ`` (a truncated file), a vocabulary of
    the wrong size.
    """
    _check_empty_docs(empty_docs)
    docword, vocab_src = _find_uci(Path(path), vocab_path, name)
    text = _read_text(docword, encoding)
    head = text.split("\n", 3)
    D, W, nnz = _parse_header(head, docword)
    body = head[3] if len(head) > 3 else ""

    # Fast path: numpy's C parser; any doubt falls back to the line-by-line scan, which names
    # the first bad line (and accepts the few forms numpy refuses, such as a count written 3.0).
    arr = None
    if body.strip():
        try:
            arr = np.loadtxt(io.StringIO(body), dtype=np.int64, comments=None, ndmin=2)
        except ValueError:
            arr = None
    else:
        arr = np.zeros((0, 3), np.int64)
    if (
        arr is None
        or arr.shape != (nnz, 3)
        or (arr.size and not (
            arr[:, 0].min() >= 1 and arr[:, 0].max() <= D and arr[:, 1].min() >= 1 and arr[:, 1].max() <= W
            and arr[:, 2].min() >= 0 and arr[:, 2].max() <= _INT32_MAX
        ))
    ):
        arr = _scan_uci(body, 4, D, W, nnz, docword)

    if isinstance(vocab_src, (str, os.PathLike)):
        vocab = read_vocab(vocab_src, encoding=encoding)
        vsrc = vocab_src
    else:
        vocab = [str(v) for v in vocab_src]
        vsrc = "the given vocabulary"
    if len(vocab) != W:
        raise CorpusError(f"{vsrc}: {len(vocab)} words but the header of {docword} says W={W}")

    doc_ids, word_ids, counts = arr[:, 0] - 1, arr[:, 1] - 1, arr[:, 2]
    if empty_docs == "error":
        lengths = np.bincount(doc_ids, weights=counts, minlength=D)
        _report_empty(docword, lengths, lambda i: (None, f"document {i + 1} (1-based, as in the file)"))
    return Corpus.from_entries(doc_ids, word_ids, counts, vocab=vocab, n_docs=D, empty_docs=empty_docs, **kwargs)


def write_uci(corpus: Corpus, folder, name: str = "corpus", *, compress: bool = False) -> tuple[Path, Path]:
    """Write ``folder/docword.NAME.txt[.gz]`` and ``folder/vocab.NAME.txt`` (folder created).

    Returns the two paths.  Labels, modalities and document names are not part of the format.
    """
    if not name or any(c in name for c in "/\\") or name != name.strip():
        raise ValueError(f"name must be a plain file-name part, got {name!r}")
    folder = Path(folder)
    docword = folder / (f"docword.{name}.txt" + (".gz" if compress else ""))
    vocab_file = folder / f"vocab.{name}.txt"
    _write_vocab(corpus.vocab, vocab_file)
    with _open_write(docword, compress) as fh:
        fh.write(f"{corpus.n_docs}\n{corpus.n_words}\n{corpus.nnz}\n")
        rows = zip((corpus.doc_ids + 1).tolist(), (corpus.word_ids + 1).tolist(), corpus.counts.tolist())
        fh.write("".join(f"{d} {w} {c}\n" for d, w, c in rows))
    return docword, vocab_file


# ---------------------------------------------------------------------- Vowpal Wabbit
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
        raise _Bad(f"malformed token {tok!r} (expected word or word:count)")
    try:
        return word, _parse_count(c)
    except _Bad as e:
        raise _Bad(f"token {tok!r}: {e}") from None


def read_vw(
    path,
    *,
    label_modality: str | None = None,
    vocab=None,
    empty_docs: str = "error",
    encoding: str = "utf-8",
    **kwargs,
) -> Corpus:
    """Read a Vowpal Wabbit text file in BigARTM's form.

    Each non-blank line is a document ``name tok tok |ns tok tok:3 |ns2 ...``; tokens are ``word``
    (count 1) or ``word:count`` (a non-negative integer); a word repeated in a document adds up.
    Namespaces become modalities, with keys as described in the module docstring (``"m|word"``
    outside ``"@default_class"``).  A line that starts with ``|`` has no name; it is named
    ``doc{index}``.

    ``label_modality``: the namespace holding document labels (e.g. ``"@labels"``): its tokens
    become labels (multi-label when a document has several) instead of words; a label token may
    not carry a count other than 1.  Label columns are sorted by name unless ``label_names`` is
    given.  ``vocab``: a sequence of keys or a vocabulary file (one key per line) fixing the
    vocabulary and its order (a word outside it is an error naming the line); otherwise words are
    numbered in order of first appearance.  Other keywords go to :meth:`Corpus.from_entries`.
    """
    _check_empty_docs(empty_docs)
    if label_modality is not None and "labels" in kwargs:
        raise ValueError("pass either label_modality (labels read from the file) or labels, not both")
    words, vsrc = _vocab_arg(vocab, encoding)
    fixed = words is not None
    keys: dict[str, int] = {}
    key_modality: list[str] = []
    if fixed:
        for i, k in enumerate(words):
            if k in keys:
                raise CorpusError(f"{vsrc}: word {k!r} appears twice (entries {keys[k]} and {i})")
            keys[k] = i
            key_modality.append(vw_token(k)[0])
    text = _read_text(path, encoding)
    d_ids: list[int] = []
    w_ids: list[int] = []
    cnts: list[int] = []
    names: list[str] = []
    line_of: list[int] = []
    doc_labels: list[list[str]] = []
    for ln, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        d = len(names)
        segments = line.split("|")
        head = segments[0].split()
        name = head[0] if head else f"doc{d}"
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
                            raise _Bad(f"label {tok!r} has a count; labels of {ns!r} must be plain names")
                        labels_here.append(word)
                        continue
                    key = _vw_key(ns, word)
                    w = keys.get(key)
                    if w is None:
                        if fixed:
                            raise _Bad(f"word {word!r} of modality {ns!r} is not in {vsrc}")
                        w = keys[key] = len(key_modality)
                        key_modality.append(ns)
                    d_ids.append(d)
                    w_ids.append(w)
                    cnts.append(c)
        except _Bad as e:
            raise _err(path, ln, f"document {name!r}: {e}") from None
        names.append(name)
        line_of.append(ln)
        doc_labels.append(labels_here)

    n_docs = len(names)
    d_arr = np.asarray(d_ids, np.int64)
    c_arr = np.asarray(cnts, np.int64)
    if empty_docs == "error":
        lengths = np.bincount(d_arr, weights=c_arr, minlength=n_docs)
        _report_empty(path, lengths, lambda i: (line_of[i], f"document {names[i]!r}"))
    vocab_keys = list(keys)  # insertion order = word index
    if all(m == DEFAULT_MODALITY for m in key_modality):
        modalities = modality_names = None
    else:
        modality_names = list(dict.fromkeys(key_modality))
        modalities = key_modality
    kwargs.setdefault("doc_names", names)
    if label_modality is not None:
        kwargs["labels"] = doc_labels
    return Corpus.from_entries(
        d_arr, np.asarray(w_ids, np.int64), c_arr, vocab=vocab_keys, n_docs=n_docs,
        modalities=modalities, modality_names=modality_names, empty_docs=empty_docs, **kwargs,
    )


def _check_vw_name(s: str, what: str) -> None:
    if not s or any(ch.isspace() for ch in s) or "|" in s:
        raise CorpusError(f"{what} {s!r} cannot be written in Vowpal Wabbit format (empty, white space or '|')")


def write_vw(
    corpus: Corpus,
    path,
    *,
    label_modality: str | None = "@labels",
    vocab_path=None,
    compress: bool | None = None,
) -> Path:
    """Write a Vowpal Wabbit text file (BigARTM's form); gzip when the name ends in ``.gz``.

    One line per document: its name (``doc_names``, else ``doc{index}``), then ``|modality``
    and its tokens for every modality present in the document (``|@default_class`` for a corpus
    without modalities), ``word`` for a count of 1 and ``word:count`` otherwise.  Labels are
    written as the namespace ``label_modality`` (``None``: labels are not written).  The format
    has no vocabulary, so words that never occur, and the order of the vocabulary, are lost
    unless ``vocab_path`` is given: then the vocabulary keys are written there, one per line, to
    pass back as ``read_vw(path, vocab=vocab_path)``.  Returns ``path``.
    """
    path = Path(path)
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
    with _open_write(path, compress) as fh:
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
        _write_vocab(corpus.vocab, vocab_path)
    return path


# ---------------------------------------------------------------------- lda-c
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


def read_ldac(
    path,
    vocab=None,
    *,
    n_words: int | None = None,
    empty_docs: str = "error",
    encoding: str = "utf-8",
    **kwargs,
) -> Corpus:
    """Read an lda-c file: one document per line, ``N id:count ...`` with 0-based word ids.

    ``N`` must equal the number of pairs; a document without words is the line ``0`` (an error
    unless ``empty_docs="drop"``); a blank line inside the file is an error.  ``vocab`` is a
    file (one word per line) or a sequence of words; when it is None, a vocabulary file beside
    the corpus (``X.vocab``, ``X.tokens``, ``X.vocab.txt`` for ``X.ldac``) is used if there is
    one, else the vocabulary size is ``n_words`` or the largest id + 1 and the words are named
    ``w0, w1, ...``.  Other keywords go to :meth:`Corpus.from_entries` (``labels``...).
    """
    _check_empty_docs(empty_docs)
    path = Path(path)
    if vocab is None:
        vocab = _ldac_vocab_beside(path)
    words, vsrc = _vocab_arg(vocab, encoding)
    if words is not None and n_words is not None and n_words != len(words):
        raise CorpusError(f"n_words={n_words} but {vsrc} has {len(words)} words")
    W = len(words) if words is not None else n_words
    lines = _read_text(path, encoding).splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    d_ids: list[int] = []
    w_ids: list[int] = []
    cnts: list[int] = []
    for d, line in enumerate(lines):
        ln = d + 1
        parts = line.split()
        try:
            if not parts:
                raise _Bad("blank line (a document without words is written '0')")
            try:
                n = int(parts[0])
            except ValueError:
                raise _Bad(f"expected the number of pairs first, got {_short(parts[0])}") from None
            if n != len(parts) - 1:
                raise _Bad(f"document {d}: the line starts with N={n} but has {len(parts) - 1} id:count pairs")
            for tok in parts[1:]:
                i, sep, c = tok.partition(":")
                if not sep or not i or not c:
                    raise _Bad(f"document {d}: malformed pair {tok!r} (expected id:count)")
                w = _parse_id(i, "word id")
                if w < 0:
                    raise _Bad(f"document {d}: word id {w} is negative")
                if W is not None and w >= W:
                    src = vsrc or f"n_words={W}"
                    raise _Bad(f"document {d}: word id {w} is outside the vocabulary of {W} words ({src})")
                try:
                    cnt = _parse_count(c)
                except _Bad as e:
                    raise _Bad(f"document {d}, word id {w}: {e}") from None
                d_ids.append(d)
                w_ids.append(w)
                cnts.append(cnt)
        except _Bad as e:
            raise _err(path, ln, str(e)) from None
    n_docs = len(lines)
    d_arr = np.asarray(d_ids, np.int64)
    c_arr = np.asarray(cnts, np.int64)
    if empty_docs == "error":
        lengths = np.bincount(d_arr, weights=c_arr, minlength=n_docs)
        _report_empty(path, lengths, lambda i: (i + 1, f"document {i}"))
    if W is None:
        W = max(w_ids) + 1 if w_ids else 0
    return Corpus.from_entries(
        d_arr, np.asarray(w_ids, np.int64), c_arr, vocab=words, n_words=None if words is not None else W,
        n_docs=n_docs, empty_docs=empty_docs, **kwargs,
    )


def write_ldac(corpus: Corpus, path, vocab_path=None, *, compress: bool | None = None) -> tuple[Path, Path | None]:
    """Write an lda-c file and its vocabulary; gzip when the name ends in ``.gz``.

    ``vocab_path`` defaults to ``X.vocab`` beside ``X.ldac`` (where :func:`read_ldac` looks);
    ``False`` writes no vocabulary.  Labels and document names are not part of the format.
    Returns ``(path, vocab_path)``.
    """
    path = Path(path)
    if vocab_path is None:
        base = path.with_suffix("") if path.suffix == ".gz" else path
        stem = base.with_suffix("")
        vocab_path = stem.with_name(stem.name + ".vocab")
    off = corpus.doc_offsets
    wid, cnt = corpus.word_ids.tolist(), corpus.counts.tolist()
    with _open_write(path, compress) as fh:
        for d in range(corpus.n_docs):
            s, e = int(off[d]), int(off[d + 1])
            pairs = " ".join(f"{w}:{c}" for w, c in zip(wid[s:e], cnt[s:e]))
            fh.write(f"{e - s} {pairs}\n" if pairs else "0\n")
    if vocab_path is False:
        return path, None
    _write_vocab(corpus.vocab, vocab_path)
    return path, Path(vocab_path)


# ---------------------------------------------------------------------- raw text
def read_texts(
    texts,
    labels=None,
    *,
    empty_docs: str = "error",
    doc_names: Sequence[str] | None = None,
    **vectorizer_kwargs,
) -> Corpus:
    """Tokenise raw texts with scikit-learn's ``CountVectorizer`` into a Corpus.

    Keyword arguments configure ``CountVectorizer`` (``stop_words="english"``, ``min_df``,
    ``max_df``, ``max_features``, ``token_pattern``, ``lowercase``, ``vocabulary`` to reuse a
    training vocabulary...).  The vocabulary is sorted, as ``CountVectorizer`` gives it.  A text
    left without tokens (only stop words, or only rare words removed by ``min_df``) is an error
    naming it, unless ``empty_docs="drop"``.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    _check_empty_docs(empty_docs)
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a sequence of documents, not a single string")
    texts = list(texts)
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
        lengths = np.asarray(X.sum(axis=1)).ravel()

        def describe(i):
            name = f" ({doc_names[i]})" if doc_names is not None else ""
            return None, f"text {i}{name}, after tokenising (stop words, min_df, max_df, token pattern),"

        _report_empty("texts", lengths, describe)
    return Corpus.from_sparse(X, vocab, labels=labels, doc_names=doc_names, empty_docs=empty_docs)


def _text_files(root: Path, suffixes) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(filenames):
            if f.startswith("."):
                continue
            if suffixes is not None and not f.endswith(tuple(suffixes)):
                continue
            out.append(Path(dirpath) / f)
    return sorted(out, key=lambda p: p.relative_to(root).parts)


def read_text_folder(
    path,
    *,
    suffixes: Sequence[str] | None = None,
    encoding: str = "utf-8",
    labels: bool | None = None,
    empty_docs: str = "error",
    **vectorizer_kwargs,
) -> Corpus:
    """Read a folder of raw text files, one document per file, through :func:`read_texts`.

    Files are taken in sorted order (hidden files and folders skipped; ``suffixes`` such as
    ``(".txt",)`` restricts them).  When the files lie in sub-folders (the layout of
    20 Newsgroups, ``group/post``), the name of each file's folder is its label; ``labels=False``
    ignores them, ``labels=True`` requires them.  Files both at the top and in sub-folders are an
    error when labels are used.  Document names are the paths relative to ``path``.  A file that
    is not valid ``encoding`` is an error naming it (20 Newsgroups needs ``encoding="latin-1"``).
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    files = _text_files(root, suffixes)
    if not files:
        raise CorpusError(f"{root}: no text files in this folder")
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
    texts = [_read_text(p, encoding) for p in files]
    names = ["/".join(p.relative_to(root).parts) for p in files]
    doc_labels = [p.parent.name for p in files] if labels else None
    return read_texts(texts, doc_labels, empty_docs=empty_docs, doc_names=names, **vectorizer_kwargs)


# ---------------------------------------------------------------------- dispatch
_VW_SUFFIXES = (".vw", ".vw.txt", ".vw.gz", ".vw.txt.gz")
_LDAC_SUFFIXES = (".ldac", ".dat", ".lda-c", ".ldac.gz", ".dat.gz", ".lda-c.gz")


def corpus_kind(path) -> str:
    """``"uci"``, ``"vw"``, ``"ldac"`` or ``"texts"``: how :func:`read_corpus` reads ``path``."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    name = p.name.lower()
    if p.is_dir():
        if any(_DOCWORD.match(q.name) for q in p.iterdir() if q.is_file()):
            return "uci"
        return "texts"
    if _DOCWORD.match(p.name):
        return "uci"
    if name.endswith(_VW_SUFFIXES):
        return "vw"
    if name.endswith(_LDAC_SUFFIXES):
        return "ldac"
    raise CorpusError(
        f"{p}: unknown corpus form; expected a UCI folder or docword.NAME.txt[.gz] file, a Vowpal Wabbit "
        "file (.vw, .vw.txt), an lda-c file (.ldac, .dat) or a folder of raw text files"
    )


def read_corpus(path, **kwargs) -> Corpus:
    """Read a corpus, choosing the reader from what ``path`` is.

    * a folder holding ``docword.*.txt[.gz]``, or a file named so: :func:`read_uci`;
    * ``*.vw``, ``*.vw.txt`` (optionally ``.gz``): :func:`read_vw`;
    * ``*.ldac``, ``*.dat``, ``*.lda-c`` (optionally ``.gz``): :func:`read_ldac`, with the
      vocabulary file found beside it;
    * any other folder: :func:`read_text_folder` (one document per file, sub-folders as labels).

    Keywords go to the chosen reader.  A path of any other form is a :class:`CorpusError`; a
    missing path a :class:`FileNotFoundError`.
    """
    kind = corpus_kind(path)
    reader = {"uci": read_uci, "vw": read_vw, "ldac": read_ldac, "texts": read_text_folder}[kind]
    return reader(path, **kwargs)
