"""Record gensim's CoherenceModel values on gensim's own test corpus, for the parity test.

Run once, with gensim installed (comparison only, never a dependency):

    python experiments/record_gensim_coherence.py

It reads ``gensim/test/test_data/lee_background.cor`` from the installed gensim package (300 news
articles; third-party text, never copied into this repository), tokenises every line with the
plain rule below (lower-case, runs of ASCII letters: no gensim needed to repeat it), scores the
fixed topics ``TOPICS`` with ``CoherenceModel(topics=..., texts=..., dictionary=Dictionary(texts),
coherence=m, topn=10, processes=1)`` for c_v, c_npmi, c_uci and u_mass, and prints the values as
the ``GENSIM_LEE`` literal of ``tests/evaluation/test_coherence.py`` (paste it there with the
gensim and numpy versions it prints).  ``processes=1``: gensim's one-process accumulator.
"""

from __future__ import annotations

import re
from pathlib import Path

#: Hand-picked topics of 10 words each, all present in lee_background.cor: five coherent ones,
#: an incoherent mixture, one with a word ("says") in most documents, and one with words that
#: occur once (pairs never seen together exercise ε).
TOPICS = [
    "afghanistan taliban bin laden qaeda al forces afghan tora bora".split(),
    "israeli palestinian arafat sharon hamas gaza israel suicide yasser peace".split(),
    "fire bushfire sydney wales firefighters homes blaze south winds hill".split(),
    "qantas workers union industrial unions staff commission action pay company".split(),
    "test match india team cricket australia wickets runs south africa".split(),
    "economy christmas hospital metres river child court meeting foreign morning".split(),
    "government minister prime howard australian federal election labor party says".split(),
    "vacate mittagong thunderstorms karachi srinagar fire sydney homes blaze winds".split(),
]
MEASURES = ("c_v", "c_npmi", "c_uci", "u_mass")


def tokenize(line: str) -> list[str]:
    """The tokenisation shared with the test: lower-case, then runs of the letters a-z."""
    return re.findall(r"[a-z]+", line.lower())


def main() -> None:
    import gensim
    import numpy as np
    from gensim.corpora import Dictionary
    from gensim.models import CoherenceModel

    path = Path(gensim.__file__).parent / "test" / "test_data" / "lee_background.cor"
    texts = [tokenize(line) for line in path.read_text(encoding="utf-8").splitlines()]
    dictionary = Dictionary(texts)
    values = {}
    for m in MEASURES:
        cm = CoherenceModel(topics=TOPICS, texts=texts, dictionary=dictionary, coherence=m, topn=10, processes=1)
        values[m] = [float(v) for v in cm.get_coherence_per_topic()]
    print(f"# gensim {gensim.__version__}, numpy {np.__version__}; {len(texts)} documents, "
          f"{sum(map(len, texts))} tokens")
    print("GENSIM_LEE = {")
    for m in MEASURES:
        print(f"    {m!r}: [")
        for v in values[m]:
            print(f"        {v!r},")
        print("    ],")
    print("}")


if __name__ == "__main__":
    main()
