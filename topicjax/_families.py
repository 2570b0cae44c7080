"""The model families of topicjax, registered once.

:data:`FAMILIES` holds one :class:`Family` per model family: its package, its estimator classes
(each with the name the command line fits it by), the command-line options only it has, and the
one line of its page in the API reference.  Everything that needs to know the families reads them
here, at the time it needs them:

* ``import topicjax`` exports each family's package and estimator classes (``tj.PTM``, ``tj.ptm``),
  loaded at their first use (``topicjax/__init__.py``);
* the command line's ``--model`` choices and its family options (:mod:`topicjax.cli.families`);
* :func:`topicjax.persistence.load`, which imports the family packages to find a saved class;
* the documentation: each family's API page and its sections of ``docs/public_api.md``
  (``docs/_hooks/generated.py``);
* the tests of the public surface and of the estimator contract (``tests/test_public_api.py``,
  ``tests/test_estimator_contract.py``).

Adding a family therefore takes its package (estimator classes deriving from
:class:`topicjax.estimator.TopicModelBase`, listed in the package's ``__all__``, every public name
with a docstring) and one line here::

    Family("topicjax.mine", "My model family, in one line.", (Model("Mine", "mine", "my model by EM"),)),

This module is plain data (named tuples) and imports nothing of topicjax, nor ``dataclasses``:
``import topicjax`` reads it (and must stay fast), and every layer -- persistence below the
families, the command line above them -- may.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["FAMILIES", "Family", "Model", "Option", "check", "cli_models", "options"]


class Model(NamedTuple):
    """One estimator class of a family.

    Args:
        cls: the class's name in its family's package (and in ``topicjax``: ``tj.<cls>``).
        cli: the name ``topicjax fit --model`` fits it by.
        about: one line for ``--model``'s help.
    """

    cls: str
    cli: str
    about: str


class Option(NamedTuple):
    """A command-line option of ``topicjax fit`` that maps to one constructor parameter.

    Args:
        flag: the option (``"--themes"``).
        param: the estimator's parameter it sets (``"n_themes"``); passed only when given, so the
            estimator's default and its validation message apply.
        type: what converts the text (``int``, ``float``), ``None`` to pass the text.
        help: the option's help; family options start with the family (``"TTMM: ..."``).
    """

    flag: str
    param: str
    type: type | None = None
    help: str = ""


class Family(NamedTuple):
    """One model family.

    Args:
        package: the package that exports the estimator classes (``"topicjax.ptm"``); its last
            part is the family's name in ``topicjax`` (``tj.ptm``) and its API page's name.
        title: one line for the top of its API page.
        models: its estimator classes, in the order ``--model``'s help lists them.
        options: the command-line options only this family has (an option several families
            share is written once, in the first of them, or among the common ones of
            :mod:`topicjax.cli.families`).
    """

    package: str
    title: str
    models: tuple[Model, ...]
    options: tuple[Option, ...] = ()

    @property
    def name(self) -> str:
        """The package's last part: ``"ptm"`` for ``topicjax.ptm``."""
        return self.package.rsplit(".", 1)[-1]


