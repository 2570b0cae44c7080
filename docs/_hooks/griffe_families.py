"""Griffe extension: ``topicjax``'s public names as the package has them, the families' included.

``topicjax/__init__.py`` builds ``__all__`` from the family registry (``topicjax/_families.py``)
and loads every public name at its first use, so griffe, which reads the source without running
it, finds neither the list nor (for a family added to the registry alone) the names.  Once griffe
has loaded ``topicjax``, this extension sets the package's exports to its ``__all__`` as imported,
and adds each registered family's package and estimator classes that the source does not import
under ``TYPE_CHECKING`` as aliases of their definitions, so the API page of ``topicjax`` renders
them (``filters: public`` keeps the exported names).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import griffe

ROOT = Path(__file__).resolve().parents[2]


class FamiliesFromRegistry(griffe.Extension):
    """Exports and family aliases of the ``topicjax`` package, from the package as imported."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        if pkg.path != "topicjax":
            return
        if str(ROOT) not in sys.path:  # this checkout's package, as mkdocstrings' `paths: [.]` reads it
            sys.path.insert(0, str(ROOT))
        topicjax = importlib.import_module("topicjax")
        registry = importlib.import_module("topicjax._families")
        for family in registry.FAMILIES:
            for name, target in ((m.cls, f"{family.package}.{m.cls}") for m in family.models):
                if name not in pkg.members:
                    pkg.set_member(name, griffe.Alias(name, target, parent=pkg))
        pkg.exports = list(topicjax.__all__)
