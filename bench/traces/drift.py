"""Drift between two windows of query embeddings, and the calibration of its alarm.

Two tests, both of "the two windows come from one distribution":

- ``mmd_test``: the unbiased MMD² with an RBF kernel whose bandwidth is the median pairwise
  distance of the pooled sample (the median heuristic), p-value by a permutation test
  (``(1 + #{perm stat >= observed}) / (1 + n_perm)``, so never 0). The kernel matrix is
  computed once and every permutation is a relabelling of it. Written by hand (~30 lines of
  numpy): scipy and scikit-learn have no MMD test; hyppo's ``MMD`` recomputes per call under
  numba with its own kernel defaults; alibi-detect and torchdrift bring TensorFlow / PyTorch
  model stacks (torchdrift is unmaintained since 2021) for the same formula.
- ``classifier_test`` (C2ST): scikit-learn's logistic regression told to separate the
  windows, scored by out-of-fold AUC over stratified k folds; p-value of the AUC against
  0.5 from the Mann-Whitney U test of the out-of-fold scores (scipy).

A window smaller than ``min_window`` gets no p-value (``status = too_small``); the CLI
refuses it (exit 2) before any work.

``calibrate`` measures the alarm instead of trusting a fixed threshold (Evidently's
defaults are MMD 0.015, AUC 0.55): windows drawn from a reference pool, clean (same
distribution) and shifted by a known amount (a fraction of the current window replaced by a
category absent from the reference, or by paraphrased queries), each repeated ``n_windows``
times; it reports the detection rate at ``alpha`` per shift size and the false-alarm rate on
clean windows.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.errors import InputError


@dataclass(frozen=True)
class DriftResult:
    test: str
    n_reference: int
    n_current: int
    statistic: float | None
    p_value: float | None
    status: str  # ok | too_small
    detail: str = ""

    def drifted(self, alpha: float) -> bool:
        return self.p_value is not None and self.p_value < alpha


def _sq_dists(x: np.ndarray) -> np.ndarray:
    sq = np.einsum("ij,ij->i", x, x)
    d = sq[:, None] + sq[None, :] - 2.0 * (x @ x.T)
    np.maximum(d, 0.0, out=d)
    return d


def _mmd2_unbiased(k: np.ndarray, a: np.ndarray) -> float:
    """Unbiased MMD² of the pooled kernel ``k`` (unit diagonal) split by 0/1 labels ``a``:
    three quadratic forms of the indicator vectors, so a permutation costs two products."""
    x = (a == 0).astype(np.float64)
    y = 1.0 - x
    m, n = x.sum(), y.sum()
    kx, ky = k @ x, k @ y
    return float((x @ kx - m) / (m * (m - 1)) + (y @ ky - n) / (n * (n - 1))
                 - 2.0 * (x @ ky) / (m * n))


def mmd_test(ref: np.ndarray, cur: np.ndarray, *, n_perm: int = 500, seed: int = 0,
             min_window: int = 20) -> DriftResult:
    m, n = len(ref), len(cur)
    if min(m, n) < min_window:
        return DriftResult("mmd", m, n, None, None, "too_small",
                           f"needs >= {min_window} queries per window")
    pooled = np.vstack([ref, cur]).astype(np.float64)
    d2 = _sq_dists(pooled)
    med = float(np.median(d2[np.triu_indices(len(pooled), 1)]))
    sigma2 = med if med > 0 else 1.0
    k = np.exp(-d2 / (2.0 * sigma2))
    labels = np.r_[np.zeros(m, dtype=np.int8), np.ones(n, dtype=np.int8)]
    obs = _mmd2_unbiased(k, labels)
    rng = np.random.default_rng(seed)
    hits = sum(_mmd2_unbiased(k, rng.permutation(labels)) >= obs - 1e-12
               for _ in range(n_perm))
    return DriftResult("mmd", m, n, obs, (1 + hits) / (1 + n_perm), "ok",
                       f"rbf sigma^2 = median squared distance {sigma2:.4g}")


def classifier_test(ref: np.ndarray, cur: np.ndarray, *, folds: int = 5, seed: int = 0,
                    min_window: int = 20) -> DriftResult:
    from scipy.stats import mannwhitneyu
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    m, n = len(ref), len(cur)
    if min(m, n) < min_window:
        return DriftResult("c2st", m, n, None, None, "too_small",
                           f"needs >= {min_window} queries per window")
    x = np.vstack([ref, cur])
    y = np.r_[np.zeros(m), np.ones(n)]
    scores = np.zeros(len(y))
    for train, test in StratifiedKFold(n_splits=folds, shuffle=True,
                                       random_state=seed).split(x, y):
        clf = LogisticRegression(C=1.0, solver="liblinear", max_iter=1000)
        clf.fit(x[train], y[train])
        scores[test] = clf.decision_function(x[test])
    u = mannwhitneyu(scores[y == 1], scores[y == 0], alternative="greater")
    auc = float(u.statistic) / (m * n)
    return DriftResult("c2st", m, n, auc, float(u.pvalue), "ok",
                       f"out-of-fold AUC over {folds} folds")


# -- calibration -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationRow:
    shift: str
    size: float
    test: str
    windows: int
    alarms: int

    @property
    def rate(self) -> float:
        return self.alarms / self.windows


def calibrate(emb: np.ndarray, categories: Sequence[str], *, absent: str,
              paraphrased: np.ndarray | None = None, sizes: Sequence[float] = (0.1, 0.25, 0.5),
              window: int = 60, n_windows: int = 20, alpha: float = 0.05, n_perm: int = 200,
              seed: int = 0, tests: Sequence[str] = ("mmd", "c2st")) -> list[CalibrationRow]:
    """Alarm rates over ``n_windows`` windows of ``window`` queries each.

    ``emb``: one embedding per pool query, ``categories`` its category; the reference pool
    leaves out category ``absent``. Clean: reference and current windows drawn disjointly
    from that pool. ``absent`` shift of size f: round(f * window) of the current window are
    queries of the absent category. ``paraphrase`` shift (``paraphrased[i]`` embeds a
    paraphrase of pool query i): that many current queries replaced by their paraphrases.
    """
    cats = np.asarray(categories)
    pool = np.flatnonzero(cats != absent)
    other = np.flatnonzero(cats == absent)
    if len(pool) < 2 * window or len(other) < 1:
        raise ValueError(f"the pool holds {len(pool)} reference queries and {len(other)} of "
                         f"category {absent!r}: too few for windows of {window}")
    rng = np.random.default_rng(seed)
    run: dict[str, Callable[[np.ndarray, np.ndarray, int], DriftResult]] = {
        "mmd": lambda a, b, s: mmd_test(a, b, n_perm=n_perm, seed=s),
        "c2st": lambda a, b, s: classifier_test(a, b, seed=s)}
    out: list[CalibrationRow] = []
    plans: list[tuple[str, float]] = [("none", 0.0)]
    plans += [("absent_category", f) for f in sizes]
    if paraphrased is not None:
        plans += [("paraphrase", f) for f in sizes]
    for shift, size in plans:
        alarms = dict.fromkeys(tests, 0)
        for w in range(n_windows):
            idx = rng.permutation(pool)
            ref_i, cur_i = idx[:window], idx[window:2 * window]
            cur = emb[cur_i].copy()
            k = round(size * window)
            if shift == "absent_category" and k:
                cur[:k] = emb[rng.choice(other, size=k, replace=len(other) < k)]
            elif shift == "paraphrase" and k and paraphrased is not None:
                cur[:k] = paraphrased[cur_i[:k]]
            for t in tests:
                if run[t](emb[ref_i], cur, seed * 1000 + w).drifted(alpha):
                    alarms[t] += 1
        out += [CalibrationRow(shift, size, t, n_windows, alarms[t]) for t in tests]
    return out


def calibration_table(rows: Sequence[CalibrationRow], alpha: float) -> str:
    head = (f"| shift | size | test | windows | alarms | rate at alpha={alpha} |\n"
            "|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r.shift} | {r.size:.2f} | {r.test} | {r.windows} | {r.alarms} | {r.rate:.2f} |\n"
        for r in rows)


# -- CLI -------------------------------------------------------------------------------------
def _texts(path: Path) -> list[str]:
    """Query texts of a records.jsonl or a golden queries JSONL."""
    from bench.data.jsonl import iter_jsonl

    out = []
    for where, obj in iter_jsonl(path):
        text = obj.get("query")
        if not isinstance(text, str):
            raise where.error("no 'query' text (a records.jsonl row or a golden query row)")
        out.append(text)
    return out


def embed(texts: Sequence[str], embedder: str = "minilm") -> np.ndarray:
    """Query embeddings with one of bench's offline embedders (conf/embedder/NAME.yaml)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from bench.app import CONF_DIR

    cfg = OmegaConf.load(Path(CONF_DIR) / "embedder" / f"{embedder}.yaml")
    model = instantiate(cfg)
    out = np.zeros((len(texts), model.dim), dtype=np.float32)
    model.encode(list(texts), kind="query", out=out)
    return out


def cli(a: argparse.Namespace) -> int:
    ref, cur = _texts(a.reference), _texts(a.current)
    for path, texts in ((a.reference, ref), (a.current, cur)):
        if len(texts) < a.min_window:
            raise InputError(path, 0, f"{len(texts)} queries: the drift tests need at least "
                                      f"{a.min_window} per window (--min-window); no p-value")
    emb = embed([*ref, *cur])
    e_ref, e_cur = emb[: len(ref)], emb[len(ref):]
    results = [mmd_test(e_ref, e_cur, n_perm=a.permutations, seed=a.seed,
                        min_window=a.min_window),
               classifier_test(e_ref, e_cur, seed=a.seed, min_window=a.min_window)]
    for r in results:
        print(f"{r.test}: statistic {r.statistic:.4f}, p = {r.p_value:.4f} "
              f"({'DRIFT' if r.drifted(a.alpha) else 'no drift'} at alpha {a.alpha}; "
              f"{r.n_reference} vs {r.n_current} queries; {r.detail})")
    if a.out is not None:
        from bench.results.write import atomic_write_bytes

        atomic_write_bytes(a.out, json.dumps([asdict(r) for r in results], indent=2).encode())
    return 0
