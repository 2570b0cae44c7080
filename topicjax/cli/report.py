"""``topicjax report DIR``: a page about a saved model -- its parameters, what ``fit`` measured,
its topics, and charts of its scores by iteration and of the BIC by order (``select-order``).

Writes ``DIR/report.md`` (and ``DIR/report.html`` with ``--html``) with the charts as PNG files
beside it (``report_scores.png``, ``report_bic.png``).  The figures are drawn with matplotlib's
Agg canvas directly, so no global backend is changed.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from topicjax.cli.commands import ORDER_FILE, SUMMARY_FILE, _is_empty, load_model, topic_marks
from topicjax.evaluation import metrics
from topicjax.persistence import describing_file, drop_describing, load_folder, record_describing

__all__ = ["cmd_report", "score_series", "write_report", "REPORT_FILES"]

#: The files a report may write beside a model (each only when it has something to show).
REPORT_FILES = ("report.md", "report.html", "report_scores.png", "report_bic.png")

_SKIP = {"iteration", "sweep", "seconds", "pass", "batch"}
_FIRST = ("objective", "perplexity", "bic", "loglik", "n_topics")
#: The stylesheet of report.html: a plain string, not an f-string, so its braces are CSS braces.
STYLE = ("body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:collapse}"
         "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}")


def score_series(model) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Numeric series of a model's history, ``name -> (x, y)``: every number recorded per
    iteration in ``history_`` (``tau/...`` coefficients under their names), and the
    ``loglik_history_`` / ``bic_history_`` lists of the families that keep them."""
    out: dict[str, tuple[list, list]] = {}
    history = getattr(model, "history_", None) or []
    for i, rec in enumerate(history):
        if not isinstance(rec, dict):
            continue
        x = rec.get("iteration", rec.get("sweep", i + 1))
        for k, v in rec.items():
            if k in _SKIP or isinstance(v, (bool, list, dict, str)) or v is None:
                continue
            try:
                y = float(v)
            except (TypeError, ValueError):
                continue
            xs, ys = out.setdefault(k, ([], []))
            xs.append(float(x))
            ys.append(y)
    for attr, name in (("loglik_history_", "log-likelihood"), ("bic_history_", "bic")):
        values = getattr(model, attr, None)
        if values is not None and len(values) and name not in out:
            out[name] = (list(range(len(values))), [float(v) for v in values])
    series = {k: (np.asarray(x), np.asarray(y)) for k, (x, y) in out.items() if len(y)}
    # constant series (a coefficient never changed, a score that is always 0) say nothing in a chart
    series = {k: v for k, v in series.items() if not np.allclose(v[1], v[1][0], equal_nan=True) or k in _FIRST}
    ordered = sorted(series.items(), key=lambda kv: (kv[0] not in _FIRST, kv[0].startswith("tau/"), kv[0]))
    kept: dict = {}
    for k, (x, y) in ordered:  # one chart per distinct series (PTM's objective is its BIC)
        if not any(np.array_equal(x, x2) and np.array_equal(y, y2) for x2, y2 in kept.values()):
            kept[k] = (x, y)
    return kept


def _figure(n_panels: int, width=5.0, height=3.2):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = min(n_panels, 2)
    rows = -(-n_panels // cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(rows, cols, i + 1) for i in range(n_panels)]


def _scores_chart(series: dict, path: Path, max_panels: int = 8) -> list[str]:
    from matplotlib.ticker import MaxNLocator

    names = list(series)[:max_panels]
    fig, axes = _figure(len(names))
    for ax, name in zip(axes, names):
        x, y = series[name]
        ax.plot(x, y, marker="." if len(x) < 60 else None)
        ax.set_title(name)
        ax.set_xlabel("iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=90)
    return names


def _bic_chart(curve: dict, path: Path) -> None:
    from matplotlib.ticker import MaxNLocator

    fig, (ax,) = _figure(1, width=6.0, height=3.6)
    orders, bics = np.asarray(curve["orders"]), np.asarray(curve["bics"])
    ax.plot(orders, bics, marker="o")
    best = curve.get("best_order")
    if best in curve["orders"]:
        ax.plot([best], [bics[list(orders).index(best)]], marker="*", markersize=16, color="C3",
                label=f"best M = {best}")
        ax.legend()
    ax.set_xlabel("number of topics M")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"BIC ({curve.get('bic', '')})")
    ax.set_title("PTM order selection")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=90)


def _read_json(path: Path):
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*|"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;",
                                                                   "\n": " ", "\r": " "})


