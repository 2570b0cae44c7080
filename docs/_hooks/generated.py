"""MkDocs hook: the pages made from the code itself, the notebooks and the API reference.

* Every ``notebooks/*.ipynb`` becomes ``notebooks/<name>.md`` (:func:`notebook_markdown`)
  **without executing it** (the test suite runs the notebooks; the build must stay fast
  and must not need the corpora): a page shows the narrative, the code and the outputs the
  notebook stores (text, and figures as embedded images).
* Every public package of :func:`packages` (the model families from the registry,
  ``topicjax/_families.py``, the others from :data:`OTHER_PACKAGES`) gets ``api/<name>.md``
  holding ``::: package``;
  mkdocstrings renders the names of its ``__all__`` (``filters: public``).  mkdocstrings never
  renders a submodule inside a package page (``show_submodules: false``: a package's other
  modules are internal unless exported), so each module that a package exports by name in
  ``__all__`` (``topicjax.evaluation.metrics``, ``topicjax.scale.online``...) gets its own
  ``::: module`` section on the page of the package that owns it, and a cross-reference on the
  pages of the packages that re-export it.  The pages therefore follow whatever the packages
  export, with no list to keep in step by hand.

* ``cli.md`` is the command-line section of ``README.md`` (between its ``command line section:
  begin`` / ``end`` markers, kept there by the command line's maintainers), so the two never differ.

* ``public_api.md`` gets the model families' part of the list of public names from the registry
  and the families' packages (:func:`public_api_markdown`): their rows in the ``topicjax``
  table and one section per family, so a family registered there is listed with no edit of the
  page (``tests/test_public_api.py`` checks the same surface).

The notebooks and the API reference are appended to the navigation of ``mkdocs.yml``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
import types
from pathlib import Path

from mkdocs.structure.files import File

# (package, page stem, one line for the page) -- the public packages other than the model families,
# in reading order (the families come after `topicjax`, from the registry).
TOP = ("topicjax", "topicjax", "The estimators and the names a user reaches from `import topicjax as tj`.")
OTHER_PACKAGES = [
    ("topicjax.tune", "tune", "Hypergradients of validation objectives and the coefficient tuner."),
    ("topicjax.regularizers", "regularizers", "The regularizer type, schedules and the pool of ARTM regularizers."),
    ("topicjax.evaluation", "evaluation", "Metrics, per-iteration scores and reference coherence."),
    ("topicjax.data", "data", "The Corpus, its readers and writers, bundled and shared datasets."),
    ("topicjax.scale", "scale", "Online fits over batch stores; one model sharded over devices and processes."),
    ("topicjax.core", "core", "The engine's public types: errors, drivers, layouts."),
    ("topicjax.interop", "interop", "Bridges to gensim, pyLDAvis and OCTIS."),
]

ROOT = Path(__file__).resolve().parents[2]
READING_ORDER = ["quickstart", "artm_regularizers", "batch_models", "ptm_order_selection", "ttmm_features", "lida_ftm",
                 "tuning"]
NOTEBOOKS = ROOT / "notebooks"


def _import(module: str) -> types.ModuleType:
    """``module`` of this checkout, as mkdocstrings' ``paths: [.]`` reads it."""
    if str(ROOT) not in sys.path:  # here, not at import: mkdocs restores sys.path after loading a hook
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(module)


def packages() -> list[tuple[str, str, str]]:
    """(package, page stem, one line) of every API page: ``topicjax``, the model families of the
    registry as it is now, then :data:`OTHER_PACKAGES`."""
    registry = _import("topicjax._families")
    return [TOP, *[(f.package, f.name, f.title) for f in registry.FAMILIES], *OTHER_PACKAGES]


def _exported_modules(package: str) -> list[tuple[str, str]]:
    """(exported name, real module name) of every module in ``package.__all__``."""
    mod = _import(package)
    found = []
    for name in getattr(mod, "__all__", ()):
        value = getattr(mod, name, None)
        if isinstance(value, types.ModuleType) and value.__name__.startswith("topicjax"):
            found.append((name, value.__name__))
    return found


def _owner(module: str, listed: list[tuple[str, str, str]]) -> str:
    """The listed package a module belongs to: the longest listed package that contains it."""
    best = "topicjax"
    for package, _, _ in listed:
        if (module == package or module.startswith(package + ".")) and len(package) > len(best):
            best = package
    return best


