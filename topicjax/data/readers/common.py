"""What the readers share: errors naming the file and line, decoding, line splitting, strict
integers and counts, vocabulary files, the empty-document check, compressed writing."""

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

from topicjax._outputs import OutputRefusedError, check_file
from topicjax.data.entries import CorpusError, first_missing

INT32_MAX = int(np.iinfo(np.int32).max)
#: An integer as the readers accept it: ASCII digits with an optional sign (``int()`` alone would
#: also take ``1_000`` and digits of other scripts such as ``\u0661``, which no other tool reads).
INT_PATTERN = re.compile(r"[+-]?[0-9]+")


#: What a reader says of a file without a single document (nothing but white space).
EMPTY_FILE = "the file is empty (no documents)"


class BadValue(Exception):
    """A malformed value; the caller adds the file and line (with :func:`file_error`)."""


def file_error(path, line: int | None, message: str) -> CorpusError:
    where = f"{path}, line {line}" if line is not None else f"{path}"
    return CorpusError(f"{where}: {message}")


def short(text: str, n: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= n else text[: n - 3] + "...")


def check_empty_docs(empty_docs: str) -> None:
    if empty_docs not in ("error", "drop"):
        raise ValueError(f"empty_docs must be 'error' or 'drop', got {empty_docs!r}")


def split_lines(text: str) -> list[str]:
    """The lines of a file's text: lines end at ``\\n`` only (as in BigARTM, lda-c and the UCI
    tools); a ``\\r`` before it (Windows line ends) and any other control character are white
    space inside the line, so line numbers in messages are those of ``wc -l`` and editors.

    >>> split_lines("a\\r\\nb\\x0cc\\n")
    ['a\\r', 'b\\x0cc', '']
    """
    return text.split("\n")


def _gzip_error(path, e: BaseException) -> CorpusError:
    """The error for a gzip stream that cannot be read: truncated (it ends early) or corrupt."""
    if isinstance(e, EOFError):
        return file_error(path, None, "the gzip stream ends early (truncated file)")
    return file_error(path, None, f"corrupt gzip data ({e})")


#: What reading a gzip stream raises for a corrupt or truncated file (each made a CorpusError).
_GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, OSError, ValueError)


def _decode_error(path, line: int | None, bad: bytes, encoding: str) -> CorpusError:
    """The error for a file that is not valid ``encoding`` (``bad``: the first bad byte)."""
    what = f"byte {bad!r} is not valid {encoding}" if bad else f"not valid {encoding}"
    return file_error(path, line, f"{what}; pass encoding='latin-1' (or the file's encoding)")


def is_gzip(path) -> bool:
    """Whether the file starts with the gzip magic bytes (how every reader recognises gzip)."""
    with open(path, "rb") as probe:
        return probe.read(2) == b"\x1f\x8b"


def read_text(path, encoding: str = "utf-8") -> str:
    """The decoded content of a file, gunzipped when it starts with the gzip magic bytes, without
    a byte-order mark at its start (:func:`strip_bom`)."""
    path = Path(path)
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except _GZIP_ERRORS as e:
            raise _gzip_error(path, e) from None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        raise _decode_error(path, raw.count(b"\n", 0, e.start) + 1, raw[e.start:e.start + 1], encoding) from None
    return strip_bom(text)


