"""MkDocs hook: MathJax served with the site, so that the equations render offline.

The site's pages load ``javascripts/mathjax/tex-mml-chtml.js`` (``extra_javascript`` of
``mkdocs.yml``), never a CDN.  MathJax (3.2, Apache-2.0) is not kept in this repository: after
the build this hook copies it from the installed ``django-static-mathjax`` package (the import
name is ``mathjax``; no Django needed; part of the ``docs`` and ``test`` extras) into
``site/javascripts/mathjax/``: the combined TeX/MathML/CommonHTML component, and the folders it
loads from its own location at run time (the CommonHTML fonts, the TeX extensions that
``autoload`` fetches, the menu and the accessibility components), about 9 MB.

Raises ``RuntimeError`` naming the package to install when it is missing, rather than building a
site whose equations stay blank.
"""

from __future__ import annotations

import shutil
from pathlib import Path

#: Where the pages look for it, relative to the site's root (as in mkdocs.yml).
TARGET = "javascripts/mathjax"
ENTRY = "tex-mml-chtml.js"
# what tex-mml-chtml.js may load relative to itself: fonts (output/chtml/fonts), TeX packages
# (input/tex/extensions, by autoload), the context menu and its accessibility options
FOLDERS = ("input", "output", "ui", "a11y", "sre", "adaptors")


def mathjax_dist() -> Path:
    """The ``es5`` folder of the installed MathJax (``django-static-mathjax``)."""
    try:
        import mathjax
    except ImportError:
        raise RuntimeError("the docs serve MathJax from the django-static-mathjax package, which is not installed: "
                           "pip install -e '.[docs]' (or pip install django-static-mathjax)") from None
    es5 = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
    if not (es5 / ENTRY).is_file():
        raise RuntimeError(f"django-static-mathjax has no {ENTRY} in {es5}; reinstall it")
    return es5


def on_config(config):
    mathjax_dist()  # fail before building, not after
    return config


def on_post_build(config):
    es5 = mathjax_dist()
    out = Path(config["site_dir"]) / TARGET
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(es5 / ENTRY, out / ENTRY)
    for name in FOLDERS:
        if (es5 / name).is_dir():
            shutil.copytree(es5 / name, out / name, dirs_exist_ok=True)
    licence = es5.parent / "LICENSE"
    if licence.is_file():
        shutil.copy2(licence, out / "LICENSE")
