"""Generation and judges as plan variants, on the synthetic dataset with a scripted generator
(``EchoGenerator`` below, referenced by `_target_`): answers are cached nodes, a judge-only
change never regenerates, judge statuses reach completion accounting, answer metrics reach
per_query / summary / comparisons, and retrieval values do not move."""

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

#: every request the echo generator answered, across runs: (kind, request id)
CALLS: list[tuple[str, str]] = []
_TAG = re.compile(r"\[doc:[^\]]+\]\s*")


class EchoGenerator:
    """Deterministic test double of the Generator protocol.

    Answers: the first passage of the context, cut to ``words`` words, or "I don't know" for
    queries whose number is a multiple of 3 (abstentions: faithfulness is then no_claims).
    Judge requests (a JSON schema): a valid object of the schema, except for queries whose
    number is 1 modulo 4, which always get non-JSON (the judge verdict is then invalid)."""

    def __init__(self, *, words: int = 12) -> None:
        self.words = words

    def cache_params(self) -> dict[str, object]:
        return {"backend": "echo", "model": "echo-1", "words": self.words}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    @staticmethod
    def _number(request_id: str) -> int:
        return int(re.search(r"q(\d+)", request_id).group(1))  # type: ignore[union-attr]

    def _answer(self, r: GenerationRequest) -> str:
        if self._number(r.request_id) % 3 == 0:
            return "I don't know."
        user = r.messages[-1].content
        first = user.split("Context:\n", 1)[1].split("\n\n", 1)[0]
        return " ".join(_TAG.sub("", first).split()[: self.words])

    def _judge(self, r: GenerationRequest) -> str:
        if self._number(r.request_id) % 4 == 1:
            return "not json"
        props = json.loads(r.json_schema or "{}").get("properties", {})
        if "claims" in props:
            return json.dumps({"claims": ["the answer states a fact"]})
        if "supported" in props:
            return json.dumps({"supported": [1], "unsupported": []})
        if "rating" in props:
            return json.dumps({"reason": "ok", "rating": 5})
        if "refused" in props:
            return json.dumps({"reason": "ok", "refused": True})
        if "winner" in props:  # always the first answer shown: a pure position bias
            return json.dumps({"reason": "ok", "winner": "A"})
        raise AssertionError(f"unscripted schema {sorted(props)}")

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            kind = "answer" if r.json_schema is None else "judge"
            CALLS.append((kind, r.request_id))
            text = self._answer(r) if kind == "answer" else self._judge(r)
            n = len(text.split())
            out.append(Generation(r.request_id, text, "ok", "stop", 10, n, 5.0, 1.0,
                                  5.0 + (n - 1) * 1.0, tuple(1.0 for _ in range(n - 1))))
        return out

    def close(self) -> None:
        pass


def _overrides(cache: Path, *extra: str) -> list[str]:
    return ["+experiment=quickstart", "dataset=synthetic", f"cache_dir={cache}",
            "metrics.bootstrap_resamples=100", "report.plot=false",
            "generator._target_=test_generation_plan.EchoGenerator", "judge=suite",
            "judge.judges=[faithfulness,answer_relevancy,refusal]",
            "reranker=maxsim", "reranker.depths=[10]", "generation.max_queries=12",
            *extra]


def _answers(kind: str) -> list[str]:
    return [rid for k, rid in CALLS if k == kind]


