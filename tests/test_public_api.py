"""The public surface of every package is exactly the documented list (``docs/public_api.md``).

For each package the list names its public *names* (classes, functions, exceptions, constants)
and its public *modules*.  The test reads the list from the Markdown file, not from the code, so
that adding or removing a public name is a change of the documentation too:

* ``__all__`` is the documented names plus the documented modules, each once;
* ``dir(package)`` without underscore names and modules is exactly the documented names (modules
  are left out because importing any submodule anywhere makes it an attribute of its package);
* every documented module is a module of that package, every public name has its own docstring
  (constants: a ``#:`` comment above their assignment), and the kinds in the table are right;
* ``import topicjax`` imports neither the optional libraries nor the parts of the package that
  are imported on demand (command line, bridges).

The model families' part of the list is written from the family registry
(``topicjax/_families.py``) when the site is built (``docs/_hooks/generated.py``): each family's
estimator classes and package are rows of the ``topicjax`` table, and its package's section lists
its ``__all__``.  For them the checks read the registry (:func:`surface`): a family registered
there is checked here with no edit of the page, and every class it registers must be exported.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from topicjax import _families

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "public_api.md"
PACKAGE_DIR = ROOT / "topicjax"

KINDS = {"class", "exception", "warning", "function", "constant", "module"}


def documented() -> dict[str, dict[str, str]]:
    """``{package: {name: kind}}`` from the tables of ``docs/public_api.md``: a section
    ``## `topicjax.x` `` per package, then rows ``| `name` | kind | what it is |``."""
    surface: dict[str, dict[str, str]] = {}
    package = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        head = re.match(r"^## `(topicjax(?:\.\w+)*)`\s*$", line)
        if head:
            package = head.group(1)
            assert package not in surface, f"{package} is documented twice"
            surface[package] = {}
            continue
        row = re.match(r"^\|\s*`(\w+)`\s*\|\s*(\w+)\s*\|", line)
        if row and package is not None:
            name, kind = row.groups()
            assert kind in KINDS, f"{package}.{name}: unknown kind {kind!r}"
            assert name not in surface[package], f"{package}.{name} is documented twice"
            surface[package][name] = kind
    return surface


SURFACE = documented()


def _kind(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "warning" if issubclass(obj, Warning) else "exception" if issubclass(obj, BaseException) else "class"
    return "function" if callable(obj) else "constant"


def family_packages() -> list[str]:
    """The packages of the registered model families (the registry as it is now)."""
    return [f.package for f in _families.FAMILIES]


def surface(package: str) -> dict[str, str]:
    """``{name: kind}`` that ``docs/public_api.md`` lists for ``package`` once built: its written
    section, with the registry's part added -- in ``topicjax`` each family's estimator classes and
    package, and for a family's package its ``__all__``."""
    if package in family_packages():
        module = importlib.import_module(package)
        return {name: _kind(getattr(module, name)) for name in getattr(module, "__all__", ())}
    doc = dict(SURFACE[package])
    if package == "topicjax":
        for family in _families.FAMILIES:
            doc.update({m.cls: "class" for m in family.models})
            doc[family.name] = "module"
    return doc


PACKAGES = sorted(set(SURFACE) | set(family_packages()))


def test_the_list_covers_every_package():
    """Every package of topicjax (a folder with ``__init__.py``) has its section, written or from
    the registry, and no section names a package that does not exist."""
    packages = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE_DIR.rglob("__init__.py")}
    packages = {p for p in packages if "__pycache__" not in p}
    assert set(PACKAGES) == packages
    written = set(SURFACE) & set(family_packages())
    assert not written, f"{sorted(written)}: sections written in docs/public_api.md and also from the registry"


def check_family(family) -> None:
    """A registered family: its package exports every class it registers, each an estimator (the
    estimator contract itself: tests/test_estimator_contract.py), and ``topicjax`` exports the
    classes and the package."""
    import topicjax
    from topicjax.estimator import TopicModelBase

    module = importlib.import_module(family.package)
    for model in family.models:
        assert model.cls in getattr(module, "__all__", ()), f"{family.package}.__all__ lacks {model.cls}"
        cls = getattr(module, model.cls)
        assert inspect.isclass(cls) and issubclass(cls, TopicModelBase), (
            f"{family.package}.{model.cls} is registered as an estimator but is not a TopicModelBase")
        assert getattr(topicjax, model.cls) is cls and model.cls in topicjax.__all__, f"topicjax.{model.cls}"
    assert getattr(topicjax, family.name) is module and family.name in topicjax.__all__, f"topicjax.{family.name}"


