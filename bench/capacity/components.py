"""Per-component capacity and the sizing plan composed from it.

A RAG request calls each of its components once: the embedder (one query text), the vector
database (one search), the reranker (the query and its candidate passages) and the LLM (one
prompt). Where they are separate services, each has its own capacity — its knee at its own
SLO, found with the same open-loop schedules and knee search as the whole chain
(:func:`bench.capacity.study.run_study` step 5b) — and the plan for ``T`` queries/s is one
pool of workers per component: ``ceil(T / knee)`` each. The component RATIOS are then an
output (how many LLM workers one worker of each component keeps up with) and are printed next
to NVIDIA's published ones, with what makes them comparable or not.

A :class:`Component` is what the study needs to measure one: its name (:data:`COMPONENTS`),
the request in words, a target factory and its SLO. ``capacity_study`` builds them for a
config (``bench.capacity.run.in_process.components_of``); the whole chain's knee is the
study's own (``chain``), never measured twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from bench.capacity.driver import Target
from bench.capacity.knee import Knee

#: the components a plan can hold, in request order; ``chain`` is the whole request
COMPONENTS = ("embedder", "vector_db", "reranker", "llm", "chain")

#: NVIDIA's Enterprise RAG Retrieval Scaling and Sizing Guide ("RAG Retrieval Performance
#: Results", RAG Chat 128/128): GPUs (vector DB: CPU query nodes) of each component per LLM GPU
#: as the deployment scaled from 1X to 96X
NVIDIA_RATIOS: dict[str, tuple[int, int]] = {"llm": (1, 1), "reranker": (1, 8),
                                             "embedder": (1, 50), "vector_db": (1, 16)}
NVIDIA_SOURCE = ("NVIDIA Enterprise RAG Retrieval Scaling and Sizing Guide, RAG Chat (128/128) "
                 "results: llama-3.3-nemotron-super-49b LLM NIM (1 GPU each, RTX PRO 6000 / "
                 "H200 NVL), llama-nemotron-rerank-1b-v2 1:8, llama-nemotron-embed-1b-v2 1:50, "
                 "Milvus query nodes (CPU) 1:16; VDB TopK 10, reranker TopK 4")


@dataclass(frozen=True)
class Component:
    """One component to measure: ``target()`` opens a target whose ``send(q)`` is one call of
    that component for query q."""

    name: str
    #: what one request is, in words ("POST /v1/embeddings: one query text")
    what: str
    target: Callable[[], AbstractAsyncContextManager[Target]]
    slo_ms: dict[str, float]


@dataclass(frozen=True)
class ComponentCapacity:
    name: str
    what: str
    slo_ms: dict[str, float]
    knee: Knee


@dataclass(frozen=True)
class PlanRow:
    component: str
    knee_rps: float | None
    #: the knee is a lower bound (the search reached the generator's ceiling)
    at_least: bool
    #: ceil(T / knee): workers of this component for the plan's rate
    workers: int | None
    #: reference workers one worker of this component keeps up with: knee / knee_reference
    #: (NVIDIA's "1:8" is 8)
    per_worker: float | None
    nvidia: str | None


@dataclass(frozen=True)
class ComponentPlan:
    target_rps: float
    worker_kind: str
    #: what the ratios are relative to: ``llm`` when measured, else ``chain``
    reference: str
    rows: tuple[PlanRow, ...]
    #: workers of the separate services (every row but ``chain``) and of whole-chain replicas
    split_workers: int | None
    chain_workers: int | None
    cost_per_1m_queries: float | None
    cost_per_1m_correct: float | None
    text: str
    comparability: str


def _ratio(per: float | None) -> str:
    return "-" if per is None else f"1:{per:.3g}"


def compose_plan(caps: Sequence[ComponentCapacity], *, target_rps: float, worker_kind: str,
                 price_per_hour: float | None, correct_share: float | None) -> ComponentPlan:
    """The plan for ``target_rps`` from each component's knee: ``ceil(T / knee)`` workers
    each; ratios against the LLM when measured, else the whole chain; cost per 1M queries
    (and per 1M correct answers, divided by ``correct_share``) of the separate services at
    ``price_per_hour`` per worker."""
    by = {c.name: c for c in caps}
    ref = "llm" if by.get("llm") is not None and by["llm"].knee.rate_rps else "chain"
    ref_knee = by[ref].knee.rate_rps if ref in by else None
    rows = []
    for name in COMPONENTS:
        c = by.get(name)
        if c is None:
            continue
        k = c.knee.rate_rps
        n = None if not k else math.ceil(target_rps / k)
        nv = NVIDIA_RATIOS.get(name)
        rows.append(PlanRow(name, k, c.knee.stopped_by == "ceiling", n,
                            None if not k or not ref_knee else k / ref_knee,
                            None if nv is None else f"{nv[0]}:{nv[1]}"))
    split = [r for r in rows if r.component != "chain"]
    split_n = (None if not split or any(r.workers is None for r in split)
               else sum(r.workers for r in split if r.workers is not None))
    chain_n = next((r.workers for r in rows if r.component == "chain"), None)
    cost = cost_ok = None
    if price_per_hour is not None and split_n:
        cost = price_per_hour * split_n / (target_rps * 3600.0) * 1e6
        cost_ok = cost / correct_share if correct_share else None
    slo = ", ".join(f"{c.name} {k} <= {v:g} ms" for c in caps for k, v in c.slo_ms.items())
    if split_n is not None:
        parts = " + ".join(f"{r.workers} {r.component}" for r in split)
        text = (f"{target_rps:g} queries/s at the SLOs ({slo}): {parts} = {split_n} "
                f"{worker_kind}s as separate services")
    else:
        missing = [r.component for r in split if r.workers is None] or ["every component"]
        text = (f"no split plan for {target_rps:g} queries/s: no knee for "
                f"{', '.join(missing)} at its SLO")
    if chain_n is not None:
        text += f"; {chain_n} whole-chain replicas"
    if any(r.at_least for r in rows):
        text += (" (a knee marked >= reached the generator's ceiling: its worker count is an "
                 "upper bound)")
    return ComponentPlan(target_rps, worker_kind, ref, tuple(rows), split_n, chain_n, cost,
                         cost_ok, text, comparability(ref, worker_kind))


def comparability(reference: str, worker_kind: str) -> str:
    """Why the measured ratios may not read like NVIDIA's."""
    notes = [f"NVIDIA's ratios: {NVIDIA_SOURCE}."]
    if reference != "llm":
        notes.append("This config has no LLM, so the ratios here are per whole-chain worker "
                     "(embed + search + HTTP in one process), not per LLM GPU: a different "
                     "denominator, not comparable with NVIDIA's.")
    if "gpu" not in worker_kind.lower():
        notes.append(f"Workers here are {worker_kind}s sharing one CPU box, and the models "
                     "are small CPU ones: a ratio measures these components on this machine, "
                     "not GPU services of NVIDIA's sizes.")
    return " ".join(notes)


