"""``capacity.target=http``: the capacity study against services bench does not own.

Each of ``capacity.endpoints`` is one study (:func:`bench.capacity.study.run_study`) against
one endpoint (:mod:`bench.capacity.mapped`), with the run's golden set as its queries and
every timed reply scored by the endpoint's quality metric:

- ``rag`` (a RAG API through its ``system=http`` mapping): ``capacity.quality_metric``
  (``hit@k`` / ``ndcg@k`` / ``recall@k`` on its ranking, ``token_f1`` / ``exact_match`` on
  its answer);
- ``chat`` / ``completions``: ``token_f1`` against the references (the query is the prompt);
- ``rerank``: ``ndcg@10`` of its order of the query's candidates (its judged documents and
  seeded others from the corpus, ``capacity.component_passages`` in all);
- ``embeddings``: none (a vector is not judged here; latency and goodput only).

An endpoint with ``start`` (an argv; ``{port}`` a free port, ``{corpus}`` the run's corpus as
JSON lines ``{"id", "text"}``, ``{answers}`` the golden queries' references
``{"query", "answer"}``, ``{python}`` this interpreter) is started before its study, waited
for on ``GET /health`` and stopped after; its ``url`` is then a path on it. Before any load,
one preflight request: a refused connection or a reply the mapping does not fit is one
line naming ``capacity.endpoints.<i>.<key>``, exit 2. Faults only with
``capacity.allow_faults=true`` (never ``restart``: no process of the service is bench's).
The unloaded pass runs after the load levels (``unloaded_last``), over the whole golden set
(up to ``capacity.unloaded_queries``), so a cache is not warmed before the levels.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.capacity.backends import EndpointBackend
from bench.capacity.base import CapacityAnswer, CapacityRun, Slo
from bench.capacity.mapped import API, Endpoint, EndpointQuery, MappedTarget, preflight
from bench.capacity.metrics import check_slo
from bench.capacity.quality import answer_scorer, reads_ranking
from bench.capacity.report import lines, write_study
from bench.capacity.servers import Served
from bench.capacity.study import LevelStore, Study, StudySettings, run_study, study_key
from bench.config.schema import CapacityConfig
from bench.errors import ConfigError
from bench.pipeline.outcome import Executed

log = logging.getLogger("bench")

KEYS = ("name", "api", "url", "request", "response", "stream", "method", "headers",
        "api_key_env", "model", "max_tokens", "doc_id_separator", "start", "quality_metric",
        "slo_ttft_ms", "slo_tpot_ms", "slo_e2el_ms", "startup_timeout_s")
DEFAULT_METRIC = {"chat": "token_f1", "completions": "token_f1", "rerank": "ndcg@10",
                  "embeddings": None}
PLACEHOLDERS = ("port", "corpus", "answers", "python")


def _key(i: int) -> str:
    return f"capacity.endpoints.{i}"


def endpoint_of(raw: dict[str, Any], i: int, base_url: str | None = None) -> Endpoint:
    """One ``capacity.endpoints`` entry as an :class:`Endpoint` (a bad field: ConfigError
    naming it); ``base_url``: the started server's, its ``url`` then a path on it."""
    k = _key(i)
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ConfigError(f"{k}.{unknown[0]}", f"unknown field; known: {', '.join(KEYS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-" for c in name):
        raise ConfigError(f"{k}.name", f"a short name of letters, digits, _ or -, got {name!r}")
    api = str(raw.get("api", "rag"))
    if api not in API:
        raise ConfigError(f"{k}.api", f"{api!r}: one of {', '.join(API)}")
    url = raw.get("url")
    urls = [url] if isinstance(url, str) else list(url or [])
    if not urls or not all(isinstance(u, str) and u for u in urls):
        raise ConfigError(f"{k}.url", "needs a URL (or a list of replica URLs)")
    if raw.get("start") is not None:
        if len(urls) != 1 or not urls[0].startswith("/"):
            raise ConfigError(f"{k}.url", "with start, the url is one path on the started "
                                          f"server (/v1/ask), got {url!r}")
        urls = [(base_url or "http://127.0.0.1:0") + urls[0]]
    return Endpoint(name, api, tuple(urls), raw.get("request"), raw.get("response"),
                    bool(raw.get("stream", False)), str(raw.get("method", "POST")),
                    {str(a): str(b) for a, b in (raw.get("headers") or {}).items()},
                    raw.get("api_key_env"), raw.get("model"), int(raw.get("max_tokens", 64)),
                    raw.get("doc_id_separator"))