def api_pages() -> dict[str, str]:
    """Markdown of every API page, keyed by its path in the site."""
    listed = packages()
    names = {p for p, _, _ in listed}
    pages = {}
    for package, stem, blurb in listed:
        parts = [f"# `{package}`", "", blurb, "", f"::: {package}", ""]
        links = []
        for name, real in _exported_modules(package):
            if real in names:
                links.append(f"* `{package}.{name}`: the package [`{real}`][{real}]")
            elif _owner(real, listed) == package:
                parts += [f"::: {real}", ""]
            else:
                links.append(f"* `{package}.{name}`: the module [`{real}`][{real}]")
        if links:
            parts[4:4] = ["Exported sub-packages and modules, documented on their own pages:", "", *links, ""]
        pages[f"api/{stem}.md"] = "\n".join(parts)
    return pages


FAMILY_ROWS = "<!-- family rows: generated from topicjax/_families.py -->"
FAMILY_SECTIONS = "<!-- family sections: generated from topicjax/_families.py -->"
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`~?([^`]+)`")


def _kind(obj) -> str:
    """The kind column of ``public_api.md`` for ``obj``."""
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "warning" if issubclass(obj, Warning) else "exception" if issubclass(obj, BaseException) else "class"
    return "function" if callable(obj) else "constant"


def _summary(obj) -> str:
    """The first sentence of ``obj``'s docstring as one table cell (roles as code, ``|`` escaped)."""
    paragraph = " ".join(inspect.cleandoc(obj.__doc__ or "").split("\n\n")[0].split())
    sentence = re.split(r"(?<=\.)\s+(?=[A-Z])", paragraph, maxsplit=1)[0]  # not at "eq. 6" nor "e.g. from"
    sentence = _ROLE.sub(r"`\1`", sentence).replace("``", "`").replace("|", "\\|")
    return sentence if sentence.endswith(".") else sentence + "."


def _row(name: str, obj, about: str | None = None) -> str:
    return f"| `{name}` | {_kind(obj)} | {about or _summary(obj)} |"


def public_api_markdown(markdown: str) -> str:
    """``docs/public_api.md`` with the model families' part written in: at :data:`FAMILY_ROWS`
    (right below the ``topicjax`` table) each registered family's estimator classes and package,
    at :data:`FAMILY_SECTIONS` one section per family listing its package's ``__all__``.

    Raises:
        RuntimeError: the page lost a marker.
    """
    for marker in (FAMILY_ROWS, FAMILY_SECTIONS):
        if marker not in markdown:
            raise RuntimeError(f"docs/public_api.md lost its marker {marker!r}; docs/_hooks/generated.py writes "
                               "the model families there")
    registry = _import("topicjax._families")
    rows, sections = [], []
    for family in registry.FAMILIES:
        mod = _import(family.package)
        rows += [_row(m.cls, getattr(mod, m.cls)) for m in family.models]
        rows.append(_row(family.name, mod, family.title))
        sections += [f"## `{family.package}`", "", "| name | kind | what it is |", "| --- | --- | --- |",
                     *[_row(name, getattr(mod, name)) for name in mod.__all__], ""]
    # the rows continue the table right above the marker (a blank line would end it)
    markdown = re.sub(r"\n*" + re.escape(FAMILY_ROWS), lambda _: "\n" + "\n".join(rows), markdown)
    return markdown.replace(FAMILY_SECTIONS, "\n".join(sections).rstrip())


def notebook_markdown(nb: dict) -> str:
    """A notebook's cells as Markdown: markdown cells as they are, code cells as ``python`` blocks
    followed by their stored outputs (:func:`_outputs_markdown`: text as ``text`` blocks, figures as
    embedded PNG or SVG images).  Written here rather than by nbconvert, whose templates are
    looked up in Jupyter's data folders, which a virtual environment may not see."""
    parts = []
    for cell in nb.get("cells", []):
        src = _joined(cell.get("source", []))
        if not src.strip():
            continue
        if cell.get("cell_type") == "markdown":
            parts.append(src)
        elif cell.get("cell_type") == "code":
            parts.append(f"```python\n{src}\n```")
            parts.extend(_outputs_markdown(cell.get("outputs", [])))
    return "\n\n".join(p for p in parts if p) + "\n"


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _joined(text) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


