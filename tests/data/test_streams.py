"""The streaming line readers of ``topicjax.data.readers.common``: :func:`stream_blocks` (blocks of
whole lines, for numpy's parser) gives the same lines, line numbers and errors as the reference
:func:`stream_lines`, one line at a time, whatever the block size."""

from __future__ import annotations

import gzip
import itertools

import pytest

from topicjax.data.corpus import CorpusError
from topicjax.data.readers.common import stream_blocks, stream_lines

LINES = ["", "a", "bb b", "ccccc", "dddddd", "é", "x\ry", "\ufeffz"]


def _outcome(gen):
    try:
        return "ok", list(gen)
    except CorpusError as e:
        return "error", str(e)


def _as_lines(blocks):
    """Blocks cut back into numbered lines (each keeping its line end), as stream_lines gives them."""
    out = []
    for first, text in blocks:
        parts = text.split("\n")
        for k, part in enumerate(parts):
            if k < len(parts) - 1:
                out.append((first + k, part + "\n"))
            elif part:
                out.append((first + k, part))
    return out


@pytest.mark.parametrize("gz", [False, True])
def test_stream_blocks_agrees_with_stream_lines(tmp_path, gz):
    path = tmp_path / ("f.txt.gz" if gz else "f.txt")
    cases = 0
    for n in range(4):
        for lines in itertools.product(LINES, repeat=n):
            for end in ("", "\n"):
                text = "\ufeff" * (n == 1) + "\n".join(lines) + end
                data = text.encode("utf-8")
                path.write_bytes(gzip.compress(data) if gz else data)
                kind, lines_ref = _outcome(stream_lines(path, max_line=5, line_kind="a test line"))
                if kind == "ok":  # a file of a byte-order mark alone: one empty line, or none
                    lines_ref = [(ln, line) for ln, line in lines_ref if line]
                for block in (1, 2, 5, 64):
                    got_kind, got = _outcome(stream_blocks(path, block_chars=block, max_line=5, line_kind="a test line"))
                    assert got_kind == kind, (text, block, got)
                    assert (_as_lines(got) if kind == "ok" else got) == lines_ref, (text, block)
                cases += 1
    assert cases > 600


def test_stream_blocks_names_a_bad_byte_and_a_long_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"1 2 3\n4 5 6\n7 \xff 9\n")
    with pytest.raises(CorpusError, match=r"bad.txt, line 3: byte b'\\xff' is not valid utf-8"):
        list(stream_blocks(bad, block_chars=4))
    long = tmp_path / "long.txt"
    long.write_text("1 2 3\n" * 10 + "9" * 100 + "\n")
    with pytest.raises(CorpusError, match=r"long.txt, line 11: longer than 20 characters \(not a docword entry\)"):
        list(stream_blocks(long, block_chars=1 << 16, max_line=20, line_kind="a docword entry"))