def _metric(raw: dict[str, Any], cap: CapacityConfig) -> str | None:
    api = str(raw.get("api", "rag"))
    if "quality_metric" in raw:
        return raw["quality_metric"]
    return str(cap.quality_metric) if api == "rag" else DEFAULT_METRIC[api]


def _slo(raw: dict[str, Any], i: int, chain: dict[str, float]) -> dict[str, float]:
    own = {k: float(raw[f"slo_{k}_ms"]) for k in ("ttft", "tpot", "e2el")
           if raw.get(f"slo_{k}_ms") is not None}
    return check_slo(own, key=f"{_key(i)}.slo") if own else dict(chain)


#: what the preflight of an already running endpoint asks, before the run (its reply only
#: has to fit the mapping)
PREFLIGHT = EndpointQuery("preflight", "What is a benchmark?",
                          candidates=(("a", "A benchmark is a test."), ("b", "Beta.")))


def check_endpoints(cap: CapacityConfig, *, probe: bool = False) -> None:
    """Every endpoint's options, checked before any work; ``probe``: also one preflight
    request to each endpoint that is already running (no ``start``): a refused connection
    or a reply the mapping does not fit is a ConfigError naming the key."""
    from bench.capacity.mapped import build_system
    from bench.capacity.run.in_process import slo_of

    if not cap.endpoints:
        raise ConfigError("capacity.endpoints", "target=http needs at least one endpoint")
    names = set()
    for i, raw in enumerate(cap.endpoints):
        raw = dict(raw)
        ep = endpoint_of(raw, i)
        if ep.name in names:
            raise ConfigError(f"{_key(i)}.name", f"{ep.name!r} is used twice")
        names.add(ep.name)
        build_system(ep, key=_key(i), timeout_s=float(cap.timeout_s))
        metric = _metric(raw, cap)
        if metric is not None:
            answer_scorer((), metric, key=f"{_key(i)}.quality")
            if ep.api in ("chat", "completions") and reads_ranking(metric):
                raise ConfigError(f"{_key(i)}.quality_metric", f"{metric}: a {ep.api} reply "
                                  "has no ranking; token_f1 or exact_match")
        _slo(raw, i, slo_of(cap))
        start = raw.get("start")
        if start is not None:
            if not isinstance(start, list) or not start or not all(
                    isinstance(a, str) for a in start):
                raise ConfigError(f"{_key(i)}.start", "an argv: a list of strings")
            for a in start:
                try:
                    a.format(**{p: "" for p in PLACEHOLDERS})
                except (KeyError, IndexError, ValueError) as exc:
                    raise ConfigError(f"{_key(i)}.start", f"{a!r}: unknown placeholder {exc}; "
                                      f"known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
                                      ) from None
        elif probe:
            asyncio.run(_preflight(_maker(ep, [PREFLIGHT], _key(i), "none",
                                          min(float(cap.timeout_s), 30.0)), ep, _key(i)))


async def _preflight(make: Any, ep: Endpoint, key: str, query: int = 0) -> None:
    async with make(urls=list(ep.urls[:1]), name=None) as t:
        await preflight(t, key=key, query=query)


