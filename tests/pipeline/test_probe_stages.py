"""Stage probes before paying (``budget=stages``), end to end on the synthetic corpus: a
breached ceiling prunes before the node runs (the node is never computed), kept configs'
values equal an unbudgeted run's, the probes' measurements are cached, validation runs the
pruned configs and reports prediction errors, and bad input is one config error."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.errors import ConfigError
from bench.generation.base import Generation, GenerationRequest
from bench.pipeline.run import run

#: request ids every TimedGenerator answered, across runs
CALLS: list[str] = []


class TimedGenerator:
    """Test double of the Generator protocol reporting a scripted latency: TTFT
    ``ttft_ms``, ``tpot_ms`` per further token, 4 output tokens."""

    def __init__(self, *, ttft_ms: float = 50.0, tpot_ms: float = 10.0) -> None:
        self.ttft_ms = ttft_ms
        self.tpot_ms = tpot_ms

    def cache_params(self) -> dict[str, object]:
        return {"backend": "timed", "ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            CALLS.append(r.request_id)
            prompt = sum(len(m.content.split()) for m in r.messages)
            out.append(Generation(r.request_id, "a b c d", "ok", "stop", prompt, 4,
                                  self.ttft_ms, self.tpot_ms, self.ttft_ms + 3 * self.tpot_ms))
        return out

    def close(self) -> None:
        pass


BASE = ["+experiment=quickstart", "dataset=synthetic", "metrics.bootstrap_resamples=100",
        "report.plot=false", "budget.probe_queries=4", "budget.probe_chunks=32",
        "budget.resamples=200", "budget.index_build_repeats=1"]
GEN = ["generator._target_=test_probe_stages.TimedGenerator", "generation.max_queries=6"]


def _probes(d: Path) -> dict:
    return json.loads((d / "budget_probes.json").read_text())


def _status(d: Path) -> dict[str, str]:
    return {r["label"]: r["status"] for r in pq.read_table(d / "configs.parquet").to_pylist()}


def _values(d: Path) -> list[tuple]:
    t = pq.read_table(d / "per_query.parquet").to_pylist()
    return sorted((r["config_id"], r["query_id"], r["metric"], r["value"]) for r in t
                  if r["value"] is not None)


def _misses(d: Path) -> set[str]:
    hits = json.loads((d / "run.json").read_text())["cache_hits"]
    return {k for k, v in hits.items() if v is False}


def test_embedding_ceiling_prunes_before_the_corpus_is_embedded(compose_cfg,  # type: ignore[no-untyped-def]
                                                                tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    res = run(compose_cfg([*BASE, f"cache_dir={cache}", "budget=stages",
                           "budget.max_embed_docs_s=1e-9"]), tmp_path / "a")
    doc = _probes(res.run_dir)
    (embed,) = [p for p in doc["probes"] if p["kind"] == "embed_docs"]
    assert embed["pruned"] and embed["reason"].startswith("embed_docs_s predicted")
    est = embed["estimates"][0]
    assert 0 < est["lower"] <= est["predicted"] <= est["upper"]
    assert doc["configs_pruned"] == doc["configs"] == 1
    assert set(_status(res.run_dir).values()) == {"pruned"}
    # the corpus was never embedded: nothing of the stage is in the store
    assert "embed_docs" not in res.cache_hits
    assert not (cache / "embed_docs").exists() or not any((cache / "embed_docs").iterdir())
    assert doc["probe_cost_s"] > 0 and not embed["from_cache"]
    # the same probe again: its measurements come from the cache, no probing cost
    res2 = run(compose_cfg([*BASE, f"cache_dir={cache}", "budget=stages",
                            "budget.max_embed_docs_s=1e-9"]), tmp_path / "b")
    doc2 = _probes(res2.run_dir)
    assert doc2["probes"][0]["from_cache"] and doc2["probe_cost_s"] == 0.0
    assert doc2["probes"][0]["estimates"] == embed["estimates"]


def test_stated_machine_gives_the_work_saved_at_its_rate(compose_cfg, tmp_path: Path  # type: ignore[no-untyped-def]
                                                        ) -> None:
    stated = tmp_path / "box.yaml"
    stated.write_text("machine: a stated GPU box\nrates: {embed: 2000}\n")
    res = run(compose_cfg([*BASE, f"cache_dir={tmp_path / 'cache'}", "budget=stages",
                           "budget.max_embed_docs_s=1e-9", f"budget.stated={stated}"]),
              tmp_path / "a")
    doc = _probes(res.run_dir)
    (embed,) = [p for p in doc["probes"] if p["kind"] == "embed_docs"]
    n_chunks = pq.ParquetFile(next((tmp_path / "cache" / "chunk").rglob("chunks.parquet"))
                              ).metadata.num_rows
    st = doc["stated"]
    assert st["machine"] == "a stated GPU box" and st["rates"] == {"embed": 2000.0}
    assert st["seconds_saved_by_kind"] == {"embed_docs": n_chunks / 2000.0}
    assert st["seconds_saved"] == n_chunks / 2000.0 and st["not_stated"] == {}
    # the probe's 32 sampled chunks and its warm-up batch of 8 (32 // 4)
    assert st["embed_probe_cost_s"] == pytest.approx((32 + 8) / 2000.0)
    assert doc["seconds_saved_by_kind"]["embed_docs"] == embed["estimates"][0]["predicted"]
    manifest = json.loads((res.run_dir / "run.json").read_text())
    assert manifest["budget"]["stage_probes"]["stated"] == st
    from bench.report import content
    from bench.report.load import load_runs

    report = content.render_markdown(content.build(load_runs([res.run_dir])), "figures/")
    row = next(x for x in report.splitlines() if "a stated GPU box" in x)
    assert f"| {n_chunks / 2000.0:.2f} |" in row  # the corpus pass saved there


def test_generous_ceilings_keep_values_identical(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = tmp_path / "cache"
    plain = run(compose_cfg([*BASE[:4], f"cache_dir={tmp_path / 'c0'}"]), tmp_path / "plain")
    res = run(compose_cfg([*BASE, f"cache_dir={cache}", "budget=stages",
                           "budget.max_embed_docs_s=1e6", "budget.max_index_build_s=1e6",
                           "budget.max_index_bytes=1e12",
                           "+budget.max_stage_p95_ms.embed_query=1e6"]), tmp_path / "a")
    doc = _probes(res.run_dir)
    kinds = {p["kind"]: p for p in doc["probes"]}
    assert set(kinds) == {"embed_docs", "index", "embed_query"}
    assert not any(p["pruned"] for p in doc["probes"]) and doc["configs_pruned"] == 0
    index = {e["name"]: e for e in kinds["index"]["estimates"]}
    assert "power-law fit" in index["index_bytes"]["how"]
    # a flat index's bytes grow as n^1: the fit extrapolates the built index's size
    built = json.loads(next(cache.glob("index/**/build.json")).read_text())
    assert index["index_bytes"]["predicted"] == pytest.approx(built["index_bytes"], rel=0.05)
    assert set(_status(res.run_dir).values()) == {"ok"}
    assert _values(res.run_dir) == _values(plain.run_dir)


def test_generator_ceiling_prunes_generated_configs_only(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    CALLS.clear()
    # the double's request takes 50 + 3 x 10 = 80 ms: over 60, the retrieval config stays
    res = run(compose_cfg([*BASE, *GEN, f"cache_dir={tmp_path / 'cache'}", "budget=stages",
                           "budget.max_gen_request_p95_ms=60"]), tmp_path / "a")
    doc = _probes(res.run_dir)
    (gen,) = [p for p in doc["probes"] if p["kind"] == "generate"]
    est = {e["name"]: e for e in gen["estimates"]}
    assert est["gen_request_p95_ms"]["lower"] == pytest.approx(80.0)
    assert est["gen_ttft_p95_ms"]["predicted"] == pytest.approx(50.0)
    assert est["gen_tpot_ms"]["predicted"] == pytest.approx(10.0)
    assert gen["pruned"] and len(gen["configs_pruned"]) == 1
    statuses = _status(res.run_dir)
    assert sorted(statuses.values()) == ["ok", "pruned"]
    # only the probe's requests (warm-up + 3) were answered: no answer of the subset
    assert CALLS and all(c.startswith("budget-probe-") for c in CALLS) and len(CALLS) == 4


def test_validate_runs_pruned_configs_and_reports_errors(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    CALLS.clear()
    res = run(compose_cfg([*BASE, *GEN, f"cache_dir={tmp_path / 'cache'}", "budget=stages",
                           "budget.max_gen_request_p95_ms=60", "budget.max_embed_docs_s=1e6",
                           "budget.max_index_build_s=1e6", "budget.validate=true"]),
              tmp_path / "a")
    doc = _probes(res.run_dir)
    assert doc["validate"] and set(_status(res.run_dir).values()) == {"ok"}
    rows = {(r["kind"], r["name"]): r for r in doc["validation"]}
    gen = rows[("generate", "gen_request_p95_ms")]
    assert gen["pruned"] and gen["measured"] == pytest.approx(80.0) and not gen["wrong_prune"]
    assert rows[("embed_docs", "embed_docs_s")]["measured"] > 0
    assert rows[("index", "index_bytes")]["measured"] > 0
    assert doc["wrong_prunes"] == 0
    assert any(not c.startswith("budget-probe-") for c in CALLS)  # the pruned config ran


def test_validate_checks_the_chain_ceilings_against_the_latency_pass(compose_cfg,  # type: ignore[no-untyped-def]
                                                                    tmp_path: Path) -> None:
    # an end-to-end ceiling no search meets prunes the config on the chain probe; validation
    # runs it anyway and sets the probe's figure beside the latency pass's
    res = run(compose_cfg([*BASE, f"cache_dir={tmp_path / 'cache'}", "budget=stages",
                           "budget.max_e2e_p95_ms=0.001", "+budget.max_stage_p95_ms.retrieve=1e6",
                           "budget.validate=true"]), tmp_path / "a")
    doc = _probes(res.run_dir)
    assert set(_status(res.run_dir).values()) == {"ok"}  # pruned, yet run in full
    chain = {r["name"]: r for r in doc["validation"] if r["kind"] == "chain"}
    e2e, search = chain["e2e_p95_ms"], chain["stage_p95_ms[retrieve]"]
    latency = pq.read_table(res.run_dir / "latency.parquet").to_pylist()
    timed = [r["e2e_ms"] for r in latency if not r["warmup"]]
    assert e2e["pruned"] and not e2e["wrong_prune"] and e2e["upper"] is None
    assert e2e["measured"] == pytest.approx(float(np.percentile(timed, 95)))
    assert e2e["lower_bound_held"] is (e2e["lower"] <= e2e["measured"])
    assert not search["pruned"] and search["measured"] is not None and search["measured"] > 0
    assert doc["wrong_prunes"] == 0


def test_a_chain_prune_the_full_run_contradicts_is_a_wrong_prune() -> None:
    from bench.budget.chain import BudgetCheck
    from bench.pipeline.latency import Request
    from bench.pipeline.probe import ConfigProbe, ProbeOutcome, chain_validation_rows

    # the probe's lower bound (12) broke the 10 ms ceiling; the latency pass's p95 is 9 ms
    e2e = BudgetCheck("e2e_p95_ms", 10.0, 14.0, 12.0, True)
    stage = BudgetCheck("stage_p95_ms[rerank]", 50.0, 6.0, 5.0, False, "rerank")
    vram = BudgetCheck("peak_vram_bytes", 1e9, 2e9, 2e9, True)
    probe = ProbeOutcome({"leaf": "x"}, {"c1": ConfigProbe(
        "c1", "dense>ce@10", {}, (), None, None, (e2e, stage, vram), "x", e2e)})
    reqs = [Request("c1", "warm", 0, 0, True, 500.0, (("search", 1.0), ("rerank", 499.0)))]
    reqs += [Request("c1", f"q{i}", i + 1, 0, False, 9.0, (("search", 1.0), ("rerank", 8.0)))
             for i in range(20)]
    rows = {r["name"]: r for r in chain_validation_rows(probe, reqs)}
    assert rows["e2e_p95_ms"]["measured"] == pytest.approx(9.0)  # the warm-up left out
    assert rows["e2e_p95_ms"]["wrong_prune"] and rows["e2e_p95_ms"]["lower_bound_held"] is False
    assert rows["stage_p95_ms[rerank]"]["measured"] == pytest.approx(8.0)
    assert not rows["stage_p95_ms[rerank]"]["wrong_prune"]
    # the latency pass reads no VRAM: not measured, never called wrong
    assert rows["peak_vram_bytes"]["measured"] is None
    assert not rows["peak_vram_bytes"]["wrong_prune"]
    assert rows["peak_vram_bytes"]["within_bounds"] is None


def test_wrong_prune_is_counted() -> None:
    from bench.budget.stages import Estimate, StageCheck
    from bench.pipeline.probe_stages import StageProbe, validation_row

    # pruned on a lower bound of 90 over a limit of 85; the full run measured 80: wrong
    est = Estimate("gen_request_p95_ms", 95.0, 90.0, 99.0, "scripted")
    probe = StageProbe("generate", "g", ("k",), (est,),
                       (StageCheck("max_gen_request_p95_ms", 85.0, est),))
    row = validation_row(probe, est, 80.0)
    assert row["pruned"] and row["wrong_prune"] and row["within_bounds"] is False
    assert row["rel_error"] == pytest.approx((95.0 - 80.0) / 80.0)
    right = validation_row(probe, est, 92.0)  # measured over the limit: a right prune
    assert right["pruned"] and not right["wrong_prune"] and right["within_bounds"]


@pytest.mark.parametrize(("extra", "key"), [
    (["budget.max_gen_ttft_p95_ms=100"], "budget.max_gen_ttft_p95_ms"),
    (["budget.max_index_build_s=-1"], "budget.max_index_build_s"),
    (["budget.max_embed_docs_cost=1"], "budget.max_embed_docs_cost"),
    (["budget.probe_queries=500"], "budget.probe_queries"),
    (["budget.stated=/nonexistent/gpu_check.json"], "budget.stated"),
])
def test_bad_budget_is_one_config_error(compose_cfg, tmp_path: Path, extra: list[str],  # type: ignore[no-untyped-def]
                                        key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        run(compose_cfg([*BASE, f"cache_dir={tmp_path / 'cache'}", "budget=stages", *extra]),
            tmp_path / "a")
    assert exc.value.key == key
    assert not (tmp_path / "cache" / "chunk").exists()  # before any work


def test_plan_preview_names_the_stage_ceilings(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = run(compose_cfg([*BASE, *GEN, f"cache_dir={tmp_path / 'cache'}", "budget=stages",
                           "budget.max_embed_docs_s=10", "budget.max_index_bytes=1e9",
                           "budget.max_gen_tpot_ms=5", "plan_only=true"]), tmp_path / "a")
    lines = (res.plan_text or "").splitlines()
    embed = next(x for x in lines if "embed_docs:" in x)
    assert "pruned if over budget.max_embed_docs_s" in embed
    assert "budget.max_index_bytes" in next(x for x in lines if "index:" in x)
    assert "budget.max_gen_tpot_ms" in next(x for x in lines if "generate:" in x)
    assert not (tmp_path / "cache" / "chunk").exists()  # nothing computed


def test_rerank_ceiling_prunes_depths_before_any_candidate(compose_cfg, tmp_path: Path  # type: ignore[no-untyped-def]
                                                           ) -> None:
    res = run(compose_cfg([*BASE, f"cache_dir={tmp_path / 'cache'}", "budget=stages",
                           "reranker=maxsim", "reranker.depths=[5,10]",
                           "+budget.max_stage_p95_ms.rerank=1e-6"]), tmp_path / "a")
    doc = _probes(res.run_dir)
    rer = [p for p in doc["probes"] if p["kind"] == "rerank"]
    assert [p["depth"] for p in rer] == [5, 10] and all(p["pruned"] for p in rer)
    assert all("passage index" in p["estimates"][0]["how"] for p in rer)  # maxsim is indexed
    assert _status(res.run_dir) == {"dense": "ok", "dense>maxsim@5": "pruned",
                                    "dense>maxsim@10": "pruned"}
    assert not any(k.startswith("rerank_scores") for k in res.cache_hits)  # never scored


def test_plan_preview_keys_every_probe_as_the_run_stores_it(compose_cfg, tmp_path: Path  # type: ignore[no-untyped-def]
                                                            ) -> None:
    """plan_only lists the probes the run will make with their artifact keys; the run
    stores its probes under exactly those keys, so the next preview sees them cached."""
    from bench.cache.store import ArtifactStore

    cache = tmp_path / "cache"
    over = [*BASE, *GEN, f"cache_dir={cache}", "budget=stages", "budget.validate=true",
            "reranker=maxsim", "reranker.depths=[5,10]"]
    res = run(compose_cfg([*over, "plan_only=true"]), tmp_path / "p1")
    planned = json.loads((res.run_dir / "plan.json").read_text())["probes"]
    stages = ["probe_embed_docs", "probe_index", "probe_embed_query", "probe_rerank",
              "probe_generate"]
    assert [p["stage"] for p in planned] == stages
    assert not any(p["cached"] for p in planned) and not cache.joinpath("chunk").exists()
    text = res.plan_text or ""
    assert "probes before paying: 5 (0 cached" in text
    assert "keys assume at least probe_chunks chunks" in text  # the chunks are not cached
    rerank = next(p for p in planned if p["stage"] == "probe_rerank")
    assert len(rerank["prunes"]) == 2  # both depths' configs
    run(compose_cfg(over), tmp_path / "a")
    store = ArtifactStore(cache)
    assert all(store.lookup(p["stage"], p["key"]) is not None for p in planned)
    res2 = run(compose_cfg([*over, "plan_only=true"]), tmp_path / "p2")
    again = json.loads((res2.run_dir / "plan.json").read_text())["probes"]
    assert [(p["key"], p["cached"]) for p in again] == [(p["key"], True) for p in planned]
    assert "probes before paying: 5 (5 cached" in (res2.plan_text or "")
    assert "keys assume" not in (res2.plan_text or "")


def test_a_sweep_plan_shows_probes_its_jobs_share(tmp_path: Path) -> None:
    import subprocess
    import sys

    sweep = tmp_path / "sweep"
    out = subprocess.run(
        [sys.executable, "-m", "bench", "-m", "dataset=synthetic", "reranker=maxsim,bi_encoder",
         f"cache_dir={tmp_path / 'cache'}", "plan_only=true", "budget=stages",
         "budget.probe_queries=4", "budget.max_embed_docs_s=1000",
         "+budget.max_stage_p95_ms.rerank=1000",
         f"hydra.sweep.dir={sweep}"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = out.stdout[out.stdout.index("sweep plan: "):]
    # the corpus-pass probe reads the chunks and the embedder both jobs share: one artifact;
    # each job's reranker has its own probe
    assert ("probes before paying: 3 distinct (4 over the jobs; 1 shared by several jobs, "
            "measured once; 0 cached)") in text
    # what the whole sweep computes, each distinct node once (an empty cache: cost unknown)
    assert "to compute: ~0.0 s for the 0 uncached nodes of known cost, 17 of unknown cost" \
        in text
    embed = next(x for x in text.splitlines() if x.startswith("  embed_docs: "))
    assert "pruned if over budget.max_embed_docs_s; jobs 0, 1)" in embed
    shared = next(x for x in text.splitlines() if x.startswith("  probe_embed_docs: "))
    assert shared.endswith("jobs 0, 1)")
    merged = json.loads((sweep / "sweep_plan.json").read_text())
    assert sorted(len(p["jobs"]) for p in merged["probes"]) == [1, 1, 2]


def test_a_cached_corpus_pass_is_never_pruned(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The corpus vectors of an earlier run cost nothing: a corpus-pass ceiling neither
    shows as a pruning in the preview nor prunes them, even when the embedding probe runs
    for an index ceiling's sake (its sample vectors feed the index probe)."""
    cache = tmp_path / "cache"
    run(compose_cfg([*BASE, f"cache_dir={cache}", "budget=stages", "index=flat"]), tmp_path / "a")
    over = [*BASE, f"cache_dir={cache}", "budget=stages", "index=hnsw",
            "budget.max_embed_docs_s=1e-9", "budget.max_index_bytes=1e15"]
    res = run(compose_cfg([*over, "plan_only=true"]), tmp_path / "p")
    lines = (res.plan_text or "").splitlines()
    assert "pruned if over" not in next(x for x in lines if "embed_docs:" in x)
    assert "budget.max_index_bytes" in next(x for x in lines if "index:" in x)
    res = run(compose_cfg(over), tmp_path / "b")
    doc = _probes(res.run_dir)
    embed = next(p for p in doc["probes"] if p["kind"] == "embed_docs")
    assert embed["checks"] == [] and not embed["pruned"]
    index = next(p for p in doc["probes"] if p["kind"] == "index")
    assert index["checks"] and not index["pruned"]
    assert "pruned" not in set(_status(res.run_dir).values())
