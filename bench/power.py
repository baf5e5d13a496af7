"""``python -m bench.power RUN_DIR``: what a paired comparison at this golden set can see.

From a pilot or baseline run's ``per_query.parquet``: per metric and scope (all queries, then
each category) the minimum detectable PAIRED effect (MDE) at the run's n, and with
``--target-effect`` the queries needed to see that effect (bench.metrics.power).

The SD of the paired deltas comes from, in order of preference:
- ``--sd X``: a stated SD of the per-query deltas (e.g. from an earlier comparison);
- ``--against ID``: the observed deltas between ``--config`` and a second config of the run;
- otherwise the per-query SD s of ``--config`` alone and an assumed correlation rho between
  the two configs' per-query values (``--correlation``, default 0.5): sd_delta =
  sqrt(2 (1 - rho)) s, equal variances assumed. rho = 0.5 gives sd_delta = s.
The level is two-sided ``alpha`` over ``--comparisons`` m configs compared with one baseline
(default: the run's configs other than the baseline, at least 1), Bonferroni ``alpha / m`` —
the conservative bound of the Holm correction the comparisons apply.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.docs import DECISIONS
from bench.metrics.cli import OneLineParser, UsageError, format_table, run_cli
from bench.metrics.pairing import paired
from bench.metrics.power import Power, assumed_delta_sd, delta_sd, mde, n_needed
from bench.results.run_dir import config_ids, load_side, valued_metrics
from bench.results.scores import ConfigScores


@dataclass(frozen=True)
class ScopePower:
    """The power of one (metric, scope); ``n_needed`` parallel to the target effects and,
    for a category, ``n_total_needed``: the whole golden set at the run's category mix that
    holds that many queries of the category."""

    metric: str
    scope: str
    n: int
    mean: float
    sd_delta: float
    mde: float | None
    #: None where the deltas' SD is 0 (see ``mde``)
    n_needed: tuple[int | None, ...]
    n_total_needed: tuple[int | None, ...]


def _sd(basis: str, a: np.ndarray, b: np.ndarray | None, *, sd: float | None,
        correlation: float) -> float:
    if basis == "stated":
        assert sd is not None
        return sd
    if b is not None:
        return delta_sd(a, b)
    return assumed_delta_sd(a, correlation=correlation)


def powers(base: ConfigScores, other: ConfigScores | None, metrics: Sequence[str], *, alpha: float,
           power: float, comparisons: int, targets: Sequence[float], sd: float | None,
           correlation: float) -> list[ScopePower]:
    """Per metric, scope ``all`` then each category (first-seen order): see the module doc.
    A scope with fewer than 2 queries is left out (no spread to estimate)."""
    basis = "stated" if sd is not None else "paired" if other is not None else "assumed"
    out: list[ScopePower] = []
    for m in metrics:
        if other is not None:
            va, vb, cats = paired(base, other, m)  # the one pairing rule
        else:
            sel = base.valued(m) if m in base.values else np.zeros(len(base.query_ids), bool)
            va, vb = np.asarray(base.values.get(m, ()), np.float64)[sel], None
            cats = np.asarray(base.categories, dtype=object)[sel]
        n_all = int(va.size)
        scopes = [("all", np.ones(n_all, bool))] + [
            (f"category:{c}", cats == c) for c in dict.fromkeys(cats.tolist())]
        for scope, mask in scopes:
            n = int(mask.sum())
            if n < 2:
                continue
            s = _sd(basis, va[mask], None if vb is None else vb[mask], sd=sd,
                    correlation=correlation)
            # no spread (every value equal, e.g. a metric at its ceiling): the pilot says
            # nothing about the variance a change would bring, so it sizes nothing
            need = tuple(None if s == 0 else
                         n_needed(s, t, alpha=alpha, power=power, comparisons=comparisons)
                         for t in targets)
            share = n / n_all
            out.append(ScopePower(
                metric=m, scope=scope, n=n, mean=float(va[mask].mean()), sd_delta=s,
                mde=mde(s, n, alpha=alpha, power=power, comparisons=comparisons),
                n_needed=need,
                n_total_needed=tuple(None if k is None else math.ceil(k / share)
                                     for k in need)))
    return out


def _basis_line(base: ConfigScores, other: ConfigScores | None, sd: float | None,
                correlation: float) -> str:
    if sd is not None:
        return f"SD of paired deltas: stated ({sd})"
    if other is not None:
        return (f"SD of paired deltas: observed, {other.config_id} - {base.config_id} on the "
                "queries both scored")
    return (f"SD of paired deltas: assumed, sqrt(2 (1 - rho)) x per-query SD of "
            f"{base.config_id}, rho = {correlation} (equal variances; pass --against ID to "
            "measure it from a second config, or --sd)")


def _parser() -> OneLineParser:
    p = OneLineParser(prog="python -m bench.power", description=__doc__.splitlines()[0],
                      epilog=DECISIONS.help_line())
    p.add_argument("run", type=Path, help="run dir holding per_query.parquet")
    p.add_argument("--config", help="config id or label (default: the run's first config, "
                                    "its comparisons' baseline)")
    p.add_argument("--against", help="a second config: measure the deltas' SD against it")
    p.add_argument("--metric", action="extend", nargs="+", default=None)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--power", type=float, default=0.8)
    p.add_argument("--comparisons", type=int, default=None,
                   help="m configs compared with the baseline (Bonferroni alpha / m); "
                        "default: the run's configs minus the baseline")
    p.add_argument("--target-effect", type=float, action="extend", nargs="+", default=[],
                   help="effects (metric units) to size the golden set for")
    p.add_argument("--correlation", type=float, default=0.5,
                   help="assumed correlation of the two configs' per-query values")
    p.add_argument("--sd", type=float, default=None, help="stated SD of the paired deltas")
    p.add_argument("--format", choices=("table", "json"), default="table")
    return p


def _check(args: argparse.Namespace) -> None:
    a = vars(args)
    if not 0 < a["alpha"] < 1:
        raise UsageError(f"--alpha must be in (0, 1), got {a['alpha']}")
    if not 0 < a["power"] < 1:
        raise UsageError(f"--power must be in (0, 1), got {a['power']}")
    if a["comparisons"] is not None and a["comparisons"] < 1:
        raise UsageError(f"--comparisons must be >= 1, got {a['comparisons']}")
    if not -1 <= a["correlation"] < 1:
        raise UsageError(f"--correlation must be in [-1, 1), got {a['correlation']}")
    if a["sd"] is not None and not (math.isfinite(a["sd"]) and a["sd"] > 0):
        raise UsageError(f"--sd must be > 0, got {a['sd']}")
    bad = [t for t in a["target_effect"] if not math.isfinite(t) or t == 0]
    if bad:
        raise UsageError(f"--target-effect must be non-zero, got {bad}")


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    _check(args)
    ids = config_ids(args.run)
    first = ids[0] if ids else None  # an empty file: load_side says it holds no rows
    base = load_side(args.run, args.config if args.config is not None else first, "--config")
    other = None if args.against is None else load_side(args.run, args.against, "--against")
    shared = valued_metrics(base)
    if other is not None:
        shared = [m for m in shared if m in set(valued_metrics(other))]
    metrics = shared
    if args.metric:
        absent = [m for m in args.metric if m not in shared]
        if absent:
            raise UsageError(f"metrics {absent} are not in {args.run}; it has {shared}")
        metrics = list(dict.fromkeys(args.metric))
    m = args.comparisons if args.comparisons is not None else max(1, len(ids) - 1)
    rows = powers(base, other, metrics, alpha=args.alpha, power=args.power, comparisons=m,
                  targets=args.target_effect, sd=args.sd, correlation=args.correlation)
    head = (f"baseline {base.config_id} · two-sided alpha {args.alpha} over m = {m} "
            f"comparisons (Bonferroni level {args.alpha / m:.4g}, conservative for Holm) · "
            f"power {args.power} · normal approximation")
    basis = _basis_line(base, other, args.sd, args.correlation)
    if args.format == "json":
        print(json.dumps({"baseline": base.config_id,
                          "against": None if other is None else other.config_id,
                          "alpha": args.alpha, "power": args.power, "comparisons": m,
                          "target_effects": args.target_effect, "basis": basis,
                          "rows": [asdict(r) for r in rows]}, indent=2))
        return 0
    header = ["metric", "scope", "n", "baseline mean", "sd_delta", "MDE"]
    for t in args.target_effect:
        header += [f"n for {t:g}", f"golden set for {t:g}"]
    table = []
    for r in rows:
        row: list[object] = [r.metric, r.scope, r.n, r.mean, r.sd_delta, r.mde]
        for need, total in zip(r.n_needed, r.n_total_needed, strict=True):
            row += [need, total]
        table.append(row)
    notes = ["MDE: the true paired mean delta detected with the stated power; n for X: "
             "queries of that scope needed to detect X; golden set for X: the whole set at "
             "this category mix that holds them. '-': the scope's values have no spread "
             "(e.g. every query at the metric's ceiling), so this run cannot size it."]
    print("\n\n".join([head, basis, format_table(header, table), *notes]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0, or 2 on any input or usage error)."""
    return run_cli(_main, argv)


__all__ = ["Power", "ScopePower", "main", "powers"]

if __name__ == "__main__":
    raise SystemExit(main())