def _files(done: Executed, work: Path) -> dict[str, str]:
    """The run's corpus and the golden references as files a started service may read."""
    ds = done.dataset
    work.mkdir(parents=True, exist_ok=True)
    corpus, answers = work / "corpus.jsonl", work / "answers.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.doc_id, "text": (
        d.text if d.title_in_text or not d.title else f"{d.title}. {d.text}")}) + "\n"
        for d in ds.documents))
    answers.write_text("".join(json.dumps({"query": q.text, "answer": q.references[0]}) + "\n"
                               for q in ds.queries if q.references))
    return {"corpus": str(corpus), "answers": str(answers), "python": sys.executable}


def _queries(done: Executed, k: int, seed: int) -> list[EndpointQuery]:
    """The golden queries; each carries ``k`` rerank candidates: its judged documents, then
    seeded others from the corpus, in a seeded order (so position tells nothing)."""
    ds = done.dataset
    docs = ds.documents
    index = ds.doc_index()
    rng = np.random.default_rng(seed)
    out = []
    for q in ds.queries:
        judged = [d for d, _ in q.qrels if d in index][:k]
        rest = [docs[j].doc_id for j in rng.choice(len(docs), size=min(len(docs), 4 * k),
                                                   replace=False)]
        picked = list(dict.fromkeys([*judged, *rest]))[:k]
        rng.shuffle(picked)
        out.append(EndpointQuery(q.query_id, q.text, tuple(q.allowed_roles), q.tenant,
                                 tuple((d, docs[index[d]].text[:2000]) for d in picked)))
    return out


def _start(raw: dict[str, Any], files: dict[str, str], log_path: Path) -> Served:
    argv = [str(a).replace("{port}", "\0") for a in raw["start"]]
    argv = [a.format(port="{port}", **files).replace("\0", "{port}") for a in argv]
    return Served(argv, log_path=log_path,
                  startup_timeout_s=float(raw.get("startup_timeout_s", 120.0)))


def _maker(ep: Endpoint, queries: list[EndpointQuery], key: str, reads: Any,
           timeout_s: float) -> Any:
    """``make(urls=..., name=...)`` -> the endpoint's target; a partial, so that generator
    processes (``capacity.generator_processes``) can rebuild it."""
    return functools.partial(MappedTarget, ep, queries, key=key, reads=reads,
                             timeout_s=timeout_s)


def run_http_capacity(done: Executed, run_dir: Path, s: StudySettings) -> CapacityRun:
    from bench.capacity.run.in_process import slo_of, summary

    cap = done.settings.capacity
    check_endpoints(cap)
    out_dir = run_dir / "capacity"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = _files(done, out_dir / "inputs")
    queries = _queries(done, int(cap.component_passages), int(done.settings.resolved.get(
        "seed", 0) or 0))
    n = len(queries)
    s = replace(s, unloaded_last=True, unloaded_queries=min(int(cap.unloaded_queries), n))
    studies: list[tuple[Endpoint, str, Study]] = []
    cache_root = Path(str(done.settings.resolved["cache_dir"])).expanduser() / "capacity-levels"
    for i, raw0 in enumerate(cap.endpoints):
        raw = dict(raw0)
        served = _start(raw, files, out_dir / f"{raw['name']}.log") if raw.get("start") else None
        try:
            if served is not None:
                log.info("capacity: starting %s: %s", raw["name"], " ".join(served.argv))
                try:
                    served.start()
                except RuntimeError as exc:
                    raise ConfigError(f"{_key(i)}.start", str(exc)) from None
            ep = endpoint_of(raw, i, served.url if served is not None else None)
            metric = _metric(raw, cap)
            reads = "none" if metric is None else "ranking" if reads_ranking(metric) else "answer"
            ss = replace(s, slo_ms=_slo(raw, i, slo_of(cap)),
                         replicas=min(s.replicas, len(ep.urls)), faults=s.faults)

            make = _maker(ep, queries, _key(i), reads, s.timeout_s)
            asyncio.run(_preflight(make, ep, _key(i)))
            score = None if metric is None else answer_scorer(done.dataset.queries, metric,
                                                              key=f"{_key(i)}.quality")
            name = f"{ep.name} ({ep.api}{', ' + metric if metric else ''})"
            key = study_key(f"http|{json.dumps(raw, sort_keys=True, default=str)}|"
                            f"{done.dataset.fingerprint}|{metric}", ss)
            levels_dir = cache_root / key
            if not cap.resume and levels_dir.exists():
                shutil.rmtree(levels_dir)
            backend = EndpointBackend(make, urls=list(ep.urls), n_queries=n, name=name,
                                      work_dir=out_dir / ep.name,
                                      allow_faults=bool(cap.allow_faults),
                                      processes=int(cap.generator_processes))
            log.info("capacity: open-loop study of %s at %s", name, ", ".join(ep.urls))
            st = asyncio.run(run_study(backend, ss, score=score,
                                       store=LevelStore(levels_dir, key),
                                       records_dir=out_dir / ep.name / "aiperf"))
            notes = [*st.notes]
            if len(ep.urls) < 2 and s.replicas > 1:
                notes.append("scale-out not checked: the endpoint has one URL (list replica "
                             "URLs in capacity.endpoints.<i>.url to check it)")
            if cap.faults and not cap.allow_faults:
                notes.append("faults off: bench does not own this service")
            st = replace(st, notes=tuple(notes))
            write_study(st, out_dir / ep.name)
            studies.append((ep, metric or "-", st))
            log.info("capacity: %s: %s", ep.name, st.sizing)
        finally:
            if served is not None:
                served.stop()
    return _result(studies, run_dir, s, cap, summary)


