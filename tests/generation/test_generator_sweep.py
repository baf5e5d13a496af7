"""Several generators in one run (``generator=sweep``) on the synthetic dataset: one context
node per pool answered by each member, pairwise judging across them in both orders with the
comparison section, and the bad inputs refused before any work."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.errors import ConfigError
from bench.generation.base import Generation, GenerationRequest
from bench.pipeline.run import run
from tests.cli import bench, bench_in_process

#: every answer request of the scripted generator: (request id, its messages)
SEEN: list[tuple[str, tuple[object, ...]]] = []
_TAG = re.compile(r"\[doc:[^\]]+\]\s*")


class Scripted:
    """Answers with the first passage's first 8 words; as a pairwise judge it always names
    the BASELINE (shown as B in order ab, as A in order ba): position-consistent, and a pure
    preference for the first member — its own answers."""

    def cache_params(self) -> dict[str, object]:
        return {"backend": "scripted", "model": "scripted-1"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            if r.json_schema is None:
                SEEN.append((r.request_id, r.messages))
                first = r.messages[-1].content.split("Context:\n", 1)[1].split("\n\n", 1)[0]
                text = " ".join(_TAG.sub("", first).split()[:8])
            else:
                order = r.request_id.split("/")[1]
                text = json.dumps({"reason": "ok", "winner": "B" if order == "ab" else "A"})
            out.append(Generation(r.request_id, text, "ok", "stop", 10, len(text.split()),
                                  1.0, 1.0, 2.0))
        return out

    def close(self) -> None:
        pass


def _overrides(cache: Path, *extra: str) -> list[str]:
    return ["+experiment=quickstart", "dataset=synthetic", f"cache_dir={cache}",
            "metrics.bootstrap_resamples=100", "report.plot=false", "context=budgeted",
            "generator=sweep", "+generator@generator.members.scripted.generator=none",
            "generator.members.scripted.generator._target_=test_generator_sweep.Scripted",
            "+generator.members.scripted.family=scripted",
            "+generator@generator.members.extractive.generator=extractive",
            "reranker=maxsim", "reranker.depths=[10]", "generation.max_queries=12",
            "generation.kinds=[reranked]", *extra]


@pytest.mark.slow
def test_sweep_shares_the_context_and_compares_generators(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    SEEN.clear()
    res = run(compose_cfg(_overrides(tmp_path / "cache", "judge=pairwise",
                                     "judge.family=scripted")), tmp_path / "r")
    assert res.exit_code == 0
    configs = pq.read_table(tmp_path / "r" / "configs.parquet").to_pylist()
    gen = {c["label"]: c for c in configs if c["kind"] == "generated"}
    assert sorted(gen) == ["dense>maxsim@10>gen(extractive)", "dense>maxsim@10>gen(scripted)"]
    # the scripted member saw the same 12 prompts the extractive one read (one context node)
    assert len(SEEN) == 12
    rj = json.loads((tmp_path / "r" / "run.json").read_text())
    summaries = rj["generation"]["configs"]
    cand = summaries[gen["dense>maxsim@10>gen(extractive)"]["config_id"]]
    base = summaries[gen["dense>maxsim@10>gen(scripted)"]["config_id"]]
    assert base["pairwise"] is None and cand["generator"] == "extractive"
    p = cand["pairwise"]
    # the judge always names the baseline in both orders: every ok pair a consistent loss
    assert (p["wins"], p["ties"], p["losses"]) == (0, 0, p["n_ok"]) and p["n_ok"] == 12
    assert p["position_consistency"]["rate"] == 1.0
    table = pq.read_table(tmp_path / "r" / "generator_pairs.parquet").to_pylist()
    (row,) = table
    assert (row["losses"], row["judge_own_side"]) == (12, "baseline")
    assert row["loss_ci_low"] < 1.0 == row["loss_ci_high"]  # Wilson for 12/12
    # reference-anchored self-preference, by arithmetic from the per-query token_f1 values
    pqr = pq.read_table(tmp_path / "r" / "per_query.parquet").to_pylist()

    def q(cid: str) -> dict[str, float]:
        """token_f1, else claims_coverage; abstained on the must-abstain queries (>= q18)."""
        rows = {(r["query_id"], r["metric"]): r["value"] for r in pqr
                if r["config_id"] == cid and r["status"] == "scored"}
        got = {}
        for qid in {k for k, _ in rows}:
            order = (("abstained",) if int(qid.rsplit("q", 1)[1]) >= 18
                     else ("token_f1", "claims_coverage"))
            vals = [rows[qid, m] for m in order if (qid, m) in rows]
            if vals:
                got[qid] = vals[0]
        return got

    qs, qe = q(base["config_id"]), q(cand["config_id"])
    diffs = [1.0 - (1.0 if qs[k] > qe[k] else 0.5 if qs[k] == qe[k] else 0.0)
             for k in qs if k in qe]
    assert row["self_preference_ref_n"] == len(diffs) > 0
    assert row["self_preference_ref"] == pytest.approx(sum(diffs) / len(diffs))
    # the diagnosis across generators: one row per answered query, classes counted
    diag = pq.read_table(tmp_path / "r" / "generator_diagnosis.parquet").to_pylist()
    assert len(diag) == 12 and {d["class"] for d in diag} <= {"all_good", "model", "context",
                                                              "unplaced"}
    for d in diag:
        assert (d["class"] == "model") == (len(d["failed"]) == 1)
        assert (d["class"] == "context") == (len(d["failed"]) == 2)
    manifest = rj["stages"]["generator_compare"]
    assert sum(manifest["diagnosis"].values()) == 12
    # the labelling file pairs each candidate answer with ITS baseline's (the scripted one)
    scripted = {rid: " ".join(_TAG.sub("", m[-1].content.split("Context:\n", 1)[1]  # type: ignore[attr-defined]
                                       .split("\n\n", 1)[0]).split()[:8])
                for rid, m in SEEN}
    labelling = [json.loads(x) for x in
                 (tmp_path / "r" / "judge_labelling.jsonl").read_text().splitlines()]
    pairs = [r for r in labelling if "answer_b" in r and r.get("answer_b") is not None]
    assert len(pairs) == 12
    assert all(r["answer_b"] == scripted[r["query_id"]] for r in pairs)
    report = (tmp_path / "r" / "report.md").read_text()
    assert "## Generators compared on the same contexts" in report
    assert "scripted (family scripted)" in report and "extractive (family extractive, by name)" \
        in report


def test_single_generator_plans_keep_their_ids(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A sweep's first context node is the one its first member alone would make."""
    from bench.pipeline.run import prepare

    over = [o for o in _overrides(tmp_path / "cache") if "members" not in o
            and o != "generator=sweep"]
    single = prepare(compose_cfg([*over, "generator=extractive", "plan_only=true"]))
    sweep = prepare(compose_cfg([*over, "generator=sweep", "plan_only=true",
                                 "+generator@generator.members.x.generator=extractive",
                                 "+generator@generator.members.y.generator=extractive",
                                 "generator.members.y.generator.max_sentences=2"]))
    one = [c for c in single.plan.configs if c.answers is not None]
    two = [c for c in sweep.plan.configs if c.answers is not None]
    assert len(one) == 1 and len(two) == 2
    ctx = {c.answers.input("contexts").key for c in two}
    assert ctx == {one[0].answers.input("contexts").key}
    # the first member's answers are the single run's node: shared in the cache
    assert two[0].answers.key == one[0].answers.key
    assert [c.label for c in two] == ["dense>maxsim@10>gen(x)", "dense>maxsim@10>gen(y)"]