def _md(v) -> str:
    """``v`` as text for a Markdown table cell: the characters that end a cell or start markup
    (``|``, ``*``, backquotes, HTML) escaped, line breaks made spaces."""
    return str(v).translate(_MD_SPECIAL)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def write_report(model_dir, *, n_words: int = 10, html_page: bool = False) -> list[Path]:
    """Write the report files of the model saved in ``model_dir``; returns their paths.

    The files (:data:`REPORT_FILES`) are written beside the model and listed as describing it
    (:func:`topicjax.persistence.record_describing`): a later save that replaces the model removes
    them, a later report replaces them and removes those it no longer draws.  A file of the user's
    with one of those names is never overwritten: every target is checked before anything is
    written (:class:`~topicjax._outputs.OutputRefusedError` naming it).  Words are escaped, so a
    word holding ``|``, ``*`` or HTML cannot break the page's tables.
    """
    folder = Path(model_dir)
    model = load_model(folder)
    _, meta = load_folder(folder)
    for name in REPORT_FILES:  # every target first: nothing is written if one is refused
        if name != "report.html" or html_page:
            describing_file(folder, name, "the report")
    phi = np.asarray(model.phi_)
    name = type(model).__name__
    written: list[Path] = []
    series = score_series(model)
    scores_png = folder / "report_scores.png"
    charted = _scores_chart(series, scores_png) if series else []
    if charted:
        written.append(scores_png)
    curve = _read_json(folder / ORDER_FILE)
    bic_png = folder / "report_bic.png"
    if curve:
        _bic_chart(curve, bic_png)
        written.append(bic_png)
    summary = _read_json(folder / SUMMARY_FILE) or {}
    params = {k: v for k, v in (meta.get("params") or {}).items() if v is not None and k != "progress"}
    marks = topic_marks(model)  # background, empty and near-empty topics are marked in the table
    topics = [(f"{t} ({m})" if m else str(t), "" if _is_empty(m) else " ".join(ws))
              for t, (ws, m) in enumerate(zip(metrics.top_words(phi, model.vocab_, n_words), marks))]

    sections: list[tuple[str, str, object]] = []  # (kind, title, content)
    sections.append(("table", "Model", [("class", name), ("topics", phi.shape[1]), ("words", phi.shape[0]),
                                        ("iterations run", getattr(model, "n_iter_", "?"))]
                     + [(k, _fmt(v)) for k, v in params.items()]))
    if summary:
        sections.append(("table", "Fit", [(k, _fmt(v)) for k, v in summary.items()]))
    if curve:
        rows = [(str(m), _fmt(b) + ("  (best)" if m == curve.get("best_order") else ""))
                for m, b in zip(curve["orders"], curve["bics"])]
        sections.append(("image", "BIC by number of topics", (bic_png.name, rows)))
    if charted:
        final = [(k, _fmt(series[k][1][-1])) for k in charted]
        sections.append(("image", "Scores by iteration", (scores_png.name, final)))
    sections.append(("topics", f"Topics (top {n_words} words)", topics))

    md = [f"# {name} — {_md(folder.name)}", ""]
    for kind, title, content in sections:
        md += [f"## {title}", ""]
        if kind == "table":
            md += ["| | |", "|---|---|"] + [f"| {_md(k)} | {_md(v)} |" for k, v in content] + [""]
        elif kind == "image":
            png, rows = content
            md += [f"![{title}]({png})", "", "| | last |", "|---|---|"] + [f"| {_md(k)} | {_md(v)} |"
                                                                            for k, v in rows] + [""]
        else:
            md += ["| topic | top words |", "|---:|---|"] + [f"| {_md(t)} | {_md(ws)} |" for t, ws in content] + [""]
    md_path = folder / "report.md"
    md_path.write_text("\n".join(md), encoding="utf-8")
    written.insert(0, md_path)
    if html_page:
        e = html.escape
        body = [f"<h1>{e(name)} — {e(folder.name)}</h1>"]
        for kind, title, content in sections:
            body.append(f"<h2>{e(title)}</h2>")
            if kind == "table":
                body.append("<table>" + "".join(f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>"
                                                for k, v in content) + "</table>")
            elif kind == "image":
                png, rows = content
                body.append(f'<img src="{e(png)}" alt="{e(title)}">')
                body.append("<table>" + "".join(f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>"
                                                for k, v in rows) + "</table>")
            else:
                body.append("<table>" + "".join(f"<tr><th>{e(t)}</th><td>{e(ws)}</td></tr>"
                                                for t, ws in content) + "</table>")
        page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                f"<title>{e(name)} — {e(folder.name)}</title><style>{STYLE}</style></head><body>\n"
                + "\n".join(body) + "\n</body></html>\n")
        html_path = folder / "report.html"
        html_path.write_text(page, encoding="utf-8")
        written.insert(1, html_path)
    names = [p.name for p in written]
    drop_describing(folder, [n for n in REPORT_FILES if n not in names])  # an earlier report's, not redrawn
    record_describing(folder, names)
    return written


def cmd_report(args) -> int:
    for path in write_report(args.model_dir, n_words=args.n, html_page=args.html):
        print(f"wrote {path}")
    return 0
