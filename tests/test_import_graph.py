"""The module graph of topicjax: no import cycle, and imports inside functions only where needed.

The graph is read from the source files with :mod:`ast` (nothing is imported): an edge ``a -> b``
for every import of topicjax module ``b`` written in module ``a``, at module level or inside a
function, class or ``try`` -- an import inside a function is a dependency all the same, only a
later one.  ``from pkg import name`` is an edge to ``pkg.name`` when that is a module of the
package, else to ``pkg`` (its ``__init__``); ``import a.b.c`` is an edge to ``a.b.c``.  Imports
under ``if TYPE_CHECKING:`` never run and are left out, and so are the parent packages that Python
initialises before a submodule (``topicjax.core`` before ``topicjax.core.layout``): a package's
``__init__`` that imports its submodules is not a cycle with them.  Compiled extensions
(``topicjax/core/_estep_ffi*.so``) are modules without imports.

In-function imports of topicjax are allowed only for what is optional or heavy to load, and at
most :data:`MAX_IN_FUNCTION` of them: a cycle must be broken by moving code to where it belongs,
not hidden by importing late.

Packages are checked as well as modules, because importing any module of a package runs the
package's ``__init__`` first (``topicjax.core.sharding`` importing ``topicjax.data.entries`` loads
all of :mod:`topicjax.data`): collapsed to its subpackages (``topicjax.data.readers.uci`` is in
``topicjax.data``; a top-level module such as ``topicjax.estimator`` is a unit of its own), the
graph has no cycle either, and :mod:`topicjax.core` is at the bottom: no module under
``topicjax/core/`` imports anything of topicjax outside it (data, regularizers, the families,
scale, tune, cli, evaluation, persistence, ...), at module level or inside a function.
"""

from __future__ import annotations

import ast
import functools
import importlib.machinery
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "topicjax"

#: The most imports of topicjax that may be written inside functions, in the whole package.
MAX_IN_FUNCTION = 10


def module_files(package: Path) -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (file, is_package)}`` of every module under ``package``: ``.py`` files and
    compiled extensions (``name.cpython-311-x86_64-linux-gnu.so`` is module ``name``)."""
    mods: dict[str, tuple[Path, bool]] = {}
    root = package.parent
    for p in sorted(package.rglob("*")):
        if "__pycache__" in p.parts or not p.is_file():
            continue
        suffix = next((s for s in importlib.machinery.EXTENSION_SUFFIXES if p.name.endswith(s)), None)
        if p.suffix == ".py":
            parts = list(p.relative_to(root).with_suffix("").parts)
        elif suffix is not None:
            parts = list(p.relative_to(root).parent.parts) + [p.name[: -len(suffix)]]
        else:
            continue
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        mods[".".join(parts)] = (p, is_package)
    return mods


def _known(name: str, mods) -> str:
    """``name`` or its longest prefix that is a module of the package."""
    while name not in mods and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    """The imports of one module: ``(line, target module, inside a function?)``."""

    def __init__(self, module: str, is_package: bool, mods, top: str):
        self.module, self.is_package, self.mods, self.top = module, is_package, mods, top
        self.depth = 0
        self.found: list[tuple[int, str, bool]] = []

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node):
        if _is_type_checking(node.test):  # never runs: only the else branch counts
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            if alias.name.split(".")[0] == self.top:
                self._add(node, _known(alias.name, self.mods))

    def visit_ImportFrom(self, node):
        if node.level:
            base = self.module.split(".")
            if not self.is_package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            full = ".".join(base + ([node.module] if node.module else []))
        else:
            full = node.module or ""
        if full.split(".")[0] != self.top:
            return
        for alias in node.names:
            sub = f"{full}.{alias.name}"
            self._add(node, sub if sub in self.mods else _known(full, self.mods))

    def _add(self, node, target: str):
        self.found.append((node.lineno, target, self.depth > 0))


def import_graph(package: Path) -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """``(edges, in_function)``: ``edges[a]`` the modules of the package that ``a`` imports, and
    ``(module, line, target)`` of every import of the package written inside a function."""
    mods = module_files(package)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    in_function: list[tuple[str, int, str]] = []
    for name, (path, is_package) in mods.items():
        if path.suffix != ".py":
            continue
        visitor = _Imports(name, is_package, mods, package.name)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for line, target, inside in visitor.found:
            if target != name:
                edges[name].add(target)
            if inside:
                in_function.append((name, line, target))
    return edges, in_function


def package_of(module: str) -> str:
    """The unit of ``module`` in the package graph: ``topicjax.<sub>`` (its subpackage, or the
    top-level module itself), ``topicjax`` for the root package."""
    return ".".join(module.split(".")[:2])


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to :func:`package_of` units (edges inside a unit dropped)."""
    out: dict[str, set[str]] = {}
    for a, targets in edges.items():
        pa = package_of(a)
        out.setdefault(pa, set())
        out[pa] |= {package_of(b) for b in targets if package_of(b) != pa}
    return out