@pytest.mark.slow
def test_pairwise_judge_compares_configs_in_both_orders(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    over = [o for o in _overrides(tmp_path / "cache") if not o.startswith("judge")]
    res = run(compose_cfg([*over, "judge=pairwise"]), tmp_path / "r")
    assert res.exit_code == 0
    rj = json.loads((tmp_path / "r" / "run.json").read_text())["generation"]["configs"]
    labels = {s["label"]: s for s in rj.values()}
    base, cand = labels["dense>gen(echo-1)"], labels["dense>maxsim@10>gen(echo-1)"]
    assert base["pairwise"] is None  # the baseline is what the others are compared with
    p = cand["pairwise"]
    # 12 answered queries; "not json" for query numbers 1 mod 4 makes those pairs invalid
    pqr = pq.read_table(tmp_path / "r" / "per_query.parquet").to_pylist()
    pref = {r["query_id"]: r for r in pqr if r["metric"] == "pairwise_preference"}
    n_inv = sum(int(q.rsplit("q", 1)[1]) % 4 == 1 for q in pref)
    assert p["n_pairs"] == len(pref) == 12 and p["n_invalid"] == n_inv > 0
    assert {r["config_id"] for r in pref.values()} == {p["candidate_id"]}
    # the judge always names the first answer shown: every verdict flips with the order,
    # so position consistency is 0 and each ok pair is a tie (0.5)
    assert p["position_consistency"] == {"rate": 0.0, "numerator": 0,
                                         "denominator": 12 - n_inv}
    assert (p["wins"], p["ties"], p["losses"]) == (0, 12 - n_inv, 0)
    assert {r["value"] for r in pref.values() if r["status"] == "scored"} == {0.5}
    assert p["self_preference"] is None and "cross_generator" in p["self_preference_note"]
    report = (tmp_path / "r" / "report.md").read_text()
    assert "Pairwise judge (echo-1; orders: both, aggregation: flip_is_tie)" in report
    assert f"0.000 (0/{12 - n_inv})" in report
    assert "the judge is the run's own generator (echo-1)" in report


def test_pairwise_judge_needs_two_generated_configs(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    over = [o for o in _overrides(tmp_path / "cache")
            if not o.startswith(("judge", "reranker"))]
    with pytest.raises(ConfigError, match="judge=pairwise compares generated configs"):
        run(compose_cfg([*over, "judge=pairwise"]), tmp_path / "r")


@pytest.mark.slow
def test_generated_configs_cache_score_and_compare(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = tmp_path / "cache"
    CALLS.clear()
    res = run(compose_cfg(_overrides(cache)), tmp_path / "r1")
    assert res.exit_code == 0
    configs = pq.read_table(tmp_path / "r1" / "configs.parquet").to_pylist()
    gen = [c for c in configs if c["kind"] == "generated"]
    # one generated config per pool config: dense and dense>maxsim@10
    assert sorted(c["label"] for c in gen) == sorted([
        "dense>gen(echo-1)", "dense>maxsim@10>gen(echo-1)"])
    by_label = {c["label"]: c for c in configs}
    for c in gen:
        pool_label = c["label"].split(">gen(")[0]
        assert c["parent_config_id"] == by_label[pool_label]["config_id"]
        assert c["ttft_p50_ms"] == 5.0 and c["tpot_p95_ms"] == 1.0
    # 12 answers per generated config, each generated once
    assert len(_answers("answer")) == 2 * 12
    hits1 = res.cache_hits
    assert not any(v for k, v in hits1.items() if k.startswith(("generate[", "judge[")))

    # per_query: answer metrics over the 12 answered queries; retrieval over those with gold
    pqr = pq.read_table(tmp_path / "r1" / "per_query.parquet").to_pylist()
    g0 = gen[0]["config_id"]
    mine = [r for r in pqr if r["config_id"] == g0]
    answered = {r["query_id"] for r in mine if r["metric"] == "abstained"}
    assert len(answered) == 12
    ndcg_ids = {r["query_id"] for r in mine if r["metric"] == "ndcg@10"}
    assert len(ndcg_ids) == 18  # 24 synthetic queries, 6 unanswerable ones have no gold
    # retrieval values of a generated config equal its pool's, query by query
    pool_id = gen[0]["parent_config_id"]
    pool_vals = {(r["query_id"], r["metric"]): r["value"] for r in pqr if r["config_id"] == pool_id}
    gen_vals = {(r["query_id"], r["metric"]): r["value"] for r in mine if r["metric"] == "ndcg@10"}
    assert gen_vals == {k: v for k, v in pool_vals.items() if k[1] == "ndcg@10"}
    # statuses: abstained answers -> faithfulness no_claims; "not json" -> invalid
    faith = {r["query_id"]: r["status"] for r in mine if r["metric"] == "faithfulness"}
    for qid, st in faith.items():
        n = int(qid.rsplit("q", 1)[1])
        assert st == ("no_claims" if n % 3 == 0 else "invalid" if n % 4 == 1 else "scored")
    assert all(r["value"] is None for r in mine if r["status"] != "scored"
               and r["metric"] == "faithfulness")
    summary = pq.read_table(tmp_path / "r1" / "summary.parquet").to_pylist()
    row = next(r for r in summary if r["config_id"] == g0 and r["metric"] == "faithfulness"
               and r["scope"] == "all")
    n_nc = sum(s == "no_claims" for s in faith.values())
    n_inv = sum(s == "invalid" for s in faith.values())
    assert (row["n_expected"], row["n_no_claims"], row["n_invalid"]) == (12, n_nc, n_inv)
    assert row["n"] == row["n_scored"] == 12 - n_nc - n_inv and n_nc > 0 and n_inv > 0
    assert row["mean"] == 1.0  # every verified claim was supported
    em = next(r for r in summary if r["config_id"] == g0 and r["metric"] == "token_f1"
              and r["scope"] == "all")
    assert em["n"] > 0 and em["mean"] is not None
    # comparisons: the two generated configs paired on answer metrics
    comps = pq.read_table(tmp_path / "r1" / "comparisons.parquet").to_pylist()
    assert {"token_f1", "faithfulness"} <= {r["metric"] for r in comps
                                             if r["config_id"] in {c["config_id"] for c in gen}}
    # run.json: abstention figures and judge schema validity before retries
    rj = json.loads((tmp_path / "r1" / "run.json").read_text())
    gsum = rj["generation"]["configs"][g0]
    assert gsum["judge_calls"] > gsum["judge_schema_valid"] > 0
    assert gsum["n_must_abstain"] == sum(1 for q in answered if int(q.rsplit("q", 1)[1]) >= 18)
    report = (tmp_path / "r1" / "report.md").read_text()
    assert "## Answers and judges" in report
    # context metrics: on the answered queries with gold, at the passages of the prompt
    ctx_of = {(r["query_id"], r["metric"]): r for r in mine if r["metric"] in (
        "gold_in_context", "context_recall", "context_precision", "context_claim_recall")}
    with_gold = {q for q in answered if int(q.rsplit("q", 1)[1]) < 18}
    assert {q for q, m in ctx_of if m == "gold_in_context"} == with_gold
    for q in with_gold:
        hit, rec = ctx_of[(q, "gold_in_context")]["value"], ctx_of[(q, "context_recall")]["value"]
        assert hit == float(rec > 0) and ctx_of[(q, "context_precision")]["value"] <= hit
    assert gsum["context_passages_mean"] >= gsum["context_docs_mean"] > 0
    diag = gsum["diagnosis"]
    placed = sum(len(c["query_ids"]) for c in diag["cells"]) + len(diag["abstain_refused"]) \
        + len(diag["abstain_answered"]) + len(diag["unplaced"])
    assert placed == 12
    # every answered query is placed: the answerable ones in a cell, must-abstain ones as
    # refused or answered (an unplaced query would be a failed generation or no reference)
    assert diag["unplaced"] == []
    assert sorted(q for c in diag["cells"] for q in c["query_ids"]) == sorted(with_gold)
    hits = {q for q in with_gold if ctx_of[(q, "gold_in_context")]["value"] == 1.0}
    assert {q for c in diag["cells"] if c["context_good"] for q in c["query_ids"]} <= hits
    assert "| context | answer | queries | layer to fix | query ids |" in report
    assert "gold_in_context" in report and "unscored" in report  # no diagnostics judge here
    # judgements.parquet: one row per verdict, its failure mode read from the verdict
    jr = [r for r in pq.read_table(tmp_path / "r1" / "judgements.parquet").to_pylist()
          if r["config_id"] == g0 and r["judge"] == "faithfulness"]
    assert {r["query_id"] for r in jr} == answered
    for r in jr:
        n = int(r["query_id"].rsplit("q", 1)[1])
        assert (r["status"], r["failure_mode"]) == (
            ("no_claims", "abstained") if n % 3 == 0 else ("invalid", "schema") if n % 4 == 1
            else ("ok", ""))

    # the same run again: every answer and verdict is a cache hit
    CALLS.clear()
    res2 = run(compose_cfg(_overrides(cache)), tmp_path / "r2")
    assert CALLS == []
    assert all(v for k, v in res2.cache_hits.items() if k.startswith(("generate[", "judge[")))

    # a judge-only change: judges re-run, every answer is loaded from the cache
    CALLS.clear()
    res3 = run(compose_cfg(_overrides(
        cache, "judge.max_retries=0",
        "judge.judges=[faithfulness,answer_relevancy,refusal,diagnostics]")), tmp_path / "r3")
    assert _answers("answer") == [] and _answers("judge")
    # the diagnostics judge scores RAGChecker's shares (every echo claim is entailed by the
    # reference and the passages: correct and grounded, so all four are 0)
    pq3 = [r for r in pq.read_table(tmp_path / "r3" / "per_query.parquet").to_pylist()
           if r["metric"] == "hallucination" and r["status"] == "scored"]
    assert pq3 and {r["value"] for r in pq3} == {0.0}
    assert "unscored" not in (tmp_path / "r3" / "report.md").read_text()
    gen_hits = {k: v for k, v in res3.cache_hits.items() if k.startswith("generate[")}
    judge_hits = {k: v for k, v in res3.cache_hits.items() if k.startswith("judge[")}
    assert len(gen_hits) == 2 and all(gen_hits.values())
    assert len(judge_hits) == 2 and not any(judge_hits.values())
    # the pool configs keep their ids across the three runs
    ids = [{c["label"]: c["config_id"]
            for c in pq.read_table(tmp_path / r / "configs.parquet").to_pylist()
            if c["kind"] != "generated"} for r in ("r1", "r3")]
    assert ids[0] == ids[1]


def test_retrieval_only_run_has_no_generation(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from bench.errors import ConfigError
    from bench.pipeline.components import build_generation

    cfg = compose_cfg(["dataset=synthetic", "judge=faithfulness"])
    with pytest.raises(ConfigError) as err:
        build_generation(cfg)
    assert err.value.key == "judge"
    assert build_generation(compose_cfg(["dataset=synthetic"])) == (None, None, None, None)


def test_query_subset_is_seeded_and_covers_categories() -> None:
    from bench.data.synthetic import SyntheticDataset
    from bench.generation.stage import query_subset

    ds = SyntheticDataset(n_docs=60, n_queries=24, seed=0).load()
    a = query_subset(ds, 8, 0)
    assert a == query_subset(ds, 8, 0) and len(a) == 8
    cats = {q.query_id: q.category for q in ds.queries}
    assert {cats[i] for i in a} == set(cats.values())  # 4 categories, 2 each
    assert query_subset(ds, None, 0) == tuple(q.query_id for q in ds.queries)
    assert query_subset(ds, 8, 1) != a


def test_judge_repeats_split_query_variation_from_judge_noise(compose_cfg,  # type: ignore[no-untyped-def]
                                                              tmp_path: Path) -> None:
    """judge.repeats=3 with the deterministic echo judge: three verdicts per answer, the
    per-query value their mean (= the single verdict), zero judge noise, the split in run.json
    and report.md; and a bad repeats value is a config error before any work."""
    import json as _json

    from bench.errors import ConfigError

    res = run(compose_cfg(_overrides(tmp_path / "cache", "judge.repeats=3",
                                     "generation.kinds=[dense]")), tmp_path / "r")
    assert res.exit_code == 0
    gen = _json.loads((tmp_path / "r/run.json").read_text())["generation"]["configs"]
    (summary,) = gen.values()
    assert summary["judge_repeats"] == 3
    split = {n["metric"]: n for n in summary["judge_noise"]}
    assert split["answer_relevancy"]["judge_variance"] == 0.0
    assert split["answer_relevancy"]["n_queries"] >= 2
    assert "Judge noise: every answer judged 3 times" in (tmp_path / "r/report.md").read_text()
    once = run(compose_cfg(_overrides(tmp_path / "cache", "generation.kinds=[dense]")),
               tmp_path / "once")
    assert once.exit_code == 0

    def values(d: Path) -> dict[tuple[str, str], float | None]:
        return {(r["query_id"], r["metric"]): r["value"]
                for r in pq.read_table(d / "per_query.parquet").to_pylist()
                if r["metric"] in ("faithfulness", "answer_relevancy")}

    assert values(tmp_path / "r") == values(tmp_path / "once")
    with pytest.raises(ConfigError, match=r"judge\.repeats"):
        run(compose_cfg(_overrides(tmp_path / "c2", "judge.repeats=0")), tmp_path / "bad")