#: The registry: one line per family, in the order of the documentation and of ``--model``'s help.
FAMILIES: tuple[Family, ...] = (
    Family("topicjax.artm", "ARTM and PLSA, coefficient schedules and the paper's trajectories.",
           (Model("PLSA", "plsa", "PLSA by EM (ARTM Theorem 1)"),
            Model("ARTM", "artm", "ARTM with regularizers (--reg, --trajectory)")),
           (Option("--background", "background_topics", int, "ARTM: the last B topics are background"),
            Option("--label-weight", "label_weight", float,
                   "ARTM: weight of the class modality (labels of the corpus as classes, Theorem 3)"),
            Option("--doc-passes", "doc_passes", int, "ARTM: BigARTM's offline pass with K inner Θ iterations"))),
    Family("topicjax.ptm", "Parsimonious topic models, their BIC and order selection.",
           (Model("PTM", "ptm", "parsimonious topic model by GEM, BIC (--bic)"),),
           (Option("--bic", "bic", None, "PTM: the BIC, 2014 (eq. 26), 2014-exact, 2020 (eq. 16 with M log 2 per mixed word) or 2020-printed"),)),
    Family("topicjax.ttmm", "The theme/topic mixture model.",
           (Model("TTMM", "ttmm", "theme/topic mixture (--themes, --solver)"),),
           (Option("--themes", "n_themes", int, "TTMM: number of themes J (default 10)"),
            Option("--solver", "solver", None, "TTMM: em (default) or sgd"),
            Option("--batch-size", "batch_size", int, "TTMM: documents per SGD minibatch"))),
    Family("topicjax.lida", "LIDA, FTM, SSTM and LDA: collapsed Gibbs samplers.",
           (Model("LIDA", "lida", "LIDA/FTM/SSTM/LDA Gibbs samplers (--variant, --sampler)"),),
           (Option("--tokens-per-block", "tokens_per_block", int,
                   "LIDA: tokens per block of documents of the parallel sampler"),
            Option("--variant", "variant", None, "LIDA: lida (default), ftm, sstm or lda"),
            Option("--sampler", "sampler", None, "LIDA: the sampler, parallel (default), exact or stale"),
            Option("--burn-in", "burn_in", int, "LIDA: sweeps before posterior averaging"))),
)


def cli_models(families: tuple[Family, ...] | None = None) -> dict[str, tuple[Family, Model]]:
    """``{--model name: (family, model)}`` of ``families`` (default: :data:`FAMILIES` as it is now).

    >>> sorted(cli_models())
    ['artm', 'lida', 'plsa', 'ptm', 'ttmm']
    """
    families = FAMILIES if families is None else families
    return {m.cli: (f, m) for f in families for m in f.models}


def options(families: tuple[Family, ...] | None = None) -> tuple[Option, ...]:
    """Every family option of ``families`` (default: :data:`FAMILIES`), in registry order.

    >>> [o.flag for o in options()][:2]
    ['--background', '--label-weight']
    """
    families = FAMILIES if families is None else families
    return tuple(o for f in families for o in f.options)


def check(families: tuple[Family, ...] | None = None, *, common: tuple[str, ...] = ()) -> None:
    """Refuse a registry that two families could not share (without importing any family).

    Args:
        families: the registry to check (default: :data:`FAMILIES`).
        common: the flags the command line defines for every family (``--topics``, ...).

    Raises:
        ValueError: naming the entry: a package outside ``topicjax``, two families of one package
            or one name, a family without estimator classes, an estimator class or ``--model``
            name used twice, or a command-line flag or parameter given twice.

    >>> check(FAMILIES + (Family("topicjax.ptm", "again", (Model("PTM2", "ptm2", "x"),)),))
    Traceback (most recent call last):
    ...
    ValueError: topicjax/_families.py: family topicjax.ptm is registered twice
    """
    families = FAMILIES if families is None else families
    where = "topicjax/_families.py"
    seen: dict[str, set[str]] = {"package": set(), "name": set(), "cls": set(), "cli": set(),
                                 "flag": set(common), "param": set()}
    for f in families:
        if not f.package.startswith("topicjax.") or not f.package.replace(".", "").replace("_", "").isalnum():
            raise ValueError(f"{where}: family {f.package!r} is not a package of topicjax (topicjax.<name>)")
        for key, value in (("package", f.package), ("name", f.name)):
            if value in seen[key]:
                raise ValueError(f"{where}: family {value} is registered twice")
            seen[key].add(value)
        if not f.models:
            raise ValueError(f"{where}: family {f.package} names no estimator class (models)")
        entries = [(("cls", m.cls), ("cli", m.cli)) for m in f.models] + [(("flag", o.flag), ("param", o.param))
                                                                            for o in f.options]
        for (k1, v1), (k2, v2) in entries:
            for key, value in ((k1, v1), (k2, v2)):
                if value in seen[key]:
                    what = {"cls": f"class {value!r}", "cli": f"--model {value!r}"}.get(
                        key, f"option {v1} ({key} {value!r})")
                    extra = "; write an option that families share once" if key in ("flag", "param") else ""
                    raise ValueError(f"{where}: {f.package}: {what} is registered twice{extra}")
                seen[key].add(value)
