"""The drift alarm's calibration table on a golden query set (docs/traces.md).

Embeds every query of QUERIES (golden JSONL with categories) and a template paraphrase of
each (no paraphrase model runs offline: the rewrites change the wording, not the question)
with one of bench's offline embedders, then runs ``bench.traces.drift.calibrate``: clean
windows, a category absent from the reference injected at growing shares, paraphrases at
growing shares; prints the markdown table.

    python scripts/traces_drift_calibration.py .data/foldoc/queries.jsonl \
        --absent unanswerable --windows 20 --window 60
"""

from __future__ import annotations

import argparse
import re
import time

from bench.data.jsonl import iter_jsonl
from bench.traces.drift import calibrate, calibration_table, embed

_RULES = [
    (re.compile(r"^what does the term (.+) mean\??$", re.I), r"explain \1 to me"),
    (re.compile(r"^what is (.+?)\??$", re.I), r"could you tell me what \1 is"),
    (re.compile(r"^what are (.+?)\??$", re.I), r"could you tell me what \1 are"),
    (re.compile(r"^how (.+?)\??$", re.I), r"in what way \1"),
    (re.compile(r"^which (.+?)\??$", re.I), r"what \1"),
]


def paraphrase(text: str) -> str:
    t = text.strip()
    for pat, rep in _RULES:
        if pat.match(t):
            return pat.sub(rep, t) + ", please"
    return "I would like to know: " + t[0].lower() + t[1:]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("queries")
    p.add_argument("--absent", default="unanswerable")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--windows", type=int, default=20)
    p.add_argument("--window", type=int, default=60)
    p.add_argument("--permutations", type=int, default=200)
    p.add_argument("--alpha", type=float, default=0.05)
    a = p.parse_args()
    rows = [obj for _, obj in iter_jsonl(a.queries)]
    texts = [r["query"] for r in rows]
    cats = [r.get("category", "default") for r in rows]
    t0 = time.perf_counter()
    emb = embed(texts + [paraphrase(t) for t in texts], a.embedder)
    t1 = time.perf_counter()
    table = calibrate(emb[: len(texts)], cats, absent=a.absent, paraphrased=emb[len(texts):],
                      window=a.window, n_windows=a.windows, alpha=a.alpha,
                      n_perm=a.permutations)
    t2 = time.perf_counter()
    print(f"{len(texts)} queries, reference pool without {a.absent!r}; windows of {a.window} "
          f"vs {a.window}; {a.windows} windows per row; embedder {a.embedder} "
          f"({t1 - t0:.1f} s), calibration {t2 - t1:.1f} s")
    print(calibration_table(table, a.alpha))


if __name__ == "__main__":
    main()
