"""Saving and loading (issue 16, part 4): ``load`` checks every field of a saved folder and names
the folder and the field when one is wrong; saving is atomic (an interrupted save leaves the
previous model).  The table below is the catalogue of corrupt model folders and their messages."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import topicjax as tj
from topicjax import persistence
from topicjax.persistence import SavedModelError

import fitted_models as fm

#: the families saved, each the model shared by the estimator-wide tests (tests/fitted_models.py:
#: T = 4 topics over W = 25 words; ARTM with the regularizers decorrelate and sparse_theta)
MODELS = ("PLSA", "ARTM", "PTM", "TTMM")
MAIN_ARRAY = {"PLSA": "phi_", "ARTM": "phi_", "PTM": "beta_", "TTMM": "beta_"}


@pytest.fixture(scope="module")
def corpus():
    return fm.corpus()


@pytest.fixture(scope="module")
def saved(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    out = {}
    for name in MODELS:
        m = fm.fitted(name)
        m.save(root / name)
        out[name] = (m, root / name)
    return out


def read(folder: Path):
    with np.load(folder / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return arrays, json.loads((folder / "meta.json").read_text())


def write(folder: Path, arrays=None, meta=None):
    if arrays is not None:
        np.savez(folder / "arrays.npz", **arrays)
    if meta is not None:
        (folder / "meta.json").write_text(json.dumps(meta))


@dataclass
class Corrupt:
    id: str
    families: tuple
    change: Callable  # change(folder, family) mutates the copied folder
    message: str  # a regular expression; "{path}" is the folder, "{n}" etc. the saved model's sizes (sizes())
    error: type = SavedModelError
    loader: str = "class"  # "class": Family.load, "any": topicjax.persistence.load


def meta_edit(fn):
    def change(folder, family):
        arrays, meta = read(folder)
        fn(meta, family)
        write(folder, meta=meta)
    return change


def array_edit(fn):
    def change(folder, family):
        arrays, meta = read(folder)
        fn(arrays, family)
        write(folder, arrays=arrays)
    return change


ALL = tuple(MODELS)
EM = ("PLSA", "ARTM")


def _wrong_shape(arrays, family):
    a = arrays[MAIN_ARRAY[family]]
    arrays[MAIN_ARRAY[family]] = np.concatenate([a, a[:1]], axis=0)


def _transpose(arrays, family):
    arrays[MAIN_ARRAY[family]] = np.ascontiguousarray(arrays[MAIN_ARRAY[family]].T)


def _nan(arrays, family):
    arrays[MAIN_ARRAY[family]][0, 1] = np.nan


def _ints(arrays, family):
    arrays[MAIN_ARRAY[family]] = arrays[MAIN_ARRAY[family]].astype(np.int64)


CATALOGUE = [
    # meta.json
    Corrupt("no-vocab", ALL, meta_edit(lambda m, f: m.pop("vocab")),
            r"{path}: meta.json field 'vocab' must be a non-empty list of words, it is missing"),
    Corrupt("vocab-is-a-string", ALL, meta_edit(lambda m, f: m.update(vocab="abc")),
            r"{path}: meta.json field 'vocab' must be a non-empty list of words, it is a str"),
    Corrupt("vocab-of-numbers", ALL, meta_edit(lambda m, f: m.update(vocab=list(range(len(m["vocab"]))))),
            r"field 'vocab' must be a non-empty list of words, it is a list of non-strings"),
    Corrupt("unknown-parameter", ALL, meta_edit(lambda m, f: m["params"].update(n_topics=3)),
            r"{path}: meta.json field 'params' has unknown parameter\(s\) \['n_topics'\]"),
    Corrupt("bad-parameter-value", ALL, meta_edit(lambda m, f: m["params"].update(max_iter=-1)),
            r"{path}: meta.json field 'params': max_iter must be an integer >= 1, got -1"),
    Corrupt("params-not-an-object", ALL, meta_edit(lambda m, f: m.update(params=[1, 2])),
            r"{path}: meta.json has no 'params' object"),
    Corrupt("n_iter-of-wrong-type", ALL, meta_edit(lambda m, f: m.update(n_iter_="4")),
            r"{path}: meta.json field 'n_iter_' must be a non-negative integer, got '4'"),
    Corrupt("history-not-a-list", ("PTM", "TTMM"), meta_edit(lambda m, f: m.update(history_={"iteration": 1})),
            r"{path}: meta.json field 'history_' must be a list of records \(objects\), got \{'iteration': 1\}"),
    Corrupt("history-shorter-than-n_iter", ("PTM", "TTMM"), meta_edit(lambda m, f: m["history_"].pop()),
            r"{path}: meta.json field 'history_' has {n-1} records but n_iter_ is {n}"),
    Corrupt("scores-shorter-than-n_iter", EM, meta_edit(lambda m, f: m["scores_"].pop()),
            r"{path}: meta.json field 'scores_' has {n-1} records but n_iter_ is {n}"),
    Corrupt("required-field-missing", EM, meta_edit(lambda m, f: m.pop("topic_names_")),
            r"{path}: meta.json has no field 'topic_names_'"),
    Corrupt("topic-names-for-another-T", EM, meta_edit(lambda m, f: m["topic_names_"].pop()),
            r"{path}: meta.json field 'topic_names_' has 3 names for 4 topics"),
    Corrupt("background-outside-the-topics", EM, meta_edit(lambda m, f: m.update(background_=[7])),
            r"{path}: meta.json field 'background_' holds topics outside \[0, 4\)"),
    Corrupt("regularizers-not-records", ("ARTM",), meta_edit(lambda m, f: m.update(regularizers=["smooth_phi"])),
            r"{path}: meta.json field 'regularizers' must be a list of objects with a 'name'"),
    Corrupt("regularizer-spec-corrupt", ("ARTM",), meta_edit(lambda m, f: m["regularizers"][0].update(spec={"x": 1})),
            r"{path}: meta.json field 'regularizers' entry #0 \('decorrelate'\) cannot be rebuilt"),
    Corrupt("bic-history-of-another-length", ("PTM",), meta_edit(lambda m, f: m["bic_history_"].pop()),
            r"{path}: meta.json field 'bic_history_' has {n} values, expected n_iter_ \+ 1 = {n+1}"),
    Corrupt("bic-not-a-number", ("PTM",), meta_edit(lambda m, f: m.update(bic_=None)),
            r"{path}: meta.json field 'bic_' must be a finite number, got None"),
    Corrupt("loglik-history-of-another-length", ("TTMM",), meta_edit(lambda m, f: m["loglik_history_"].pop()),
            r"{path}: meta.json field 'loglik_history_' has {n} values, expected n_iter_ \+ 1 = {n+1}"),
    Corrupt("meta-not-an-object", ALL, lambda folder, f: (folder / "meta.json").write_text("[1, 2]"),
            r"{path}/meta.json: expected a JSON object, got a JSON list"),
    Corrupt("meta-corrupt-json", ALL, lambda folder, f: (folder / "meta.json").write_text('{"model": '),
            r"{path}/meta.json: corrupt JSON at line 1"),
    Corrupt("meta-not-utf8", ALL, lambda folder, f: (folder / "meta.json").write_bytes(b"{\xff\xfe}"),
            r"{path}/meta.json: not UTF-8 text"),
    Corrupt("newer-format", ALL, meta_edit(lambda m, f: m.update(format_version=99)),
            r"{path}/meta.json: format_version 99 is not one this topicjax reads"),
    # arrays.npz
    Corrupt("empty-npz", ALL, lambda folder, f: np.savez(folder / "arrays.npz"),
            r"{path}: arrays.npz has no array '(phi_|u_|pi_)'"),
    Corrupt("zero-byte-npz", ALL, lambda folder, f: (folder / "arrays.npz").write_bytes(b""),
            r"{path}/arrays.npz: corrupt array file, truncated or not written by save"),
    Corrupt("truncated-npz", ALL,
            lambda folder, f: (folder / "arrays.npz").write_bytes((folder / "arrays.npz").read_bytes()[:300]),
            r"{path}/arrays.npz: corrupt array file, truncated or not written by save"),
    Corrupt("array-missing", EM, array_edit(lambda a, f: a.pop("theta_")),
            r"{path}: arrays.npz has no array 'theta_'"),
    Corrupt("array-of-wrong-shape", ALL, array_edit(_wrong_shape),
            r"{path}: array '(phi_|beta_)' has shape \(\d+, \d+\), expected (W=25 x T=4|T=4 x W=25) "
            r"\(W = len\(vocab\), T = n_components\)"),
    Corrupt("array-transposed", ALL, array_edit(_transpose),
            r"{path}: array '(phi_|beta_)' has shape \((4, 25|25, 4)\), expected"),
    Corrupt("array-of-wrong-dtype", ALL, array_edit(_ints),
            r"{path}: array '(phi_|beta_)' has dtype int64, expected floats"),
    Corrupt("array-with-nan", ALL, array_edit(_nan),
            r"{path}: array '(phi_|beta_)' holds non-finite values \(first at index \(0, 1\)\)"),
    Corrupt("array-negative", ("ARTM",), array_edit(lambda a, f: a["theta_"].__setitem__((1, 2), -0.5)),
            r"{path}: array 'theta_' holds negative values \(first at index \(1, 2\)\)"),
    Corrupt("theta-and-alive-disagree", EM, array_edit(lambda a, f: a.update(doc_alive_=a["doc_alive_"][:-1])),
            r"{path}: array 'doc_alive_' has shape \({D-1},\), expected D={D}"),
    Corrupt("psi-without-classes", ("ARTM",), array_edit(lambda a, f: a.update(psi_=np.full((2, 4), 0.5, np.float32))),
            r"{path}: meta.json field 'classes_' has 0 classes but psi_ has 2 rows"),
    Corrupt("row-modality-outside", EM, array_edit(lambda a, f: a["row_modality_"].__setitem__(0, 3)),
            r"{path}: array 'row_modality_' holds modalities outside \[0, 1\)"),
    Corrupt("learned-array-of-no-regularizer", EM, array_edit(lambda a, f: a.update(learned__5__x=np.zeros(2))),
            r"{path}: array 'learned__5__x' names no saved regularizer"),
    Corrupt("switches-of-wrong-shape", ("PTM",), array_edit(lambda a, f: a.update(u_=a["u_"][:, :-1])),
            r"{path}: array 'u_' has shape \(4, 24\), expected T=4 x W=25"),
    Corrupt("shared-words-outside-the-vocabulary", ("PTM",),
            array_edit(lambda a, f: a["shared_top_"].__setitem__((0, 0), 99)),
            r"{path}: array 'shared_top_' holds word indices outside \[-1, 25\)"),
    Corrupt("themes-of-another-J", ("TTMM",),
            array_edit(lambda a, f: a.update(pi_=np.full(a["pi_"].size + 1, 1 / (a["pi_"].size + 1), np.float32))),
            r"{path}: array 'pi_' has shape \({J+1},\), expected J={J} \(J = n_themes\)"),
    # folders and classes
    Corrupt("another-class", ALL, meta_edit(lambda m, f: m.update(model="PTM" if f != "PTM" else "TTMM")),
            r"{path} holds a '(PTM|TTMM)' model, not (PLSA|ARTM|PTM|TTMM); load it with (PTM|TTMM).load or "
            r"topicjax.persistence.load"),
    Corrupt("unknown-model-name", ALL, meta_edit(lambda m, f: m.update(model="Corpus")),
            r"{path}: meta.json field 'model' is 'Corpus', not a topicjax model \(ARTM, LIDA, PLSA, PTM, TTMM\)",
            loader="any"),
    Corrupt("no-model-name", ALL, meta_edit(lambda m, f: m.pop("model")),
            r"{path}: meta.json field 'model' is None, not a topicjax model", loader="any"),
    Corrupt("not-a-model-folder", ALL, lambda folder, f: [p.unlink() for p in folder.iterdir()],
            r"{path}/meta.json is missing: {path} is not a saved model folder", FileNotFoundError, loader="any"),
    Corrupt("no-arrays", ALL, lambda folder, f: (folder / "arrays.npz").unlink(),
            r"{path}/arrays.npz is missing", FileNotFoundError),
    Corrupt("a-file-not-a-folder", ALL, lambda folder, f: (shutil.rmtree(folder), folder.write_text("x")),
            r"{path} is a file, not a saved model folder", FileNotFoundError, loader="any"),
]

CASES = [(c, f) for c in CATALOGUE for f in c.families]


def sizes(model) -> dict:
    """The saved model's sizes that the messages name: ``{n}`` iterations, ``{D}`` documents (EM
    families), ``{J}`` themes (TTMM), each also plus and minus one."""
    out = {"n": model.n_iter_}
    if getattr(model, "theta_", None) is not None:
        out["D"] = np.shape(model.theta_)[1]
    if hasattr(model, "n_themes"):
        out["J"] = model.n_themes
    return {f"{{{k}{d}}}": str(v + int(d or 0)) for k, v in out.items() for d in ("", "-1", "+1")}


@pytest.mark.parametrize("case, family", CASES, ids=[f"{c.id}-{f}" for c, f in CASES])
def test_corrupt_model_folders_are_named(saved, tmp_path, case, family):
    model, folder = saved[family]
    copy = tmp_path / family
    shutil.copytree(folder, copy)
    case.change(copy, family)
    load = persistence.load if case.loader == "any" else type(model).load
    message = case.message.replace("{path}", str(copy).replace("\\", "\\\\"))
    for key, value in sizes(model).items():
        message = message.replace(key, value)
    with pytest.raises(case.error, match=message):
        load(copy)


def test_every_field_is_checked_on_the_untouched_folder(saved, corpus):
    for name, (model, folder) in saved.items():
        back = persistence.load(folder)
        np.testing.assert_array_equal(back.components_, model.components_)
        np.testing.assert_allclose(back.transform(corpus), model.transform(corpus), rtol=1e-6, atol=1e-7)


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'nope'} does not exist$"):
        persistence.load(tmp_path / "nope")


# ----------------------------------------------------------------------------- atomic saves
def test_an_interrupted_save_leaves_the_previous_model(saved, corpus, tmp_path, monkeypatch):
    first = fm.make("PLSA").fit(corpus)
    first.save(tmp_path / "m")
    second = fm.make("PLSA", random_state=9).fit(corpus)
    assert not np.array_equal(first.phi_, second.phi_)

    def failing_savez(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(OSError, match="No space left on device"):
        second.save(tmp_path / "m")
    monkeypatch.undo()
    back = tj.PLSA.load(tmp_path / "m")
    np.testing.assert_array_equal(back.phi_, first.phi_)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temporary folder left behind


def test_leftovers_of_an_older_save_killed_between_its_renames_are_recovered(saved, corpus, tmp_path):
    """Saves of earlier topicjax versions renamed the model folder away (``.m.old-*``), then the new
    one in (``.m.saving-*``): a kill between the two renames left no ``m``.  The next load finishes
    that save when its new model is complete, else restores the previous model, and removes the rest
    (the save lock is free: no save is running).  Saves now replace the files inside the folder
    (tests/test_save_safety.py)."""
    first, _ = saved["PLSA"]
    second = fm.make("PLSA", random_state=9).fit(corpus)
    assert not np.array_equal(first.phi_, second.phi_)
    first.save(tmp_path / "a")
    second.save(tmp_path / "b")
    (tmp_path / "a").rename(tmp_path / ".m.old-k2j4h1")
    (tmp_path / "b").rename(tmp_path / ".m.saving-9x8y7z")
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "m").phi_, second.phi_)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]

    shutil.rmtree(tmp_path / "m")
    first.save(tmp_path / "a")
    (tmp_path / "a").rename(tmp_path / ".m.old-k2j4h1")
    (tmp_path / ".m.saving-9x8y7z").mkdir()  # killed while writing the new model
    (tmp_path / ".m.saving-9x8y7z" / "arrays.npz").write_bytes(b"PK\x03\x04")
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "m").phi_, first.phi_)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
