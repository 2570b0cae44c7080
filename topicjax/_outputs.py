"""What a writer may overwrite: the one rule of every writer of topicjax.

A model's ``save`` (:mod:`topicjax.persistence`), the batch-store writers
(:mod:`topicjax.scale.store`, :mod:`topicjax.scale.convert`, ``topicjax convert``), the corpus
format writers (:mod:`topicjax.data.formats`) and ``topicjax report`` all follow it:

* a writer writes only into a **new** folder, an **empty** one, or one that already holds **its
  own kind of output** (a saved model, a batch store, a corpus in the same format, a report of
  the model beside it), which it replaces; anything else -- ``.``, ``..``, a file in the way, a
  folder of other files -- is refused with :class:`OutputRefusedError` before anything is
  written;
* a writer never writes into, over or around what the same command reads (:func:`check_not_input`);
* a single file is never overwritten unless it is of the writer's own kind (:func:`check_file`);
* a replacement leaves no stale file of the earlier output (each writer removes or rewrites all
  the files its kind of output consists of).

Nothing here imports the rest of topicjax, so every layer may use it.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> open(os.path.join(d, "notes.txt"), "w").close()
>>> check_folder(d, owns=lambda p: False, kind="a batch store")
Traceback (most recent call last):
...
topicjax._outputs.OutputRefusedError: ... holds notes.txt; a batch store is written only into a new folder, an empty one or one that holds a batch store: choose another folder
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Iterable

try:
    import fcntl
except ImportError:  # not POSIX: writers are not locked
    fcntl = None

__all__ = ["OutputRefusedError", "check_not_input", "check_folder", "check_file", "folder_lock", "some_names"]


class OutputRefusedError(ValueError):
    """A write refused before anything was written: its target is ``.``, a file in the way, a
    folder holding other things than the writer's own kind of output, or what the command reads.
    The message names the target and what is in it."""


def some_names(names: list[str]) -> str:
    """The first three of ``names`` and how many more (for messages)."""
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def check_not_input(out, inputs: Iterable, what: str = "the output") -> None:
    """Refuse ``out`` (a folder or file about to be written) when it is, holds or lies inside one
    of ``inputs`` (paths the same command reads; ``None`` entries skipped).  Links and ``..`` are
    resolved, so two names of one folder are one folder."""
    target = Path(out).resolve()
    for given in inputs:
        if given is None:
            continue
        source = Path(given).resolve()
        how = ("is" if target == source else "holds" if source.is_relative_to(target)
               else "is inside" if target.is_relative_to(source) else None)
        if how:
            raise OutputRefusedError(f"{what} {out} {how} the input {given}: write it to a folder of its own, outside "
                                     "what the command reads")


def check_folder(path, *, owns: Callable[[Path], bool], kind: str, ignore: Callable[[str], bool] = lambda n: False
                 ) -> Path:
    """``path`` as a :class:`~pathlib.Path` if ``kind`` (e.g. ``"a batch store"``) may be written
    there: a new folder, an empty folder (names for which ``ignore`` is true do not count: the
    writer's own hidden files of a write in progress) or a folder for which ``owns(path)`` is true.
    Otherwise an :class:`OutputRefusedError` naming the folder and some of what it holds.
    Writes nothing (callers check before long work)."""
    p = Path(path)
    if p.name in ("", ".", ".."):
        raise OutputRefusedError(f"cannot write {kind} to {str(path)!r}: it is written to a folder of its own "
                                 f"(e.g. {p / 'out'}), never into the working or a parent folder")
    if p.is_symlink() and not p.exists():
        raise OutputRefusedError(f"{p} is a broken symbolic link; write {kind} to another folder")
    if not p.exists():
        return p
    if not p.is_dir():
        raise OutputRefusedError(f"{p} exists and is not a folder: {kind} is written as a folder, and a writer never "
                                 "overwrites a file it did not write")
    if owns(p):
        return p
    with os.scandir(p) as entries:
        other = sorted(e.name for e in entries if not ignore(e.name))
    if other:
        raise OutputRefusedError(f"{p} holds {some_names(other)}; {kind} is written only into a new folder, an empty "
                                 f"one or one that holds {kind}: choose another folder")
    return p


def check_file(path, *, owns: Callable[[Path], bool], kind: str) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a file of ``kind`` may be written there: a new file,
    or an existing file for which ``owns(path)`` is true (one of the writer's own kind, which it
    replaces).  A folder in the way, ``.``, or any other existing file is an
    :class:`OutputRefusedError`.  Writes nothing."""
    p = Path(path)
    if p.name in ("", ".", ".."):
        raise OutputRefusedError(f"cannot write {kind} to {str(path)!r}: name a file")
    if p.is_dir():
        raise OutputRefusedError(f"{p} is a folder: {kind} is written as a file; name a file inside it")
    if p.is_symlink() and not p.exists():
        raise OutputRefusedError(f"{p} is a broken symbolic link; write {kind} to another file")
    if p.exists() and not owns(p):
        raise OutputRefusedError(f"{p} exists and is not {kind}: a writer never overwrites a file it did not write; "
                                 "choose another name or remove it first")
    return p


@contextlib.contextmanager
def folder_lock(lock_file: Path, what: str):
    """Hold an exclusive ``flock`` on ``lock_file`` (created if needed) for the block; another
    process holding it is an :class:`OutputRefusedError` naming ``what``.  The lock dies with its
    process, so a killed writer never blocks the next one.  Without ``fcntl`` nothing is locked."""
    if fcntl is None:
        yield
        return
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputRefusedError(f"another process is writing {what}; wait for it to finish") from None
        yield
    finally:
        os.close(fd)
