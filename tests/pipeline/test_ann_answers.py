"""Answers on an ANN sweep: ``generation.exact_reference`` adds the exact pool as the first
config (same id in every job, equal to the flat job's own config), ids of everything else do
not move, ``generation.memo`` answers identical prompts once, and the run and sweep reports
hold the "What ANN recall costs in answers" table (on the synthetic dataset with the scripted
``EchoGenerator`` of test_generation_plan)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.pipeline.components import build_components
from bench.pipeline.plan import EXACT_REFERENCE_LABEL, Plan, plan
from bench.pipeline.run import generation_settings, run
from bench.pipeline.settings import run_settings

ECHO = "generator._target_=test_generation_plan.EchoGenerator"


def _base(*extra: str) -> list[str]:
    return ["dataset=synthetic", ECHO, "generation.kinds=[dense]", "generation.max_queries=8",
            "index=ivf_flat", "index.nlist=4", "index.query_params=[{nprobe: 1},{nprobe: 4}]",
            *extra]


def _plan(compose_cfg, overrides: list[str]) -> Plan:  # type: ignore[no-untyped-def]
    cfg = compose_cfg(overrides)
    comps = build_components(cfg, "cpu")
    dataset = comps.source.load()
    return plan(comps, dataset, device="cpu", relevance_level=1,
                generation=generation_settings(run_settings(cfg), comps, dataset))


def _ids(p: Plan) -> dict[str, str]:
    return {c.label: c.config_id for c in p.configs}


def test_exact_reference_is_first_shared_and_moves_no_other_id(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    off = _plan(compose_cfg, _base())
    on = _plan(compose_cfg, _base("generation.exact_reference=true"))
    first = on.configs[0]
    assert (first.label, first.kind, dict(first.params)) == (
        EXACT_REFERENCE_LABEL, "dense", {"exact_reference": True})
    gen = [c for c in on.configs if c.kind == "generated"]
    assert gen[0].parent_id == first.config_id and gen[0].pool is first.leaf
    # the exact pool's chain: a flat faiss index over the same document embeddings
    index = next(n for n in first.chain if n.stage == "index")
    assert index.op.index.factory == "Flat" and index.inputs[0].key == on.embed_docs.key
    # every other config keeps its id; the reference only adds configs
    ids_on = _ids(on)
    assert {k: v for k, v in ids_on.items() if "exact" not in k} == _ids(off)
    assert len(on.configs) == len(off.configs) + 2
    # the same reference (pool and answers) in another job (HNSW), and it IS the flat job's
    # own dense config
    hnsw = _plan(compose_cfg, ["dataset=synthetic", ECHO, "generation.kinds=[dense]",
                               "generation.max_queries=8", "index=hnsw",
                               "generation.exact_reference=true"])
    assert hnsw.configs[0].config_id == first.config_id
    assert next(c for c in hnsw.configs if c.kind == "generated").config_id == gen[0].config_id
    flat = _plan(compose_cfg, ["dataset=synthetic", ECHO, "generation.kinds=[dense]",
                               "generation.max_queries=8", "index=flat",
                               "generation.exact_reference=true"])
    assert [c.config_id for c in flat.configs] == [first.config_id, gen[0].config_id]
    # the memo flag changes no node key
    memo = _plan(compose_cfg, _base("generation.exact_reference=true", "generation.memo=true"))
    assert [n.key for n in memo.nodes()] == [n.key for n in on.nodes()]
    # no generator: nothing is added
    bare = _plan(compose_cfg, ["dataset=synthetic", "index=ivf_flat", "index.nlist=4",
                               "generation.exact_reference=true"])
    assert all(c.label != EXACT_REFERENCE_LABEL for c in bare.configs)


def test_answerable_only_subset(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench.data.synthetic import SyntheticDataset
    from bench.generation.stage import query_subset

    ds = SyntheticDataset(n_docs=60, n_queries=24, seed=0).load()
    must = {q.query_id for q in ds.queries if q.must_abstain}
    assert must and set(query_subset(ds, 8, 0)) & must  # round robin reaches them
    sub = query_subset(ds, 8, 0, answerable_only=True)
    assert len(sub) == 8 and not set(sub) & must
    assert set(query_subset(ds, None, 0, answerable_only=True)) == {
        q.query_id for q in ds.queries} - must


@pytest.mark.slow
def test_ann_answers_run_and_sweep_reports(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from test_generation_plan import CALLS

    from bench.report.sweep import write_sweep_report

    cache = tmp_path / "cache"
    common = [f"cache_dir={cache}", "metrics.bootstrap_resamples=200", "report.plot=false",
              "judge=faithfulness", "judge.max_retries=0", "generation.exact_reference=true",
              "generation.memo=true", "generation.answerable_only=true"]
    sweep = tmp_path / "sweep"
    CALLS.clear()
    res = run(compose_cfg([*_base(), *common]), sweep / "0")
    assert res.exit_code == 0
    d0 = sweep / "0"
    configs = pq.read_table(d0 / "configs.parquet").to_pylist()
    assert configs[0]["label"] == EXACT_REFERENCE_LABEL
    gen = [c for c in configs if c["kind"] == "generated"]
    ref = gen[0]["config_id"]
    assert gen[0]["parent_config_id"] == configs[0]["config_id"]
    rj = json.loads((d0 / "run.json").read_text())
    assert rj["generation"]["exact_reference"] == ref and rj["generation"]["memo"] is True
    # every ANN setting's answers are paired against the exact answers
    comps = pq.read_table(d0 / "comparisons.parquet").to_pylist()
    f1 = [c for c in comps if c["metric"] == "token_f1" and c["scope"] == "all"]
    assert {c["baseline_config_id"] for c in f1} == {ref}
    assert {c["config_id"] for c in f1} == {g["config_id"] for g in gen[1:]}
    # memo: 3 generated configs x 8 queries, each distinct prompt generated once; nprobe=4
    # probes all 4 lists of the index (exact), so it asks the exact prompts: all memo hits
    answers = [rid for kind, rid in CALLS if kind == "answer"]
    memo = {g["config_id"]: rj["generation"]["configs"][g["config_id"]]["memo"] for g in gen}
    assert sum(m[0] + m[1] for m in memo.values()) == 3 * 8
    assert len(answers) == sum(m[1] for m in memo.values()) < 3 * 8
    exact4 = next(g for g in gen if g["label"].startswith("dense(nprobe=4)"))
    assert memo[exact4["config_id"]][:2] == [8, 0] and memo[exact4["config_id"]][2] > 0
    assert memo[exact4["config_id"]][3] == 0  # its verdicts too: every judge call a hit
    # a memo hit is exactly what was generated: the nprobe=4 answers equal the exact ones
    pqr = pq.read_table(d0 / "per_query.parquet").to_pylist()

    def vals(cid: str, metric: str) -> dict[str, float | None]:
        return {r["query_id"]: r["value"] for r in pqr
                if r["config_id"] == cid and r["metric"] == metric}

    assert vals(exact4["config_id"], "token_f1") == vals(ref, "token_f1")
    report = (d0 / "report.md").read_text()
    assert "## What ANN recall costs in answers" in report
    assert "| dense(exact)>gen(echo-1) `" + ref + "`" in report and "reference" in report
    assert "Prompt memo" in report

    # the flat job: its own dense config IS the reference (same id), answers from the cache
    CALLS.clear()
    res1 = run(compose_cfg(["dataset=synthetic", ECHO, "generation.kinds=[dense]",
                            "generation.max_queries=8", "index=flat", *common]), sweep / "1")
    assert res1.exit_code == 0 and CALLS == []
    flat = pq.read_table(sweep / "1" / "configs.parquet").to_pylist()
    assert [c["config_id"] for c in flat] == [configs[0]["config_id"], ref]

    # the sweep report pairs across jobs on the reference's per-query values
    write_sweep_report(sweep)
    text = (sweep / "sweep_report.md").read_text()
    assert "## What ANN recall costs in answers" in text
    rows = pq.read_table(sweep / "sweep_ann_answers.parquet").to_pylist()
    assert [r["config_id"] for r in rows] == [g["config_id"] for g in gen]
    assert rows[0]["is_reference"] and rows[0]["jobs"] == "0, 1"
    assert rows[0]["token_f1_delta"] is None
    # the same paired bootstrap as the run's own comparisons (Holm differs only with more
    # configs; here the same two are compared)
    for r in rows[1:]:
        c = next(x for x in f1 if x["config_id"] == r["config_id"])
        assert (r["token_f1_delta"], r["token_f1_delta_ci_low"], r["token_f1_delta_ci_high"],
                r["token_f1_n_paired"], r["token_f1_p_holm"]) == pytest.approx(
            (c["delta"], c["ci_low"], c["ci_high"], c["n"], c["p_holm"]))
        assert r["ann_recall_at_10_answered"] is not None
    # Echo: "I don't know" (no claims) for query numbers divisible by 3, non-JSON verdicts
    # for numbers 1 modulo 4 (invalid); every other answer scored
    assert rows[1]["faithfulness_no_claims"] > 0 and rows[1]["faithfulness_invalid"] > 0
    assert (rows[1]["faithfulness_n"] + rows[1]["faithfulness_no_claims"]
            + rows[1]["faithfulness_invalid"]) == 8
    assert "invalid=" in text
    # a job without a reference leaves the section out
    shutil.rmtree(sweep / "0")
    (sweep / "1" / "run.json").write_text(json.dumps({**json.loads(
        (sweep / "1" / "run.json").read_text()), "generation": None}))
    write_sweep_report(sweep)
    assert "What ANN recall costs" not in (sweep / "sweep_report.md").read_text()