def _text_block(text: str) -> str:
    text = _ANSI.sub("", text).rstrip("\n")
    fence = "```"
    while fence in text:  # an output that holds a fence of its own
        fence += "`"
    return f"{fence}text\n{text}\n{fence}" if text.strip() else ""


def _outputs_markdown(outputs: list) -> list[str]:
    """The Markdown of a code cell's stored outputs (nbformat 4): streams and plain-text results
    as ``text`` blocks, ``image/png`` as an embedded image, ``image/svg+xml`` inline, errors as
    their name, value and traceback; consecutive stream outputs are merged."""
    parts: list[str] = []
    stream = ""
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            stream += _joined(out.get("text", ""))
            continue
        if stream:
            parts.append(_text_block(stream))
            stream = ""
        if kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "image/png" in data:
                png = _joined(data["image/png"]).replace("\n", "")
                parts.append(f'<img class="notebook-output" alt="figure" src="data:image/png;base64,{png}">')
            elif "image/svg+xml" in data:
                parts.append(f'<div class="notebook-output">{_joined(data["image/svg+xml"])}</div>')
            elif "text/plain" in data:
                parts.append(_text_block(_joined(data["text/plain"])))
        elif kind == "error":
            trace = "\n".join(out.get("traceback", [])) or f"{out.get('ename')}: {out.get('evalue')}"
            parts.append(_text_block(trace))
    if stream:
        parts.append(_text_block(stream))
    return [p for p in parts if p]


def notebook_pages() -> dict[str, str]:
    """Markdown of every notebook (not executed), keyed by its path in the site."""
    pages = {}

    def reading_order(path):  # the quickstart first, then the families in the guides' order
        return (READING_ORDER.index(path.stem) if path.stem in READING_ORDER else len(READING_ORDER), path.stem)

    for path in sorted(NOTEBOOKS.glob("*.ipynb"), key=reading_order):
        body = notebook_markdown(json.loads(path.read_text(encoding="utf-8")))
        ran = any(c.get("outputs") for c in json.loads(path.read_text(encoding="utf-8")).get("cells", []))
        how = "with the outputs stored in it" if ran else "without running it (it stores no outputs)"
        note = (f"\n\n!!! note \"Notebook\"\n    Rendered from `notebooks/{path.name}` {how}; open it in"
                " Jupyter (from the `notebooks/` folder) to run it.\n\n")
        # Keep the notebook's own title first, then the note.
        head, _, rest = body.partition("\n")
        if head.startswith("# "):
            body = head + note + rest
        else:
            body = f"# {path.stem}" + note + body
        pages[f"notebooks/{path.stem}.md"] = body
    return pages


CLI_BEGIN = "<!-- command line section: begin"
CLI_END = "<!-- command line section: end -->"


def cli_page() -> dict[str, str]:
    """The README's command-line section as ``cli.md``."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if CLI_BEGIN not in readme or CLI_END not in readme:
        raise RuntimeError(f"README.md lost its command-line section markers ({CLI_BEGIN!r}...{CLI_END!r}); "
                           "docs/_hooks/generated.py renders that section as cli.md")
    section = readme[readme.index(CLI_BEGIN):readme.index(CLI_END)]
    section = section.split("\n", 1)[1].strip()  # drop the marker line
    if section.startswith("## "):
        section = "#" + section[2:]  # the page's title
    return {"cli.md": section + "\n"}


def _title(markdown: str) -> str:
    first = markdown.split("\n", 1)[0]
    return first[2:].strip().strip("`") if first.startswith("# ") else ""


_PAGES: dict[str, str] = {}


def on_config(config):
    _PAGES.clear()
    _PAGES.update(cli_page())
    _PAGES.update(notebook_pages())
    _PAGES.update(api_pages())
    nav = config["nav"] or []
    nav.append({"Notebooks": [{_title(md) or p: p} for p, md in _PAGES.items() if p.startswith("notebooks/")]})
    nav.append({"API reference": [{package: f"api/{stem}.md"} for package, stem, _ in packages()]})
    config["nav"] = nav
    return config


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == "public_api.md":
        return public_api_markdown(markdown)
    return markdown


def on_files(files, config):
    for path, markdown in _PAGES.items():
        files.append(File.generated(config, path, content=markdown))
    return files