#: which component of a RAG request each api stands for (the composed plan)
COMPONENT_OF = {"rag": "chain", "chat": "llm", "completions": "llm", "embeddings": "embedder",
                "rerank": "reranker"}


def composed_plan(studies: list[tuple[Endpoint, str, Study]], s: StudySettings,
                  cap: CapacityConfig) -> list[str]:
    """With two or more component endpoints (the user's embedder, reranker, LLM, the whole
    RAG API), the plan for ``capacity.target_rps`` composed from their knees
    (:func:`bench.capacity.components.compose_plan`); the first endpoint of each kind."""
    from bench.capacity.components import ComponentCapacity, compose_plan, plan_lines

    caps: dict[str, ComponentCapacity] = {}
    for ep, _, st in studies:
        name = COMPONENT_OF[ep.api]
        if name not in caps:
            caps[name] = ComponentCapacity(name, f"{ep.name}: {ep.method} {ep.urls[0]}",
                                           dict(st.settings.slo_ms), st.knee)
    if len(caps) < 2:
        return []
    plan = compose_plan(list(caps.values()), target_rps=float(cap.target_rps),
                        worker_kind=s.worker_kind, price_per_hour=s.price_per_hour,
                        correct_share=None)
    return ["## Composed from the endpoints", "", *plan_lines(list(caps.values()), plan)]


def _result(studies: list[tuple[Endpoint, str, Study]], run_dir: Path, s: StudySettings,
            cap: CapacityConfig, summary: Any) -> CapacityRun:
    ep0, _, st0 = studies[0]
    out: list[str] = []
    for ep, metric, st in studies:
        out += [f"### {ep.name}: {ep.api} at {', '.join(ep.urls)} (quality: {metric})", "",
                *lines(st)]
    files = [str((run_dir / "capacity" / ep.name).relative_to(run_dir))
             for ep, _, _ in studies]
    out += composed_plan(studies, s, cap)
    slo = Slo(budget_ms=min(s.slo_ms.values()), attainment=s.attainment)
    text = "; ".join(f"{ep.name}: {st.sizing}" for ep, _, st in studies)
    return CapacityRun(ep0.name, "target=http", " | ".join(
        f"{ep.name}: {ep.method} {ep.urls[0]}" for ep, _, _ in studies), slo,
        CapacityAnswer(None, float(cap.target_rps), float(cap.p95_budget_ms), None, None,
                       s.worker_kind, "measured", text), (), tuple(files), "open",
        summary(st0), tuple(out))
