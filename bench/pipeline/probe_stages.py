"""Probes before paying: each costly stage measured on a seeded sample BEFORE its node runs.

With a ``StageBudget`` (``conf/budget/stages.yaml``), ``probe_stages`` runs after chunking and
before any corpus embedding, index build, reranking or generation:

=============  ==============================================  ============================
kind           measured on the sample                          prunes (with every config
                                                               built on it)
=============  ==============================================  ============================
embed_docs     ``probe_chunks`` seeded chunks encoded in       the corpus embeddings node
               length-sorted batches, after a warm-up batch;
               seconds per token x the corpus's tokens
embed_query    single-query encodes of the probe queries       the query embeddings node
index          sample indexes built from the probe's vectors   the index node
               at 1/4, 1/2 and all of the sample; power-law
               fit extrapolated to the corpus
rerank         ``depth`` sampled passages scored per probe     each reranked config at that
               query, per swept depth                          depth
generate       ``probe_requests`` real requests, prompts by    every generated config
               the run's context builder from sampled chunks
=============  ==============================================  ============================

A kind is probed only when a ceiling reads it (or ``validate`` is on) and its node is not
cached already (a cached node costs nothing). The RAW measurements are cached in the artifact
store like any artifact (stages ``probe_*``, keyed by the node's options and inputs and the
sample), so a second run, or another job of a multirun over the same chunks and embedder,
loads them instead of probing again; the estimates are recomputed from them with the
budget's confidence. A probe that fails (an index that cannot be built on a small sample, a
generator that errors) is recorded with its reason and prunes nothing.

``report`` writes ``budget_probes.json``: per probe its estimates with bounds, the ceilings
checked, what it pruned, its own cost; the work pruning saved (the probes' predictions of the
pruned nodes) against the probes' cost; with ``validate=true`` (every config run fully)
predicted vs measured per estimate, whether the bounds held, and the pruned configs that
would have passed (the answer that must be 0).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.budget.stages import (
    EMBED_CEILINGS,
    GEN_CEILINGS,
    INDEX_CEILINGS,
    Estimate,
    StageBudget,
    StageCheck,
    power_fit,
    ratio_estimate,
    sample_estimate,
)
from bench.config.build import OptionError
from bench.data.base import Dataset
from bench.errors import ConfigError
from bench.pipeline.executor import Executor
from bench.pipeline.lanes import ConfigKind, ConfigSpec
from bench.pipeline.node import Node
from bench.pipeline.probe import ProbeOutcome, chain_validation_rows
from bench.rerank.base import IndexedReranker

if TYPE_CHECKING:
    from bench.chunking.base import ChunkTable
    from bench.pipeline.components import Components
    from bench.pipeline.latency import Request
    from bench.pipeline.plan import Plan
    from bench.scaling.planner import Stated

log = logging.getLogger("bench")

PROBES_FILE = "budget_probes.json"
_VERSION = "1"


@dataclass(frozen=True)
class StageProbe:
    """One probe: what it predicts, the ceilings it was checked against, what it pruned."""

    kind: str  # embed_docs | embed_query | index | rerank | generate
    label: str
    #: the node keys a breach prunes (every config whose chain holds one is pruned)
    node_keys: tuple[str, ...]
    estimates: tuple[Estimate, ...] = ()
    checks: tuple[StageCheck, ...] = ()
    #: ok | failed: <why>
    status: str = "ok"
    #: seconds this run spent probing (0 when the measurements came from the cache)
    probe_s: float = 0.0
    cached: bool = False
    #: the rerank depth (rerank probes)
    depth: int | None = None
    #: the embedding probe's work in chunks: the corpus's, and the probe's own (its sample
    #: and the warm-up batch), for the work saved at a stated machine's rate
    corpus_chunks: int | None = None
    probe_chunks: int | None = None

    @property
    def over(self) -> StageCheck | None:
        return next((c for c in self.checks if c.over), None)

    def estimate(self, name: str) -> Estimate | None:
        return next((e for e in self.estimates if e.name == name), None)


@dataclass(frozen=True)
class StageProbeOutcome:
    probes: tuple[StageProbe, ...] = ()
    #: pruned node key -> reason
    pruned: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    validate: bool = False
    #: the budget's ``stated`` machine figures (``StageBudget.stated_figures``)
    stated: Stated | None = None


# ---------------------------------------------------------------- checks before any work


def _generated(the_plan: Plan) -> list[ConfigSpec]:
    return [c for c in the_plan.configs if c.kind is ConfigKind.GENERATED and c.answers]


def _uses(the_plan: Plan, node: Node | None) -> bool:
    return node is not None and any(node.key in {n.key for n in c.chain}
                                    for c in the_plan.configs)


def check_stage_budget(budget: object, the_plan: Plan) -> None:
    """A ceiling on a stage no config of this run has is a config error (it could never
    fire): generator ceilings without a generated config, embedding or index ceilings
    without a config that searches the vector index."""
    if not isinstance(budget, StageBudget):
        return
    groups: tuple[tuple[tuple[str, ...], bool, str], ...] = (
        (GEN_CEILINGS, bool(_generated(the_plan)),
         "no config of this run generates (set a generator and a context)"),
        (EMBED_CEILINGS, _uses(the_plan, the_plan.embed_docs),
         "no config of this run embeds the corpus"),
        (INDEX_CEILINGS, _uses(the_plan, the_plan.index),
         "no config of this run searches a vector index"),
    )
    for keys, present, why in groups:
        for key in budget.set_ceilings(keys):
            if not present:
                raise ConfigError(f"budget.{key}", why)


def _to_pay(budget: StageBudget, node: Node, is_cached: Callable[[Node], bool]) -> bool:
    """Whether a node's probe ceilings apply: the run computes it (a cached node costs
    nothing and is never pruned), or ``validate`` checks every ceiling anyway."""
    return budget.validate or not is_cached(node)


def stage_prunes(budget: object, the_plan: Plan,
                 is_cached: Callable[[Node], bool] = lambda n: False) -> list[tuple[Node, str]]:
    """(node, ``budget.<key>``) for every ceiling of a ``StageBudget`` that the stage probes
    check before the node runs (the plan preview shows them). A corpus pass or index the
    store has already costs nothing: its ceilings are not checked (but with ``validate``)."""
    if not isinstance(budget, StageBudget):
        return []
    out = []
    for node, keys in ((the_plan.embed_docs, EMBED_CEILINGS), (the_plan.index, INDEX_CEILINGS)):
        if _to_pay(budget, node, is_cached):
            out += [(node, f"budget.{k}") for k in budget.set_ceilings(keys)]
    for c in _generated(the_plan):
        assert c.answers is not None
        out += [(c.answers, f"budget.{k}") for k in budget.set_ceilings(GEN_CEILINGS)]
    return out


# ------------------------------------------- what is probed, and each probe's artifact key


def _kinds(budget: StageBudget, the_plan: Plan, is_cached: Callable[[Node], bool]
           ) -> set[str]:
    """The probe kinds a run makes: a kind a ceiling reads (or every kind with ``validate``)
    whose node this run would compute; the index probe needs the embedding probe's vectors,
    so it brings that probe along."""
    out = set()
    want_embed = (_wanted(budget, EMBED_CEILINGS)
                  and _to_pay(budget, the_plan.embed_docs, is_cached))
    want_index = (_uses(the_plan, the_plan.index) and _wanted(budget, INDEX_CEILINGS)
                  and _to_pay(budget, the_plan.index, is_cached))
    if _uses(the_plan, the_plan.embed_docs) and (want_embed or want_index):
        out.add("embed_docs")
        if want_index:
            out.add("index")
    if _uses(the_plan, the_plan.embed_queries) and _wanted(
            budget, ["max_stage_p95_ms.embed_query"]):
        out.add("embed_query")
    if _wanted(budget, ["max_stage_p95_ms.rerank"]) and _rerank_depths(the_plan):
        out.add("rerank")
    if _wanted(budget, GEN_CEILINGS) and _generated(the_plan):
        out.add("generate")
    return out


def _embed_docs_params(budget: StageBudget, emb: Any, n_total: int) -> dict[str, Any]:
    from bench.embedding.base import ShardableEmbedder

    # the corpus pass's own batch size (a CPU's throughput depends on it), but >= 4 batches
    # for the bootstrap
    bs = emb.batch_size if isinstance(emb, ShardableEmbedder) else 32
    bs = max(1, min(bs, min(budget.probe_chunks, n_total) // 4))
    return {"embedder": emb.cache_params(), "probe_chunks": budget.probe_chunks,
            "seed": budget.seed, "batch": bs}


def _embed_query_params(budget: StageBudget, emb: Any) -> dict[str, Any]:
    return {"embedder": emb.cache_params(), "queries": budget.probe_queries,
            "seed": budget.seed}


def _index_params(budget: StageBudget, op: Any, n: int) -> dict[str, Any]:
    """``n``: the embedding probe's sample vectors (min(probe_chunks, corpus chunks))."""
    return {"index": op.params(), "sizes": sorted({max(n // 4, 2), max(n // 2, 3), n}),
            "repeats": budget.index_build_repeats, "probe_chunks": budget.probe_chunks,
            "seed": budget.seed}


def _rerank_depths(the_plan: Plan) -> dict[int, list[ConfigSpec]]:
    by_depth: dict[int, list[ConfigSpec]] = {}
    for c in the_plan.configs:
        if c.kind is ConfigKind.RERANKED and "depth" in c.params:
            by_depth.setdefault(int(c.params["depth"]), []).append(c)
    return by_depth


def _rerank_params(budget: StageBudget, reranker: Any, depths: Sequence[int], n_queries: int
                   ) -> dict[str, Any]:
    return {"reranker": reranker.cache_params(), "depths": list(depths), "queries": n_queries,
            "seed": budget.seed, "indexed": isinstance(reranker, IndexedReranker)}


def _generate_params(budget: StageBudget, gop: Any, builder: Any) -> dict[str, Any]:
    return {"generator": gop.generator.cache_params(), "sampling": asdict(gop.sampling),
            "builder": builder.cache_params(), "requests": budget.probe_requests,
            "seed": budget.seed}


@dataclass(frozen=True)
class PlannedProbe:
    """A probe the run will make (or load), as a node of the plan: its artifact's stage and
    key (the store's: a multirun's jobs that share it compute it once), the nodes it reads,
    the nodes a breach prunes, and whether the store has it already."""

    stage: str
    key: str
    label: str
    inputs: tuple[str, ...]
    prunes: tuple[str, ...]
    cached: bool


def planned_probes(comps: Components, the_plan: Plan, executor: Executor,
                   n_queries: int, n_chunks: int | None) -> tuple[list[PlannedProbe], bool]:
    """The probes ``probe_stages`` would make, with their artifact keys, without computing
    anything (``plan_only``). ``n_chunks``: the corpus's chunk count if known (cached
    chunks), else taken as at least ``probe_chunks`` (the embedding and index probes' keys
    hold the sample's size). Returns the probes and whether that assumption was made."""
    from bench.cache.store import make_key
    from bench.context.base import JudgedContextBuilder
    from bench.embedding.stage import EmbedOp
    from bench.generation.stage import ContextOp

    budget = comps.budget
    if not isinstance(budget, StageBudget) or not the_plan.configs:
        return [], False
    kinds = _kinds(budget, the_plan, executor.is_cached)
    out: list[PlannedProbe] = []
    assumed = n_chunks is None and bool(kinds & {"embed_docs", "index"})
    n_total = budget.probe_chunks if n_chunks is None else n_chunks

    def add(stage: str, params: Mapping[str, Any], inputs: Sequence[Node], label: str,
            prunes: Sequence[str]) -> None:
        key = make_key(stage, _VERSION, params, [n.key for n in inputs])
        out.append(PlannedProbe(stage, key, label, tuple(n.key for n in inputs),
                                tuple(dict.fromkeys(prunes)),
                                executor.store.lookup(stage, key) is not None))

    if "embed_docs" in kinds:
        node = the_plan.embed_docs
        assert isinstance(node.op, EmbedOp)
        add("probe_embed_docs", _embed_docs_params(budget, node.op.embedder, n_total),
            [the_plan.chunk], node.label, [node.key])
        if "index" in kinds:
            node = the_plan.index
            add("probe_index", _index_params(budget, node.op, min(budget.probe_chunks,
                                                                   n_total)),
                [the_plan.embed_docs], node.label, [node.key])
    if "embed_query" in kinds:
        node = the_plan.embed_queries
        assert isinstance(node.op, EmbedOp)
        add("probe_embed_query", _embed_query_params(budget, node.op.embedder),
            [the_plan.data], node.label, [node.key])
    if "rerank" in kinds and comps.reranker is not None:
        by_depth = _rerank_depths(the_plan)
        add("probe_rerank", _rerank_params(budget, comps.reranker, sorted(by_depth),
                                           min(budget.probe_queries, 20, n_queries)),
            [the_plan.chunk, the_plan.data],
            f"{getattr(comps.reranker, 'name', 'reranker')} at depths "
            f"{', '.join(map(str, sorted(by_depth)))}",
            [c.leaf.key for cs in by_depth.values() for c in cs])
    if "generate" in kinds:
        gen_specs = _generated(the_plan)
        answers = gen_specs[0].answers
        assert answers is not None
        cop = answers.input("contexts").op
        assert isinstance(cop, ContextOp)
        if not isinstance(cop.builder, JudgedContextBuilder):  # not probed (see the runner)
            add("probe_generate", _generate_params(budget, answers.op, cop.builder),
                [the_plan.chunk, the_plan.data], answers.label.rsplit(">", 1)[-1],
                [c.answers.key for c in gen_specs if c.answers is not None])
    return out, assumed


# ---------------------------------------------------------------------- probe runners


def _cached_json(executor: Executor, stage: str, params: Mapping[str, Any],
                 upstream: Sequence[str], measure: Callable[[Path], dict[str, Any]]
                 ) -> tuple[dict[str, Any], bool, float]:
    """The probe's raw measurements from the store, or measured now and stored (a probe
    that raised is not stored: the next run probes again)."""
    t0 = time.perf_counter()

    def compute(tmp: Path) -> None:
        (tmp / "probe.json").write_text(json.dumps(measure(tmp)))

    def load(d: Path) -> tuple[dict[str, Any], Path]:
        return json.loads((d / "probe.json").read_text()), d

    (raw, _d), _key, hit = executor.store.resolve(stage, version=_VERSION, params=params,
                                                  upstream=upstream, compute=compute,
                                                  load=load)
    raw["_dir"] = str(_d)
    return raw, hit, 0.0 if hit else time.perf_counter() - t0


def _sample(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(k, n), replace=False))


def _checks(budget: StageBudget, ests: Sequence[Estimate], by_key: Mapping[str, str]
            ) -> tuple[StageCheck, ...]:
    """``by_key``: ceiling key -> the estimate's name it bounds."""
    out = []
    for key, name in by_key.items():
        limit = budget.ceilings.get(key) if not key.startswith("max_stage_p95_ms.") \
            else budget.stage_ceiling(key.split(".", 1)[1])
        est = next((e for e in ests if e.name == name), None)
        if limit is not None and est is not None:
            out.append(StageCheck(key, float(limit), est))
    return tuple(out)


def _wanted(budget: StageBudget, keys: Sequence[str]) -> bool:
    return budget.validate or any(
        (budget.stage_ceiling(k.split(".", 1)[1]) if k.startswith("max_stage_p95_ms.")
         else budget.ceilings.get(k)) is not None for k in keys)


def _embed_probe(budget: StageBudget, the_plan: Plan, executor: Executor,
                 chunks: ChunkTable, *, check: bool = True) -> tuple[StageProbe, np.ndarray]:
    """The corpus pass's seconds (and price) from a seeded, length-sorted chunk sample; the
    sample's vectors (for the index probe). ``check=False``: the corpus pass is cached (the
    probe runs for the index probe's vectors), so its ceilings prune nothing."""
    from bench.embedding.stage import EmbedOp

    node = the_plan.embed_docs
    op = node.op
    assert isinstance(op, EmbedOp)
    emb = op.embedder
    n_total = len(chunks)
    if budget.probe_chunks >= n_total:  # known only after chunking: said, not an error
        log.warning("budget.probe_chunks %d >= the corpus's %d chunks: the probe encodes "
                    "the whole corpus (it costs the work it would save)", budget.probe_chunks,
                    n_total)
    idx = _sample(n_total, budget.probe_chunks, budget.seed)
    tokens = np.asarray(chunks.n_tokens, dtype=np.int64)
    # the corpus pass batches longest first: probe batches of alike lengths, as it does
    idx = idx[np.argsort(-tokens[idx], kind="stable")]
    params = _embed_docs_params(budget, emb, n_total)
    bs = int(params["batch"])

    def measure(tmp: Path) -> dict[str, Any]:
        texts = [chunks.text[int(i)] for i in idx]
        out = np.zeros((len(texts), emb.dim), dtype=np.float32)
        warm = np.zeros((min(bs, len(texts)), emb.dim), dtype=np.float32)
        emb.encode(texts[:bs], kind="document", out=warm)  # model load is no batch's cost
        secs, units = [], []
        for s in range(0, len(texts), bs):
            t0 = time.perf_counter()
            emb.encode(texts[s:s + bs], kind="document", out=out[s:s + bs])
            secs.append(time.perf_counter() - t0)
            units.append(int(tokens[idx[s:s + bs]].sum() + len(texts[s:s + bs])))
        np.save(tmp / "vectors.npy", out)
        return {"seconds": secs, "units": units, "n": len(texts)}

    raw, hit, spent = _cached_json(executor, "probe_embed_docs", params,
                                   [the_plan.chunk.key], measure)
    total_units = float(tokens.sum() + n_total)
    how = (f"{raw['n']} of {n_total} chunks encoded in {len(raw['seconds'])} length-sorted "
           f"batches of {bs} after a warm-up batch; seconds per token x {int(total_units)} "
           f"corpus tokens; bootstrap over batches")
    est = ratio_estimate(np.asarray(raw["seconds"]), np.asarray(raw["units"]), total_units,
                         confidence=budget.confidence, resamples=budget.resamples,
                         seed=budget.seed, name="embed_docs_s", how=how)
    ests = [est]
    if budget.price_per_hour is not None:
        k = budget.price_per_hour / 3600.0
        ests.append(Estimate("embed_docs_cost", est.predicted * k, est.lower * k,
                             est.upper * k, f"price_per_hour x embed_docs_s ({how})"))
    checks = _checks(budget, ests, {"max_embed_docs_s": "embed_docs_s",
                                    "max_embed_docs_cost": "embed_docs_cost"}) if check else ()
    vectors = np.load(Path(raw["_dir"]) / "vectors.npy")
    return StageProbe("embed_docs", node.label, (node.key,), tuple(ests), checks,
                      probe_s=spent, cached=hit, corpus_chunks=n_total,
                      probe_chunks=int(raw["n"]) + min(bs, int(raw["n"]))), vectors


def _query_probe(budget: StageBudget, the_plan: Plan, executor: Executor, dataset: Dataset
                 ) -> StageProbe:
    from bench.embedding.stage import EmbedOp, encode_one_query

    node = the_plan.embed_queries
    op = node.op
    assert isinstance(op, EmbedOp)
    picked = _sample(len(dataset.queries), budget.probe_queries, budget.seed)

    def measure(tmp: Path) -> dict[str, Any]:
        encode_one_query(op.embedder, dataset.queries[int(picked[0])].text)  # warm-up
        ms = []
        for q in picked:
            t0 = time.perf_counter()
            encode_one_query(op.embedder, dataset.queries[int(q)].text)
            ms.append((time.perf_counter() - t0) * 1000.0)
        return {"ms": ms}

    raw, hit, spent = _cached_json(executor, "probe_embed_query",
                                   _embed_query_params(budget, op.embedder),
                                   [the_plan.data.key], measure)
    est = sample_estimate(np.asarray(raw["ms"]), "p95", confidence=budget.confidence,
                          resamples=budget.resamples, seed=budget.seed,
                          name="embed_query_p95_ms",
                          how=f"{len(raw['ms'])} single-query encodes after a warm-up; "
                              "bootstrap p95")
    checks = _checks(budget, [est], {"max_stage_p95_ms.embed_query": "embed_query_p95_ms"})
    return StageProbe("embed_query", node.label, (node.key,), (est,), checks,
                      probe_s=spent, cached=hit)


def _index_probe(budget: StageBudget, the_plan: Plan, executor: Executor,
                 vectors: np.ndarray, n_total: int) -> StageProbe:
    from bench.index.base import BuildsInDirectory
    from bench.index.stage import IndexOp

    node = the_plan.index
    op = node.op
    assert isinstance(op, IndexOp)
    params = _index_params(budget, op, len(vectors))
    sizes = list(params["sizes"])

    def measure(tmp: Path) -> dict[str, Any]:
        ns, secs, nbytes = [], [], []
        for m in sizes:
            for _ in range(budget.index_build_repeats):
                with tempfile.TemporaryDirectory(prefix="bench-probe-index-") as d:
                    vec = np.ascontiguousarray(vectors[:m])
                    if isinstance(op.index, BuildsInDirectory):
                        _, info = op.index.build_in(vec, Path(d))
                    else:
                        _, info = op.index.build(vec)
                ns.append(m)
                secs.append(info.build_s)
                nbytes.append(info.index_bytes)
        return {"n": ns, "build_s": secs, "index_bytes": nbytes}

    label = node.label
    try:
        raw, hit, spent = _cached_json(executor, "probe_index", params,
                                       [the_plan.embed_docs.key], measure)
    except (OptionError, ConfigError, RuntimeError, ValueError, OSError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("budget probe index %s: failed on the sample (%s); not pruned", label, why)
        return StageProbe("index", label, (node.key,), status=f"failed: {why}")
    ests = []
    for name, ys, unit in (("index_build_s", raw["build_s"], "seconds"),
                           ("index_bytes", raw["index_bytes"], "bytes")):
        try:
            ests.append(power_fit(np.asarray(raw["n"]), np.asarray(ys), float(n_total),
                                  confidence=budget.confidence, name=name, unit=unit))
        except ValueError as exc:
            return StageProbe("index", label, (node.key,), status=f"failed: {exc}",
                              probe_s=spent, cached=hit)
    checks = _checks(budget, ests, {"max_index_build_s": "index_build_s",
                                    "max_index_bytes": "index_bytes"})
    return StageProbe("index", label, (node.key,), tuple(ests), checks, probe_s=spent,
                      cached=hit)


def _rerank_probes(budget: StageBudget, comps: Components, the_plan: Plan,
                   executor: Executor, dataset: Dataset, chunks: ChunkTable
                   ) -> list[StageProbe]:
    reranker = comps.reranker
    by_depth = _rerank_depths(the_plan)
    if reranker is None or not by_depth:
        return []

    picked = _sample(len(dataset.queries), min(budget.probe_queries, 20), budget.seed)
    depths = sorted(by_depth)
    # scoring time depends on how many passages and how long, not which: one seeded sample
    # of max(depths) chunks serves every probe query
    pool = _sample(len(chunks), max(depths), budget.seed + 1)
    texts = [chunks.text[int(i)] for i in pool]
    ranker = reranker if isinstance(reranker, IndexedReranker) else None
    indexed = ranker is not None

    def measure(tmp: Path) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bench-probe-rerank-") as d:
            index = None
            if ranker is not None:  # as deployed: passages encoded at index time
                ranker.index_passages(texts, Path(d))
                index = ranker.load_index(Path(d))

            def score(query: str, depth: int) -> None:
                if ranker is not None:
                    ranker.score_indexed([query], index, [np.arange(depth, dtype=np.int64)])
                else:
                    reranker.score([query], [texts[:depth]])

            score(dataset.queries[int(picked[0])].text, depths[0])  # warm-up
            out: dict[str, list[float]] = {}
            for dep in depths:
                for q in picked.tolist():
                    t0 = time.perf_counter()
                    score(dataset.queries[q].text, dep)
                    out.setdefault(str(dep), []).append((time.perf_counter() - t0) * 1000.0)
        return {"ms": out}

    raw, hit, spent = _cached_json(executor, "probe_rerank",
                                   _rerank_params(budget, reranker, depths, len(picked)),
                                   [the_plan.chunk.key, the_plan.data.key], measure)
    out = []
    for i, d in enumerate(depths):
        est = sample_estimate(np.asarray(raw["ms"][str(d)]), "p95",
                              confidence=budget.confidence, resamples=budget.resamples,
                              seed=budget.seed, name="rerank_p95_ms",
                              how=f"{len(picked)} probe queries x {d} sampled passages "
                                  f"scored one query per call"
                                  f"{' from a passage index of the sample' if indexed else ''}"
                                  "; bootstrap p95")
        checks = _checks(budget, [est], {"max_stage_p95_ms.rerank": "rerank_p95_ms"})
        out.append(StageProbe("rerank", f"{getattr(reranker, 'name', 'reranker')} at depth {d}",
                              tuple(c.leaf.key for c in by_depth[d]), (est,), checks,
                              probe_s=spent if i == 0 else 0.0, cached=hit, depth=d))
    return out


def _peak_memory(device: str) -> tuple[Callable[[], None], Callable[[], tuple[int, str]]]:
    """(reset, read) of the generator probe's peak memory: torch's peak allocated bytes on
    a GPU, this process's resident set on CPU (the loaded model is resident)."""
    if device == "cuda":
        import torch

        return (torch.cuda.reset_peak_memory_stats,
                lambda: (int(torch.cuda.max_memory_allocated()), "torch_peak_allocated"))
    import psutil

    proc = psutil.Process()
    return (lambda: None), (lambda: (int(proc.memory_info().rss), "rss"))


def _generate_probe(budget: StageBudget, the_plan: Plan, executor: Executor,
                    dataset: Dataset, chunks: ChunkTable, device: str
                    ) -> StageProbe | None:
    from bench.context.base import JudgedContextBuilder, TopKContextBuilder, ranked_passages
    from bench.generation.base import GenerationRequest
    from bench.generation.stage import ContextOp, GenerateOp

    gen_specs = _generated(the_plan)
    if not gen_specs:
        return None
    answers = gen_specs[0].answers
    assert answers is not None
    keys = tuple(dict.fromkeys(c.answers.key for c in gen_specs if c.answers is not None))
    gop, cop = answers.op, answers.input("contexts").op
    assert isinstance(gop, GenerateOp) and isinstance(cop, ContextOp)
    label = f"{answers.label.rsplit('>', 1)[-1]} ({len(keys)} generated configs)"
    if isinstance(cop.builder, JudgedContextBuilder):
        return StageProbe("generate", label, keys,
                          status="failed: a judged context builder reads the judgments of "
                                 "real pools; not probed")
    builder = cop.builder
    k = builder.top_k if isinstance(builder, TopKContextBuilder) else 10
    by_id = {q.query_id: q for q in dataset.queries}
    subset = [by_id[i] for i in cop.subset if i in by_id] or list(dataset.queries)
    picked = _sample(len(subset), budget.probe_requests, budget.seed)
    rng = np.random.default_rng(budget.seed)
    items = []
    for j in picked.tolist():
        q = subset[j]
        cs = rng.choice(len(chunks), size=min(k, len(chunks)), replace=False)
        items.append(ranked_passages(
            q.query_id, q.text, [dataset.doc_ids[int(chunks.doc_idx[c])] for c in cs],
            [int(c) for c in cs], [chunks.text[int(c)] for c in cs],
            [1.0 - 0.01 * r for r in range(len(cs))]))

    def measure(tmp: Path) -> dict[str, Any]:
        ctx = builder.build(items, gop.generator)
        reqs = [GenerationRequest(f"budget-probe-{c.query_id}", tuple(c.messages), gop.sampling)
                for c in ctx]
        gop.generator.generate(reqs[:1])  # warm-up: a model load is no request's cost
        reset, read = _peak_memory(device)
        reset()
        gens = gop.generator.generate(reqs)
        peak, measure_kind = read()
        return {"gens": [{"status": g.status, "ttft_ms": g.ttft_ms, "tpot_ms": g.tpot_ms,
                          "e2e_ms": g.e2e_ms, "tokens": g.prompt_tokens + g.output_tokens}
                         for g in gens], "peak_bytes": peak, "peak_measure": measure_kind}

    raw, hit, spent = _cached_json(executor, "probe_generate",
                                   _generate_params(budget, gop, builder),
                                   [the_plan.chunk.key, the_plan.data.key], measure)
    ok = [g for g in raw["gens"] if g["status"] == "ok"]
    if not ok:
        return StageProbe("generate", label, keys, status="failed: no probe request answered",
                          probe_s=spent, cached=hit)
    kw: dict[str, Any] = {"confidence": budget.confidence, "resamples": budget.resamples,
                          "seed": budget.seed}
    n = f"{len(ok)} real requests (prompts by the run's context builder on sampled chunks)"
    ests = [sample_estimate(np.asarray([g["e2e_ms"] for g in ok]), "p95",
                            name="gen_request_p95_ms", how=f"{n}; bootstrap p95", **kw),
            sample_estimate(np.asarray([g["tokens"] for g in ok]), "mean",
                            name="gen_tokens_per_request", how=f"{n}; prompt + output", **kw)]
    ttft = [g["ttft_ms"] for g in ok if g["ttft_ms"] is not None]
    if ttft:
        ests.append(sample_estimate(np.asarray(ttft), "p95", name="gen_ttft_p95_ms",
                                    how=f"{n}; bootstrap p95", **kw))
    tpot = [g["tpot_ms"] for g in ok if g["tpot_ms"] is not None]
    if tpot:
        ests.append(sample_estimate(np.asarray(tpot), "mean", name="gen_tpot_ms",
                                    how=f"{n}; mean", **kw))
    if budget.price_per_hour is not None:
        ests.append(sample_estimate(np.asarray([g["e2e_ms"] for g in ok]), "mean",
                                    name="gen_cost_per_request",
                                    how=f"{n}; price_per_hour x mean request time", **kw,
                                    scale=budget.price_per_hour / 3_600_000.0))
    peak = float(raw["peak_bytes"])
    ests.append(Estimate("gen_peak_memory_bytes", peak, peak, peak,
                         f"{raw['peak_measure']} after the probe requests (a high-water "
                         "mark: its bound is the measurement)"))
    checks = _checks(budget, ests, {"max_gen_ttft_p95_ms": "gen_ttft_p95_ms",
                                    "max_gen_tpot_ms": "gen_tpot_ms",
                                    "max_gen_request_p95_ms": "gen_request_p95_ms",
                                    "max_gen_tokens_per_request": "gen_tokens_per_request",
                                    "max_gen_cost_per_request": "gen_cost_per_request",
                                    "max_gen_peak_memory_bytes": "gen_peak_memory_bytes"})
    for key in ("max_gen_ttft_p95_ms", "max_gen_tpot_ms"):
        if key in budget.ceilings and not any(c.key == key for c in checks):
            log.warning("budget.%s: this generator reports no %s; not checked", key,
                        key.split("_")[2])
    return StageProbe("generate", label, keys, tuple(ests), checks, probe_s=spent, cached=hit)


def probe_stages(comps: Components, the_plan: Plan, executor: Executor, dataset: Dataset,
                 device: str) -> StageProbeOutcome:
    """Probe every costly stage a ceiling reads before its node runs (see the module
    docstring); returns the probes and the node keys they prune."""
    budget = comps.budget
    if not isinstance(budget, StageBudget) or not the_plan.configs:
        return StageProbeOutcome()
    t0 = time.perf_counter()
    chunks: ChunkTable = executor.value(the_plan.chunk)
    probes: list[StageProbe] = []
    kinds = _kinds(budget, the_plan, executor.is_cached)
    if "embed_docs" in kinds:  # the index probe builds on its sample vectors
        embed, vectors = _embed_probe(  # a cached corpus pass costs nothing: not pruned
            budget, the_plan, executor, chunks,
            check=_to_pay(budget, the_plan.embed_docs, executor.is_cached))
        probes.append(embed)
        if "index" in kinds:
            probes.append(_index_probe(budget, the_plan, executor, vectors, len(chunks)))
    if "embed_query" in kinds:
        probes.append(_query_probe(budget, the_plan, executor, dataset))
    if "rerank" in kinds:
        probes.extend(_rerank_probes(budget, comps, the_plan, executor, dataset, chunks))
    if "generate" in kinds:
        gen = _generate_probe(budget, the_plan, executor, dataset, chunks, device)
        if gen is not None:
            probes.append(gen)
    pruned: dict[str, str] = {}
    for p in probes:
        over = p.over
        line = ("; ".join(e.describe() for e in p.estimates) or p.status)
        if over is not None:
            for k in p.node_keys:
                pruned.setdefault(k, f"probe {p.kind}: {over.describe()}")
        log.info("budget probe %-11s %s: %s — %s%s", p.kind, p.label,
                 "PRUNED" if over is not None else "keep", line,
                 " (measurements from the cache)" if p.cached else f" ({p.probe_s:.2f} s)")
    return StageProbeOutcome(tuple(probes), pruned, time.perf_counter() - t0, budget.validate,
                             budget.stated_figures())


# ------------------------------------------------------------------ report and validation


def _configs_pruned(the_plan: Plan, keys: Sequence[str]) -> list[str]:
    ks = set(keys)
    return [c.config_id for c in the_plan.configs if any(n.key in ks for n in c.chain)]


def _measured(p: StageProbe, the_plan: Plan, executor: Executor) -> dict[str, float]:
    """What the full run measured for the figures this probe predicted (empty for a node
    the run did not resolve)."""
    from bench.generation.base import Generation

    done = {r.node.key: r for r in executor.resolutions}
    out: dict[str, float] = {}
    if p.kind == "embed_docs" and the_plan.embed_docs.key in done:
        total = [t.wall_ms for t in done[the_plan.embed_docs.key].timings
                 if t.sample_kind == "total"]
        if total:
            out["embed_docs_s"] = sum(total) / 1000.0
    elif p.kind == "index" and the_plan.index.key in done:
        info = done[the_plan.index.key].value.info
        out = {"index_build_s": float(info.build_s), "index_bytes": float(info.index_bytes)}
    elif p.kind == "embed_query" and the_plan.query_latency is not None \
            and the_plan.query_latency.key in done:
        ms = [t.wall_ms for t in done[the_plan.query_latency.key].timings
              if t.sample_kind == "query"]
        if ms:
            out["embed_query_p95_ms"] = float(np.percentile(ms, 95))
    elif p.kind == "rerank" and p.depth is not None:
        ms = [t.wall_ms for r in done.values() if r.node.stage == "rerank"
              and getattr(r.node.op, "depth", None) == p.depth
              and type(r.node.op).__name__ == "RerankLatencyOp"
              for t in r.timings if t.sample_kind == "query"]
        if ms:
            out["rerank_p95_ms"] = float(np.percentile(ms, 95))
    elif p.kind == "generate":
        gens: list[Generation] = [g for k in p.node_keys if k in done
                                  for g in done[k].value if g.status == "ok"]
        if gens:
            out["gen_request_p95_ms"] = float(np.percentile([g.e2e_ms for g in gens], 95))
            out["gen_tokens_per_request"] = float(np.mean(
                [g.prompt_tokens + g.output_tokens for g in gens]))
            ttft = [g.ttft_ms for g in gens if g.ttft_ms is not None]
            if ttft:
                out["gen_ttft_p95_ms"] = float(np.percentile(ttft, 95))
            tpot = [g.tpot_ms for g in gens if g.tpot_ms is not None]
            if tpot:
                out["gen_tpot_ms"] = float(np.mean(tpot))
    return out


def validation_row(p: StageProbe, e: Estimate, m: float | None) -> dict[str, Any]:
    """One estimate against what the full run measured (``m``; None: not measured): its
    relative error, whether the bounds held, and for a pruning ceiling whether the full run
    would have passed it (a pruned config that would have passed is a wrong prune)."""
    check = next((c for c in p.checks if c.estimate.name == e.name), None)
    return {
        "kind": p.kind, "label": p.label, "name": e.name, "predicted": e.predicted,
        "lower": e.lower, "upper": e.upper, "measured": m,
        "rel_error": None if m is None or m == 0 else (e.predicted - m) / m,
        "within_bounds": None if m is None else bool(e.lower <= m <= e.upper),
        "lower_bound_held": None if m is None else bool(e.lower <= m),
        "ceiling": None if check is None else check.key,
        "limit": None if check is None else check.limit,
        "pruned": bool(check is not None and check.over),
        "wrong_prune": bool(check is not None and check.over and m is not None
                            and m <= check.limit)}


def validation_rows(outcome: StageProbeOutcome, the_plan: Plan, executor: Executor
                    ) -> list[dict[str, Any]]:
    """``validation_row`` of every estimate of every probe."""
    rows: list[dict[str, Any]] = []
    for p in outcome.probes:
        measured = _measured(p, the_plan, executor)
        rows.extend(validation_row(p, e, measured.get(e.name)) for e in p.estimates)
    return rows


def stated_work(outcome: StageProbeOutcome, by_kind: Mapping[str, float]) -> dict[str, Any]:
    """The work saved and the probes' cost at the budget's stated machine's rates: the
    corpus pass (and the embedding probe) at its embedding chunks/s; a kind it states no
    rate for is listed in ``not_stated`` with this machine's seconds, not converted."""
    stated = outcome.stated
    assert stated is not None
    rate = stated.rates.get("embed")
    embeds = [p for p in outcome.probes if p.kind == "embed_docs"]
    saved: dict[str, float] = {}
    not_stated = {k: v for k, v in by_kind.items() if k != "embed_docs" or rate is None}
    if rate is not None and "embed_docs" in by_kind:
        saved["embed_docs"] = sum((p.corpus_chunks or 0) / rate for p in embeds
                                  if p.over is not None)
    probe_cost = None
    if rate is not None:  # the embedding probe's chunks at the rate; the others have none
        probe_cost = sum((p.probe_chunks or 0) / rate for p in embeds if not p.cached)
    return {
        "machine": stated.machine, "source": stated.source, "rates": dict(stated.rates),
        "seconds_saved": sum(saved.values()), "seconds_saved_by_kind": saved,
        "not_stated": not_stated,
        "embed_probe_cost_s": probe_cost,
        "how": "the pruned corpus passes' chunks / the stated embedding rate (chunks/s); "
               "the embedding probe's own chunks (its sample and warm-up batch) at the same "
               "rate; kinds without a stated rate (index build, generation) are in "
               "not_stated with this machine's predicted seconds",
    }


def report(probe: ProbeOutcome, the_plan: Plan, executor: Executor, run_dir: Path,
           requests: Sequence[Request] = ()) -> dict[str, Any] | None:
    """Write ``budget_probes.json`` (None without stage probes). With ``validate``, the chain
    probe's ceilings are validated too, against the latency pass's ``requests``
    (``bench.pipeline.probe.chain_validation_rows``), so the run writes it after that pass."""
    outcome: StageProbeOutcome | None = probe.stages
    if outcome is None or not outcome.probes:
        return None
    probes = []
    by_kind: dict[str, float] = {}
    for p in outcome.probes:
        over = p.over
        if over is not None:
            for name in ("embed_docs_s", "index_build_s"):
                e = p.estimate(name)
                if e is not None:
                    by_kind[p.kind] = by_kind.get(p.kind, 0.0) + e.predicted
            e = p.estimate("gen_request_p95_ms")
            if e is not None and p.kind == "generate":
                n_req = sum(len(getattr(n.input("contexts").op, "subset", ()))
                            for c in _generated(the_plan) if (n := c.answers) is not None)
                by_kind["generate"] = e.predicted * n_req / 1000.0
        probes.append({
            "kind": p.kind, "label": p.label, "status": p.status, "depth": p.depth,
            "probe_s": p.probe_s, "from_cache": p.cached,
            "estimates": [asdict(e) for e in p.estimates],
            "checks": [{"key": c.key, "limit": c.limit, "estimate": c.estimate.name,
                        "lower": c.estimate.lower, "over": c.over} for c in p.checks],
            "pruned": over is not None, "reason": None if over is None else over.describe(),
            "configs_pruned": _configs_pruned(the_plan, p.node_keys) if over else []})
    doc: dict[str, Any] = {
        "probes": probes, "probe_wall_s": outcome.wall_s,
        "probe_cost_s": sum(p.probe_s for p in outcome.probes),
        "configs": len(the_plan.configs),
        "configs_pruned": len(_configs_pruned(the_plan, list(outcome.pruned))),
        "seconds_saved_predicted": sum(by_kind.values()),
        "seconds_saved_by_kind": by_kind,
        "how": "seconds saved = the probes' predictions of the pruned nodes (corpus "
               "embedding, index build, generation requests x answered queries); probe cost = "
               "this run's probing seconds (0 for measurements loaded from the cache)",
        "validate": outcome.validate,
    }
    if outcome.stated is not None:
        doc["stated"] = stated_work(outcome, by_kind)
    if outcome.validate:
        rows = (validation_rows(outcome, the_plan, executor)
                + chain_validation_rows(probe, requests))
        doc["validation"] = rows
        doc["wrong_prunes"] = sum(1 for r in rows if r["wrong_prune"])
        doc["bounds_missed"] = sum(1 for r in rows if r["within_bounds"] is False)
        for r in rows:
            log.info("budget validate %-11s %-24s predicted %.4g [%.4g, %s] measured %s%s",
                     r["kind"], r["name"], r["predicted"], r["lower"],
                     "-" if r["upper"] is None else f"{r['upper']:.4g}",
                     "n/a" if r["measured"] is None else f"{r['measured']:.4g}",
                     "  WRONG PRUNE" if r["wrong_prune"] else "")
    (run_dir / PROBES_FILE).write_text(json.dumps(doc, indent=2, default=str))
    return doc
