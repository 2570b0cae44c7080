"""Griffe extension: render topicjax's docstrings, written in a light reST, as Markdown.

The package's docstrings are plain prose with reST habits: ``>>>`` examples, ``::`` literal
blocks, ``:class:`X``` roles, underlined titles and numpy-like ``Parameters`` sections whose
items read ``name: description``.  None of the docstring parsers of mkdocstrings reads them
without warnings (the numpy parser takes every ``Word:`` line of a section for a parameter), so
the site renders them as Markdown (``docstring_style: null``) after this rewrite:

* doctest examples and literal blocks become fenced code blocks (otherwise Markdown reads a
  doctest output such as ``[4, 5, 6]`` after ``[...]`` as a reference link, which strict mode
  rejects);
* a role becomes inline code of its target (``~`` keeps the last component, as in Sphinx);
* an underlined title becomes a bold line (a Markdown heading inside a docstring would enter
  the page's table of contents at the wrong level);
* the items of a ``Parameters`` / ``Attributes`` / ``Returns`` section become a list.

The docstrings themselves are not changed; only what griffe hands to mkdocstrings.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|ref|const|term):`(~?)([^`]+)`(\\ )?")
UNDERLINE = re.compile(r"^\s*([-=~^])\1{2,}\s*$")
ITEM = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*:\s*(.*)$")
SECTIONS = {"Parameters", "Attributes", "Returns", "Raises", "Yields", "Other Parameters"}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _role(match: re.Match) -> str:
    tilde, target = match.group(1), match.group(2)
    if "<" in target and target.endswith(">"):  # :ref:`text <label>`
        target = target[: target.index("<")].strip()
    shown = target.rsplit(".", 1)[-1] if tilde else target
    return f"`{shown}`"


def _inline(line: str) -> str:
    return ROLE.sub(_role, line)


def to_markdown(text: str) -> str:
    """Rewrite one cleaned docstring (``inspect.cleandoc`` form) as Markdown."""
    lines = text.split("\n")
    out: list[str] = []
    i, n = 0, len(lines)
    in_section = False
    in_fence = False
    while i < n:
        line = lines[i]
        stripped = line.strip()
        # Fenced blocks already in Markdown pass through untouched.
        if stripped.startswith("```"):
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        if in_fence:
            out.append(line)
            i += 1
            continue
        # Doctest: from '>>>' to the next blank line.
        if stripped.startswith(">>>"):
            pad = " " * _indent(line)
            block = []
            while i < n and lines[i].strip():
                block.append(lines[i][len(pad):] if lines[i].startswith(pad) else lines[i].strip())
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += [pad + "```pycon", *(pad + b for b in block), pad + "```", ""]
            continue
        # Underlined title.
        if stripped and i + 1 < n and UNDERLINE.match(lines[i + 1]) and len(lines[i + 1].strip()) >= len(stripped) - 1:
            in_section = stripped in SECTIONS
            out += [f"**{_inline(stripped)}**", ""]
            i += 2
            continue
        # A reST literal block: 'text::', a blank line, an indented block.
        if stripped.endswith("::") and not stripped.startswith(".."):
            base = _indent(line)
            text_part = stripped[:-2].rstrip()
            content_pad = base + (2 if re.match(r"[*-] ", stripped) else 0)
            if text_part:
                out.append(" " * base + _inline(text_part) + ":")
            j = i + 1
            while j < n and not lines[j].strip():
                j += 1
            block_end = j  # the block: lines indented deeper than the text that introduced it
            while block_end < n and (not lines[block_end].strip() or _indent(lines[block_end]) > content_pad):
                block_end += 1
            while block_end > j and not lines[block_end - 1].strip():
                block_end -= 1
            if block_end > j:
                cut = min(_indent(l) for l in lines[j:block_end] if l.strip())
                pad = " " * content_pad
                out += ["", pad + "```text", *((pad + l[cut:]) if l.strip() else "" for l in lines[j:block_end]),
                        pad + "```", ""]
                i = block_end
            else:
                i += 1
            continue
        # Items of a Parameters-like section.
        if in_section:
            if not stripped:
                out.append(line)
                i += 1
                continue
            m = ITEM.match(line) if _indent(line) == 0 else None
            if m:
                names = ", ".join(f"`{name.strip()}`" for name in m.group(1).split(","))
                rest = _inline(m.group(2))
                out.append(f"- {names}: {rest}" if rest else f"- {names}")
                i += 1
                continue
            if _indent(line) == 0:
                in_section = False
            else:
                out.append("    " + _inline(stripped))
                i += 1
                continue
        out.append(_inline(line))
        i += 1
    return "\n".join(out)


class DocstringsToMarkdown(griffe.Extension):
    """Rewrite every docstring of the loaded packages once, after loading."""

    def __init__(self) -> None:
        self._done: set[int] = set()

    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        self._convert(obj)

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        # The top-level package itself is not an 'object' event.
        self._convert(pkg)

    def _convert(self, obj: griffe.Object) -> None:
        doc = obj.docstring
        if doc is None or id(doc) in self._done:
            return
        self._done.add(id(doc))
        doc.value = to_markdown(doc.value)