def test_a_member_may_decode_differently(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The same model with another decoding is another member: its own sampling, one context."""
    from bench.generation.stage import GenerateOp
    from bench.pipeline.run import prepare

    over = [o for o in _overrides(tmp_path / "cache") if "members" not in o]
    p = prepare(compose_cfg([*over, "plan_only=true",
                             "+generator@generator.members.greedy.generator=extractive",
                             "+generator@generator.members.hot.generator=extractive",
                             "+generator.members.hot.sampling.temperature=0.7",
                             "+generator.members.hot.sampling.seed=3"]))
    gen = [c for c in p.plan.configs if c.answers is not None]
    ops = [c.answers.op for c in gen]
    assert all(isinstance(op, GenerateOp) for op in ops)
    assert [(op.sampling.temperature, op.sampling.seed) for op in ops] == [(0.0, 0), (0.7, 3)]
    assert ops[0].sampling.max_tokens == ops[1].sampling.max_tokens  # the rest: generation.*
    assert len({c.answers.input("contexts").key for c in gen}) == 1


BAD_SWEEPS = [
    (["+generator@generator.members.only.generator=extractive", "judge=pairwise"],
     "generator.members"),
    ([], "generator.members"),  # a sweep without members
    (["+generator@generator.members.a.generator=extractive",
      "+generator@generator.members.b.generator=extractive"], "generator.members.b.generator"),
    (["+generator@generator.members.a.generator=extractive",
      "+generator.members.a.familly=x"], "generator.members.a.familly"),
    (["+generator@generator.members.a.generator=extractive",
      "+generator.members.a.sampling.temprature=1"], "generator.members.a.sampling.temprature"),
    (["+generator@generator.members.a.generator=extractive",
      "+generator.members.a.sampling.top_p=0"], "generator.members.a.sampling.top_p"),
    (["+generator@generator.members.a.generator=extractive", "generation.memo=true",
      "+generator.members.a.sampling.temperature=0.5"],
     "generator.members.a.sampling.temperature"),
]


@pytest.mark.parametrize(("args", "key"), BAD_SWEEPS)
def test_bad_sweeps_are_one_line_exit_2(args: list[str], key: str, tmp_path: Path) -> None:
    run = bench if args == BAD_SWEEPS[0][0] else bench_in_process  # tests/cli.py
    res = run("dataset=synthetic", f"cache_dir={tmp_path}/cache", f"hydra.run.dir={tmp_path}/r",
              "context=budgeted", "generator=sweep", *args)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.npy"))


def test_pairwise_without_two_generated_configs_names_the_sweep(compose_cfg,  # type: ignore[no-untyped-def]
                                                                tmp_path: Path) -> None:
    over = [o for o in _overrides(tmp_path / "cache") if "members" not in o
            and o != "generator=sweep"]
    with pytest.raises(ConfigError, match="generator=sweep"):
        run(compose_cfg([*over, "generator=extractive", "judge=pairwise"]), tmp_path / "r")
