"""MkDocs hook: the pages made from the code itself, the notebooks and the API reference.

* Every ``notebooks/*.ipynb`` becomes ``notebooks/<name>.md`` (:func:`notebook_markdown`)
  **without executing it** (the test suite runs the notebooks; the build must stay fast
  and must not need the corpora).  The notebooks are stored without outputs, so a page shows the
  narrative and the code.
* Every public package of :data:`PACKAGES` gets ``api/<name>.md`` holding ``::: package``;
  mkdocstrings renders the names of its ``__all__`` (``filters: public``).  mkdocstrings never
  renders a submodule inside a package page (``show_submodules: false``: a package's other
  modules are internal unless exported), so each module that a package exports by name in
  ``__all__`` (``topicjax.evaluation.metrics``, ``topicjax.scale.online``...) gets its own
  ``::: module`` section on the page of the package that owns it, and a cross-reference on the
  pages of the packages that re-export it.  The pages therefore follow whatever the packages
  export, with no list to keep in step by hand.

* ``cli.md`` is the command-line section of ``README.md`` (between its ``command line section:
  begin`` / ``end`` markers, kept there by the command line's maintainers), so the two never differ.

The notebooks and the API reference are appended to the navigation of ``mkdocs.yml``.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path

from mkdocs.structure.files import File

# (package, page stem, one line for the page) -- the public surface, in reading order.
PACKAGES = [
    ("topicjax", "topicjax", "The estimators and the names a user reaches from `import topicjax as tj`."),
    ("topicjax.artm", "artm", "ARTM and PLSA, coefficient schedules and the paper's trajectories."),
    ("topicjax.ptm", "ptm", "Parsimonious topic models, their BIC and order selection."),
    ("topicjax.ttmm", "ttmm", "The theme/topic mixture model."),
    ("topicjax.lida", "lida", "LIDA, FTM, SSTM and LDA: collapsed Gibbs samplers."),
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


def _exported_modules(package: str) -> list[tuple[str, str]]:
    """(exported name, real module name) of every module in ``package.__all__``."""
    if str(ROOT) not in sys.path:  # this checkout's package, as mkdocstrings' `paths: [.]` reads it
        sys.path.insert(0, str(ROOT))  # (here, not at import: mkdocs restores sys.path after loading a hook)
    mod = importlib.import_module(package)
    found = []
    for name in getattr(mod, "__all__", ()):
        value = getattr(mod, name, None)
        if isinstance(value, types.ModuleType) and value.__name__.startswith("topicjax"):
            found.append((name, value.__name__))
    return found


def _owner(module: str) -> str:
    """The listed package a module belongs to: the longest listed package that contains it."""
    best = "topicjax"
    for package, _, _ in PACKAGES:
        if (module == package or module.startswith(package + ".")) and len(package) > len(best):
            best = package
    return best


def api_pages() -> dict[str, str]:
    """Markdown of every API page, keyed by its path in the site."""
    listed = {p for p, _, _ in PACKAGES}
    pages = {}
    for package, stem, blurb in PACKAGES:
        parts = [f"# `{package}`", "", blurb, "", f"::: {package}", ""]
        links = []
        for name, real in _exported_modules(package):
            if real in listed:
                links.append(f"* `{package}.{name}`: the package [`{real}`][{real}]")
            elif _owner(real) == package:
                parts += [f"::: {real}", ""]
            else:
                links.append(f"* `{package}.{name}`: the module [`{real}`][{real}]")
        if links:
            parts[4:4] = ["Exported sub-packages and modules, documented on their own pages:", "", *links, ""]
        pages[f"api/{stem}.md"] = "\n".join(parts)
    return pages


def notebook_markdown(nb: dict) -> str:
    """A notebook's cells as Markdown: markdown cells as they are, code cells as ``python`` blocks
    (the notebooks are stored without outputs; written here rather than by nbconvert, whose
    templates are looked up in Jupyter's data folders, which a virtual environment may not see)."""
    parts = []
    for cell in nb.get("cells", []):
        src = "".join(cell.get("source", []))
        if not src.strip():
            continue
        parts.append(src if cell.get("cell_type") == "markdown"
                     else f"```python\n{src}\n```" if cell.get("cell_type") == "code" else "")
    return "\n\n".join(p for p in parts if p) + "\n"


def notebook_pages() -> dict[str, str]:
    """Markdown of every notebook (not executed), keyed by its path in the site."""
    pages = {}

    def reading_order(path):  # the quickstart first, then the families in the guides' order
        return (READING_ORDER.index(path.stem) if path.stem in READING_ORDER else len(READING_ORDER), path.stem)

    for path in sorted(NOTEBOOKS.glob("*.ipynb"), key=reading_order):
        body = notebook_markdown(json.loads(path.read_text(encoding="utf-8")))
        note = (f"\n\n!!! note \"Notebook\"\n    Rendered from `notebooks/{path.name}` without running it; open it in"
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
    nav.append({"API reference": [{package: f"api/{stem}.md"} for package, stem, _ in PACKAGES]})
    config["nav"] = nav
    return config


def on_files(files, config):
    for path, markdown in _PAGES.items():
        files.append(File.generated(config, path, content=markdown))
    return files