def test_the_registry():
    _families.check()
    for family in _families.FAMILIES:
        check_family(family)


@pytest.mark.parametrize("package", PACKAGES)
def test_public_names_are_the_documented_list(package):
    check_names(package, surface(package))


def check_names(package: str, doc: dict[str, str]) -> None:
    """``package.__all__`` and its public attributes are the documented ``{name: kind}``."""
    module = importlib.import_module(package)
    names = {n for n, kind in doc.items() if kind != "module"}
    modules = {n for n, kind in doc.items() if kind == "module"}
    exported = list(getattr(module, "__all__", []))
    assert len(exported) == len(set(exported)), f"{package}.__all__ repeats a name"
    assert set(exported) == names | modules, (
        f"{package}.__all__ differs from docs/public_api.md: only in __all__ "
        f"{sorted(set(exported) - names - modules)}, only documented {sorted(names | modules - set(exported))}")
    public = {n for n in dir(module) if not n.startswith("_") and not inspect.ismodule(getattr(module, n))}
    assert public == names, (
        f"dir({package}) has public names other than the documented ones: undocumented "
        f"{sorted(public - names)}, missing {sorted(names - public)}")
    for name in modules:
        sub = getattr(module, name)
        assert inspect.ismodule(sub), f"{package}.{name} is documented as a module"


def _own_docstring(obj) -> str:
    """The docstring written for ``obj`` (empty where there is none): not one inherited from a
    base class, nor the signature that ``NamedTuple`` and dataclasses write for a class without
    one."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__") or ""
        fields = getattr(obj, "_fields", None) or getattr(obj, "__dataclass_fields__", None)
        if fields is not None and doc.startswith(f"{obj.__name__}("):
            return ""
        return doc.strip()
    return (getattr(obj, "__doc__", None) or "").strip()


def _constant_comment(name: str) -> bool:
    """Whether some module of the package documents constant ``name`` with a ``#:`` comment
    right above its assignment."""
    pattern = re.compile(rf"^#:.*\n(?:#:.*\n)*{re.escape(name)}\s*[:=]", re.MULTILINE)
    return any(pattern.search(p.read_text(encoding="utf-8")) for p in PACKAGE_DIR.rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_documented_and_of_its_kind(package):
    check_documented(package, surface(package))


def check_documented(package: str, doc: dict[str, str]) -> None:
    """Every name of ``doc`` (``{name: kind}``) has a docstring of its own and is of its kind."""
    module = importlib.import_module(package)
    assert (module.__doc__ or "").strip(), f"{package} has no docstring"
    for name, kind in doc.items():
        obj = getattr(module, name)
        where = f"{package}.{name}"
        if kind == "module":
            assert inspect.ismodule(obj) and (obj.__doc__ or "").strip(), f"{where}: a module with a docstring"
            continue
        if kind == "constant":
            assert not callable(obj) and not inspect.ismodule(obj), f"{where} is documented as a constant"
            assert _constant_comment(name), f"{where}: no '#:' comment above its assignment"
            continue
        if kind == "exception":
            assert inspect.isclass(obj) and issubclass(obj, Exception) and not issubclass(obj, Warning), where
        elif kind == "warning":
            assert inspect.isclass(obj) and issubclass(obj, Warning), where
        elif kind == "class":
            assert inspect.isclass(obj) and not issubclass(obj, BaseException), where
        else:
            assert callable(obj) and not inspect.isclass(obj), f"{where} is documented as a function"
        assert _own_docstring(obj), f"{where} has no docstring of its own"


def test_every_documented_row_has_a_description():
    """A row is ``| `name` | kind | what it is |`` with the last cell filled."""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if re.match(r"^\|\s*`\w+`", line):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            assert len(cells) == 3 and cells[2], f"row without a description: {line}"


# optional libraries (extras) and heavy ones only some paths need; each is imported by the
# function that uses it
OPTIONAL = ("matplotlib", "optax", "tqdm", "gensim", "pyLDAvis", "octis", "numba", "tomotopy", "artm", "torch",
            "tensorflow", "IPython", "hypothesis", "pytest")
ON_DEMAND = ("topicjax.cli", "topicjax.interop")


def test_import_topicjax_imports_nothing_it_needs_not():
    code = "import sys, topicjax; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"}).stdout.split()
    top = {m.split(".")[0] for m in out}
    assert not top & set(OPTIONAL), f"import topicjax imports {sorted(top & set(OPTIONAL))}"
    loaded = [m for m in out if m.startswith(ON_DEMAND)]
    assert not loaded, f"import topicjax imports {loaded}"