def imports_leaving(package: Path, inside: str) -> list[tuple[str, int, str]]:
    """``(module, line, target)`` of every import of topicjax, at module level or inside a
    function, written in a module of ``inside`` (a dotted package name) whose target is outside it."""
    mods = module_files(package)
    out = []
    for name, (path, is_package) in mods.items():
        if path.suffix != ".py" or not (name == inside or name.startswith(inside + ".")):
            continue
        visitor = _Imports(name, is_package, mods, package.name)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        out += [(name, line, target) for line, target, _ in visitor.found
                if not (target == inside or target.startswith(inside + "."))]
    return out


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as its path ``[a, b, ..., a]``, or None when there is none
    (iterative depth-first search: white / on the stack / done)."""
    state: dict[str, int] = {}
    for start in sorted(edges):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(edges.get(start, ()))))]
        path = [start]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(sorted(edges.get(nxt, ())))))
                path.append(nxt)
    return None


# --------------------------------------------------------------------------------------- the tests
@functools.lru_cache(maxsize=1)
def _topicjax_graph() -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """:func:`import_graph` of topicjax, read once for the tests below (they only read it)."""
    return import_graph(PACKAGE)


def test_topicjax_has_no_import_cycle():
    edges, _ = _topicjax_graph()
    assert len(edges) > 50  # the package was found and read
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_packages_have_no_import_cycle():
    edges, _ = _topicjax_graph()
    packages = package_graph(edges)
    assert {"topicjax.core", "topicjax.data", "topicjax.regularizers", "topicjax.artm"} <= set(packages)
    cycle = find_cycle(packages)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


def test_core_imports_nothing_above_it():
    leaving = imports_leaving(PACKAGE, "topicjax.core")
    listing = "\n".join(f"  {m}:{line} imports {t}" for m, line, t in leaving)
    assert not leaving, f"topicjax.core is the bottom layer, yet it imports from above it:\n{listing}"


def test_few_imports_inside_functions():
    _, in_function = _topicjax_graph()
    listing = "\n".join(f"  {m}:{line} imports {t}" for m, line, t in in_function)
    assert len(in_function) <= MAX_IN_FUNCTION, (
        f"{len(in_function)} imports of topicjax inside functions (at most {MAX_IN_FUNCTION}, each for an optional "
        f"or heavy dependency; move the code that a late import works around):\n{listing}")


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "topicjax"


@pytest.mark.parametrize("files, cycle", [
    # a cycle written at module level
    ({"topicjax/__init__.py": "", "topicjax/a.py": "from topicjax import b\n",
      "topicjax/b.py": "from topicjax.a import f\n"}, ["topicjax.a", "topicjax.b", "topicjax.a"]),
    # the same cycle hidden inside a function, through a relative import and a package __init__
    ({"topicjax/__init__.py": "", "topicjax/p/__init__.py": "from .c import g\n",
      "topicjax/p/c.py": "def g():\n    from topicjax.a import f\n",
      "topicjax/a.py": "import topicjax.p\n"}, ["topicjax.a", "topicjax.p", "topicjax.p.c", "topicjax.a"]),
], ids=["module-level", "in-function"])
def test_a_cycle_is_found_and_named(tmp_path, files, cycle):
    edges, _ = import_graph(_write(tmp_path, files))
    assert find_cycle(edges) == cycle


def test_what_is_not_a_cycle(tmp_path):
    """A package importing its submodules, imports for type checking only, other packages."""
    edges, in_function = import_graph(_write(tmp_path, {
        "topicjax/__init__.py": "from topicjax import a\nfrom topicjax.a import f\n",
        "topicjax/a.py": ("from typing import TYPE_CHECKING\nimport numpy\nif TYPE_CHECKING:\n"
                          "    from topicjax.b import B\nelse:\n    B = None\ndef f():\n    import json\n"),
        "topicjax/b.py": "from topicjax.a import f\n",
    }))
    assert find_cycle(edges) is None
    assert edges["topicjax.a"] == set() and edges["topicjax"] == {"topicjax.a"} and in_function == []


def test_an_upward_import_of_core_is_found(tmp_path):
    """Core importing a package above it, at module level or inside a function, directly or
    through a relative import, is found and named; imports within core are not; and the package
    graph sees the loop that the module graph does not (core.a -> data.b -> core.c)."""
    root = _write(tmp_path, {
        "topicjax/__init__.py": "", "topicjax/core/__init__.py": "from topicjax.core import c\n",
        "topicjax/core/a.py": "from topicjax.core import c\nfrom topicjax.data.b import g\n",
        "topicjax/core/c.py": "def f():\n    from ..regularizers import r\n",
        "topicjax/core/d.py": "from . import c\n",
        "topicjax/data/__init__.py": "", "topicjax/data/b.py": "from topicjax.core.c import f\ndef g():\n    pass\n",
        "topicjax/regularizers/__init__.py": "", "topicjax/regularizers/r.py": "",
    })
    assert imports_leaving(root, "topicjax.core") == [("topicjax.core.a", 2, "topicjax.data.b"),
                                                      ("topicjax.core.c", 2, "topicjax.regularizers.r")]
    edges, _ = import_graph(root)
    assert find_cycle(edges) is None
    assert find_cycle(package_graph(edges)) == ["topicjax.core", "topicjax.data", "topicjax.core"]
