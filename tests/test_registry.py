"""A model family is registered once (issue 43, item 5).

A toy family -- its package written into a temporary folder on ``topicjax``'s package path, plus
one line added to the registry (``topicjax/_families.py``) -- is then seen, with no other edit,
by ``import topicjax``, the command line (``--model``'s choices, a fit saved and reopened), the
documentation's API pages and its list of public names (``docs/_hooks/generated.py``, called
in-process: no site build), the public-API checks (``tests/test_public_api.py``) and the
estimator contract (``tests/test_estimator_contract.py``).  The registry's own consistency
checks are tested here too.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import fitted_models
import test_estimator_contract as contract
import test_public_api as public_api
import topicjax
from topicjax import _families, persistence
from topicjax._families import Family, Model, Option

ROOT = Path(__file__).resolve().parents[1]

TOY_PACKAGE = '''"""A toy model family for tests/test_registry.py: PLSA under a name of its own."""

from topicjax.artm import PLSA as _PLSA  # private: the toy's public names are its __all__

__all__ = ["Toy"]


class Toy(_PLSA):
    """PLSA registered as a family of its own (the registry test's toy)."""
'''

#: the one registry line of the toy family
TOY = Family("topicjax.toyfam", "A toy family: PLSA under its own name.", (Model("Toy", "toy", "a toy family"),))


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy family: ``topicjax.toyfam`` written under ``tmp_path`` and its line added to the
    registry, with ``topicjax`` imported again as it would be with that line in the file.  Undone
    afterwards: the registry, ``topicjax``'s attributes, the module and its saved-class entry."""
    (tmp_path / "ext" / "toyfam").mkdir(parents=True)
    (tmp_path / "ext" / "toyfam" / "__init__.py").write_text(TOY_PACKAGE, encoding="utf-8")
    before = dict(vars(topicjax))
    monkeypatch.setattr(_families, "FAMILIES", _families.FAMILIES + (TOY,))
    try:
        importlib.reload(topicjax)  # __all__ and the lazy names, read from the registry at import
        topicjax.__path__.append(str(tmp_path / "ext"))  # the temporary folder holds a package of topicjax
        yield importlib.import_module("topicjax.toyfam")
    finally:
        vars(topicjax).clear()
        vars(topicjax).update(before)
        sys.modules.pop("topicjax.toyfam", None)
        persistence.MODEL_CLASSES.pop("Toy", None)


def _hook():
    """``docs/_hooks/generated.py`` as a module (it is not in a package)."""
    spec = importlib.util.spec_from_file_location("docs_hooks_generated", ROOT / "docs" / "_hooks" / "generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------ the registry's own checks
def test_the_registry_lists_the_five_estimators_in_the_help_order():
    assert list(_families.cli_models()) == ["plsa", "artm", "ptm", "ttmm", "lida"]
    assert [(f.name, [m.cls for m in f.models]) for f in _families.FAMILIES] == [
        ("artm", ["PLSA", "ARTM"]), ("ptm", ["PTM"]), ("ttmm", ["TTMM"]), ("lida", ["LIDA"])]


BAD_REGISTRIES = [
    ((Family("topicjax.ptm", "again", (Model("PTM2", "ptm2", "x"),)),), "family topicjax.ptm is registered twice"),
    ((Family("other.toyfam", "x", (Model("Toy", "toy", "x"),)),), "'other.toyfam' is not a package of topicjax"),
    ((Family("topicjax.toyfam", "x", ()),), "family topicjax.toyfam names no estimator class"),
    ((Family("topicjax.toyfam", "x", (Model("PTM", "toy", "x"),)),), "class 'PTM' is registered twice"),
    ((Family("topicjax.toyfam", "x", (Model("Toy", "lida", "x"),)),), "--model 'lida' is registered twice"),
    ((Family("topicjax.toyfam", "x", (Model("Toy", "toy", "x"),), (Option("--themes", "toy_themes"),)),),
     "option --themes (flag '--themes') is registered twice"),
    ((Family("topicjax.toyfam", "x", (Model("Toy", "toy", "x"),), (Option("--toy-themes", "n_themes"),)),),
     "option --toy-themes (param 'n_themes') is registered twice"),
]


@pytest.mark.parametrize("extra, message", BAD_REGISTRIES, ids=[m for _, m in BAD_REGISTRIES])
def test_a_registry_two_families_could_not_share_is_refused(extra, message):
    _families.check()  # the registry as written is consistent
    with pytest.raises(ValueError, match="topicjax/_families.py: .*" + re.escape(message)):
        _families.check(_families.FAMILIES + extra)


def test_a_common_option_cannot_be_registered_again(monkeypatch):
    from topicjax.cli import families as cli_families

    monkeypatch.setattr(_families, "FAMILIES", _families.FAMILIES + (
        Family("topicjax.toyfam", "x", (Model("Toy", "toy", "x"),), (Option("--seed", "toy_seed", int),)),))
    with pytest.raises(ValueError, match=r"option --seed \(flag '--seed'\) is registered twice"):
        cli_families.options()


# ------------------------------------------------------------------------ a toy family, seen everywhere
def test_import_topicjax_sees_the_toy_family(toy):
    assert "Toy" in topicjax.__all__ and "toyfam" in topicjax.__all__
    assert topicjax.Toy is toy.Toy and topicjax.toyfam is toy
    assert {"ARTM", "PLSA", "PTM", "TTMM", "LIDA", "Corpus"} <= set(topicjax.__all__)  # the others stay


def test_the_command_line_sees_the_toy_family(toy, tmp_path):
    from topicjax.cli import build_parser, main
    from topicjax.cli.families import model_class

    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        build_parser().parse_args(["fit", "--help"])
    text = " ".join(help_text.getvalue().split())
    assert "--model {plsa,artm,ptm,ttmm,lida,toy}" in text and "toy: a toy family" in text
    assert model_class("toy") is toy.Toy
    out = tmp_path / "toy-model"
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = main(["fit", "--model", "toy", "--docs", "40", "--topics", "3", "--iterations", "3", "--quiet",
                       "--out", str(out)])
    assert status == 0, err.getvalue()
    model = persistence.load(out)  # a saved toy reopens as a toy: persistence reads the registry too
    assert type(model) is toy.Toy and model.n_iter_ == 3 and model.phi_.shape[1] == 3


def test_the_documentation_sees_the_toy_family(toy):
    hook = _hook()
    assert ("topicjax.toyfam", "toyfam", TOY.title) in hook.packages()
    page = hook.api_pages()["api/toyfam.md"]
    assert "::: topicjax.toyfam" in page and TOY.title in page
    listed = hook.public_api_markdown((ROOT / "docs" / "public_api.md").read_text(encoding="utf-8"))
    assert "| `Toy` | class | PLSA registered as a family of its own (the registry test's toy). |" in listed
    assert f"| `toyfam` | module | {TOY.title} |" in listed
    section = listed.split("## `topicjax.toyfam`", 1)[1].split("\n## ", 1)[0]
    assert section.strip().splitlines()[2:] == [
        "| `Toy` | class | PLSA registered as a family of its own (the registry test's toy). |"]


def test_the_public_api_checks_see_the_toy_family(toy, monkeypatch):
    assert "topicjax.toyfam" in public_api.family_packages()
    doc = public_api.surface("topicjax.toyfam")
    assert doc == {"Toy": "class"}
    public_api.check_names("topicjax.toyfam", doc)
    public_api.check_documented("topicjax.toyfam", doc)
    public_api.check_family(TOY)
    top = public_api.surface("topicjax")
    assert top["Toy"] == "class" and top["toyfam"] == "module"
    public_api.check_names("topicjax", top)
    # and they can fail: an undocumented class, a public name outside __all__
    monkeypatch.setattr(toy.Toy, "__doc__", None)
    with pytest.raises(AssertionError, match="topicjax.toyfam.Toy has no docstring of its own"):
        public_api.check_documented("topicjax.toyfam", doc)
    monkeypatch.setattr(toy, "helper", lambda: None, raising=False)
    with pytest.raises(AssertionError, match=r"undocumented \['helper'\]"):
        public_api.check_names("topicjax.toyfam", public_api.surface("topicjax.toyfam"))


def test_the_estimator_contract_runs_on_the_toy_family(toy, monkeypatch, tmp_path):
    families = {name: contract.maker(name) for name in fitted_models.classes()}  # the registry as it is now
    assert list(families)[-1] == "Toy"
    monkeypatch.setattr(contract, "FAMILIES", families)
    corpus = fitted_models.corpus()  # the contract's corpus: its PLSA programs are compiled once
    fitted = {"Toy": families["Toy"](random_state=0).fit(corpus)}
    assert type(fitted["Toy"]) is toy.Toy
    for param, value, message in contract.BAD[:3]:
        contract.test_parameters_are_validated_the_same_way(corpus, "Toy", param, value, message)
    contract.test_fitted_attributes(corpus, fitted, "Toy")
    contract.test_fit_transform_is_the_training_theta(corpus, fitted, "Toy")
    contract.test_save_load_round_trip(corpus, fitted, "Toy", tmp_path)
    contract.test_fit_many_equals_separate_fits(corpus, fitted, "Toy")
    # the toy is PLSA under another name: the same seed gives PLSA's topics
    np.testing.assert_array_equal(fitted["Toy"].phi_, fitted_models.fitted("PLSA").phi_)