def _open_binary(path):
    """The file's bytes as a stream, gunzipped on the fly when it starts with the gzip magic."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def _first_bad_line(path, encoding: str) -> CorpusError:
    """The decoding error of a streamed file, naming its first bad line (a second pass over the
    bytes, line by line: a text stream decodes in chunks, so it cannot say which line failed)."""
    try:
        with _open_binary(path) as raw:
            for ln, line in enumerate(raw, 1):
                try:
                    line.decode(encoding)
                except UnicodeDecodeError as e:
                    return _decode_error(path, ln, line[e.start:e.start + 1], encoding)
    except Exception:  # noqa: BLE001 - the stream's own fault is reported where it is met
        pass
    return _decode_error(path, None, b"", encoding)


def stream_lines(path, encoding: str = "utf-8", max_line: int | None = None, line_kind: str = "a line of this format"):
    """``(line number, text)`` of a file read as a stream, never whole (gzip recognised by its
    magic, as :func:`read_text` does): for files larger than memory.

    Lines end at ``\\n`` only and keep it, as :func:`split_lines` splits, so that line numbers
    agree with the in-memory readers; a byte-order mark at the start is dropped, as
    :func:`read_text` drops it.  A decoding error (naming the first bad line), a corrupt or
    truncated gzip stream, or a line longer than ``max_line`` characters (``line_kind``: what a
    line of the format is, for the message) is a
    :class:`~topicjax.data.corpus.CorpusError` naming the file, with :func:`read_text`'s messages.
    """
    ln = 0
    with io.TextIOWrapper(_open_binary(path), encoding=encoding, newline="\n") as fh:
        while True:
            try:
                line = fh.readline(max_line + 1 + (ln == 0) if max_line else -1)  # + a byte-order mark
            except UnicodeDecodeError:
                raise _first_bad_line(path, encoding) from None
            except _GZIP_ERRORS as e:
                raise _gzip_error(path, e) from None
            if not line:
                return
            ln += 1
            if ln == 1:
                line = strip_bom(line)
            if max_line and len(line) - line.endswith("\n") > max_line:
                raise file_error(path, ln, f"longer than {max_line} characters (not {line_kind})")
            yield ln, line


def stream_blocks(path, encoding: str = "utf-8", block_chars: int = 1 << 24, max_line: int | None = None,
                  line_kind: str = "a line of this format"):
    """``(number of the first line, text)`` of a file read as a stream about ``block_chars``
    characters at a time, each text whole lines (only the last may lack its ``\\n``): for parsers
    that take many lines at once (numpy's), over files larger than memory.

    Lines, line numbers, the byte-order mark and the errors are those of :func:`stream_lines`; a
    line still without its end after ``max_line`` characters is an error naming it, so that memory
    stays one block whatever the file holds.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "f.txt")
    >>> _ = open(path, "w").write("a b\\nc\\nd e f\\n")
    >>> list(stream_blocks(path, block_chars=4))
    [(1, 'a b\\n'), (2, 'c\\n'), (3, 'd e f\\n')]
    """
    ln, pending, first = 1, "", True
    size = min(block_chars, 1 << 16)  # doubled up to block_chars: a small file reserves no large buffer
    with io.TextIOWrapper(_open_binary(path), encoding=encoding, newline="\n") as fh:
        while True:
            try:
                chunk = fh.read(size)
                size = min(2 * size, block_chars)
            except UnicodeDecodeError:
                raise _first_bad_line(path, encoding) from None
            except _GZIP_ERRORS as e:
                raise _gzip_error(path, e) from None
            if not chunk:
                if pending:
                    if max_line:
                        _check_line_lengths(pending, ln, max_line, path, line_kind)
                    yield ln, pending
                return
            if first:
                chunk, first = strip_bom(chunk), False
            text = pending + chunk
            cut = text.rfind("\n") + 1
            block, pending = text[:cut], text[cut:]
            if block:
                if max_line:
                    _check_line_lengths(block, ln, max_line, path, line_kind)
                yield ln, block
                ln += block.count("\n")
            if max_line and len(pending) > max_line:
                raise file_error(path, ln, f"longer than {max_line} characters (not {line_kind})")


def _check_line_lengths(text: str, first_line: int, max_line: int, path, line_kind: str) -> None:
    """:func:`stream_lines`' rule for whole lines: none longer than ``max_line`` characters besides
    its ``\\n`` (one vectorised pass over an ASCII block: about 9 ms per 16 MB)."""
    if text.isascii():
        ends = np.flatnonzero(np.frombuffer(text.encode("ascii"), np.uint8) == 10)
        starts = np.concatenate([[0], ends + 1])
        lengths = np.append(ends, len(text)) - starts
        long = np.flatnonzero(lengths > max_line)
        k = int(long[0]) if long.size else None
    else:
        k = next((i for i, line in enumerate(text.split("\n")) if len(line) > max_line), None)
    if k is not None:
        raise file_error(path, first_line + k, f"longer than {max_line} characters (not {line_kind})")


#: The byte-order mark some editors (Notepad, Excel's "CSV UTF-8") put at the start of a file; read
#: as text it would become part of the first word, document name or number.
BOM = "\ufeff"


def strip_bom(text: str) -> str:
    """``text`` without a byte-order mark at its start (the first line of a file, or all of it).

    >>> strip_bom("\ufeffapple")
    'apple'
    """
    return text[1:] if text.startswith(BOM) else text


def check_targets(paths, kind: str, overwrite: bool) -> list[Path]:
    """The files a format writer is about to write, checked before anything is written: each new,
    or (only with ``overwrite=True``) an existing file, which is then replaced; never a folder, the
    same file twice, ``.`` or ``..`` (:func:`topicjax._outputs.check_file`).  Refused:
    :class:`~topicjax._outputs.OutputRefusedError` naming the file."""
    for p in map(Path, paths):
        if not overwrite and p.is_file():
            raise OutputRefusedError(f"{p} exists; pass overwrite=True to replace it (a writer never overwrites a "
                                     "file unasked)")
    out = [check_file(p, owns=lambda _: True, kind=kind) for p in paths]
    real = [os.path.realpath(p) for p in out]
    for i, r in enumerate(real):
        if r in real[:i]:
            raise OutputRefusedError(f"{out[i]} is named for two files of {kind}; give each its own name")
    return out


def open_write(path, compress: bool | None):
    """A text handle for writing ``path``; gzip when ``compress`` (or, if None, when the name ends
    in .gz).  The text goes to a hidden file beside ``path`` that replaces it only when the block
    ends without an error, so a write that fails leaves what was there.

    gzip output has a zero timestamp so that the same corpus always gives the same bytes.
    """
    path = Path(path)
    if compress is None:
        compress = path.suffix == ".gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    return _Replacing(path, compress)


class _Replacing:
    """Writes a hidden file beside ``path`` and renames it over ``path`` on success."""

    def __init__(self, path: Path, compress: bool):
        self._path = path
        self._tmp = path.with_name(f".{path.name}.writing-{os.getpid()}-{id(self):x}")
        self._raw = open(self._tmp, "xb")
        if compress:
            self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0, compresslevel=6)
            self._text = io.TextIOWrapper(self._gz, encoding="utf-8", newline="\n")
        else:
            self._gz = None
            self._text = io.TextIOWrapper(self._raw, encoding="utf-8", newline="\n")

    def __enter__(self):
        return self._text

    def __exit__(self, exc_type, *exc):
        try:
            self._text.close()  # closes the gzip stream and the file (gzip: the file stays open)
            self._raw.close()
        finally:
            if exc_type is None:
                os.replace(self._tmp, self._path)
            else:
                self._tmp.unlink(missing_ok=True)


def parse_count(tok: str) -> int:
    """A count token: a non-negative integer (``3`` or ``3.0``); anything else is ``BadValue``."""
    if not tok.isascii() or "_" in tok:
        raise BadValue(f"count {tok!r} is not a number")
    try:
        v = int(tok)
    except ValueError:
        try:
            f = float(tok)
        except ValueError:
            raise BadValue(f"count {tok!r} is not a number") from None
        if math.isnan(f):
            raise BadValue(f"count {tok!r} is NaN") from None
        if math.isinf(f):
            raise BadValue(f"count {tok!r} is not finite") from None
        if not f.is_integer():
            raise BadValue(f"count {tok!r} is not an integer") from None
        v = int(f)
    if v < 0:
        raise BadValue(f"count {tok!r} is negative")
    if v > INT32_MAX:
        raise BadValue(f"count {tok!r} does not fit in int32")
    return v


def parse_id(tok: str, what: str) -> int:
    if not INT_PATTERN.fullmatch(tok):
        raise BadValue(f"{what} {tok!r} is not an integer")
    return int(tok)


def read_vocab(path, *, encoding: str = "utf-8") -> list[str]:
    """A vocabulary file, one word per line (surrounding white space removed).

    Blank lines at the end are ignored; a blank line inside the file, or a word that appears
    twice, is an error naming the line, and so is a file without words.
    """
    lines = split_lines(read_text(path, encoding))
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise file_error(path, None, "the vocabulary file is empty (no words)")
    words: list[str] = []
    seen: dict[str, int] = {}
    for ln, line in enumerate(lines, 1):
        w = line.strip()
        if not w:
            raise file_error(path, ln, "blank line inside the vocabulary")
        if w in seen:
            raise file_error(path, ln, f"word {w!r} already appears on line {seen[w]}")
        seen[w] = ln
        words.append(w)
    return words


def vocab_arg(vocab, encoding: str = "utf-8") -> tuple[list[str] | None, str | None]:
    """``vocab`` given as a file path or a sequence of words -> (words, source for messages)."""
    if vocab is None:
        return None, None
    if isinstance(vocab, (str, os.PathLike)):
        return read_vocab(vocab, encoding=encoding), str(vocab)
    return [str(v) for v in vocab], "the given vocabulary"


def report_empty(path, doc_ids: np.ndarray, counts: np.ndarray, n_docs: int, describe) -> None:
    """Raise for the first of ``n_docs`` documents without tokens (``describe(i)`` names it) when
    ``empty_docs='error'``; O(entries), never O(n_docs)."""
    report_missing(path, np.unique(np.asarray(doc_ids)[np.asarray(counts) > 0]), n_docs, describe)


def report_missing(path, present: np.ndarray, n_docs: int, describe) -> None:
    """:func:`report_empty` given the sorted distinct documents that have tokens (``present``), as
    a reader that parses a file block by block gathers them."""
    first = first_missing(present, n_docs)
    if first is not None:
        where, what = describe(first)
        raise file_error(
            path, where,
            f"{what} has no tokens ({n_docs - present.size} empty document(s) in all); "
            "pass empty_docs='drop' to remove them",
        )


def write_vocab(words: Sequence[str], path, *, overwrite: bool = False) -> None:
    """Write ``words`` one per line to ``path`` (checked as :func:`check_targets` checks)."""
    check_targets([path], "a vocabulary file", overwrite)
    for i, w in enumerate(words):
        if not w or w != w.strip() or "\n" in w or "\r" in w:
            raise CorpusError(f"vocabulary entry {i} ({w!r}) cannot be written one word per line")
    with open_write(path, False) as fh:
        fh.write("".join(f"{w}\n" for w in words))