def plan_lines(caps: Sequence[ComponentCapacity], plan: ComponentPlan) -> list[str]:
    """The report's per-component table and the composed plan."""
    ref = "LLM" if plan.reference == "llm" else "whole-chain"
    out = ["### Per-component capacity and the composed plan", "",
           f"**{plan.text}.**", "",
           f"| component | one request | SLO | knee req/s (CI) | workers for "
           f"{plan.target_rps:g} req/s | 1 worker per N {ref} workers | NVIDIA (per LLM GPU) |",
           "|---|---|---|---|---:|---:|---:|"]
    by = {c.name: c for c in caps}
    for r in plan.rows:
        c = by[r.component]
        k = c.knee
        hi = "beyond" if k.ci_high_rps is None else f"{k.ci_high_rps:.2f}"
        ci = "-" if k.ci_low_rps is None else f"{k.ci_low_rps:.2f} - {hi}"
        knee = "none" if r.knee_rps is None else (
            f"{'>= ' if r.at_least else ''}{r.knee_rps:.2f}")
        slo = ", ".join(f"{n} {v:g} ms" for n, v in c.slo_ms.items())
        out.append(f"| {r.component} | {c.what} | {slo} | {knee} ({ci}) | "
                   f"{'-' if r.workers is None else r.workers} | {_ratio(r.per_worker)} | "
                   f"{r.nvidia or '-'} |")
    out += [""]
    if plan.cost_per_1m_queries is not None:
        out += [f"Cost of the split plan ({plan.split_workers} {plan.worker_kind}s): "
                f"{plan.cost_per_1m_queries:.2f} per 1M queries, "
                + ("-" if plan.cost_per_1m_correct is None
                   else f"{plan.cost_per_1m_correct:.2f}") + " per 1M correct answers.", ""]
    out += [f"Comparability: {plan.comparability}", ""]
    return out
