"""judge=ensemble: members' votes aggregated (majority / mean, quorum), their agreement
(Krippendorff's alpha), their score distributions, and bad ensembles refused by key."""

from __future__ import annotations

import json
import re

import pytest
from scripted import ScriptedGenerator

from bench.config.build import ConfigError, OptionError, build
from bench.context.base import Context, ContextPassage
from bench.generation.base import ChatMessage, GenerationRequest
from bench.judge.base import INVALID, OK, JudgeItem
from bench.judge.ensemble import EnsembleJudge, agreement, distributions
from bench.judge.refusal import RefusalJudge
from bench.judge.stage import asks_model, judge_generator, judge_metrics, verdict_values

#: refused? per member (its sampling seed) and query; None: not JSON (invalid)
VOTES = {0: [True, True, False, False],
         1: [True, False, False, True],
         2: [True, True, False, None]}


def _script(r: GenerationRequest) -> str:
    i = int(re.search(r"q(\d+)", r.request_id).group(1))  # type: ignore[union-attr]
    vote = VOTES[r.sampling.seed][i]
    return "not json" if vote is None else json.dumps({"reason": "r", "refused": vote})


def _items(n: int = 4) -> list[JudgeItem]:
    ctx = Context("q", "question", (ContextPassage("d", 0, "text", 1),),
                  (ChatMessage("user", "..."),), 10, 1)
    return [JudgeItem(f"q{i}", f"question {i}", "Paris.", ctx, must_abstain=True)
            for i in range(n)]


def _ensemble(**kw: object) -> EnsembleJudge:
    members = [{"judge": "refusal", "seed": s, "patterns_first": False} for s in VOTES]
    opts: dict[str, object] = {"ensemble": members, "max_retries": 0, **kw}
    return EnsembleJudge(generator=ScriptedGenerator(_script), **opts)  # type: ignore[arg-type]


def test_majority_vote_with_a_tie_and_quorum() -> None:
    ens = _ensemble()
    assert ens.quorum == 2 and ens.method("refusal_correct") == "majority"  # binary score
    verdicts = ens.judge(_items())
    assert [v.judge for v in verdicts] == ["ensemble"] * 4
    # q0 3 of 3 refused, q1 2 of 3, q2 0 of 3, q3: member 2 invalid, 1 of 2 -> a tie
    assert [v.score("refusal_correct") for v in verdicts] == [1.0, 1.0, 0.0, 0.5]
    assert json.loads(verdicts[3].detail)["tie"] == ["refusal_correct"]
    members = json.loads(verdicts[3].detail)["members"]
    assert [m["status"] for m in members] == [OK, OK, INVALID]
    # every member's call is kept, named by its member
    assert [c.step.split("/")[0] for c in verdicts[0].calls] == ens.labels
    rows = verdict_values(ens, verdicts)
    assert [r.value for r in rows] == [1.0, 1.0, 0.0, 0.5]
    assert judge_metrics(ens) == {"ensemble": ("refusal_correct",)}
    assert asks_model(ens) and judge_generator(ens) is ens.members[0].generator


def test_mean_and_a_quorum_of_all_members() -> None:
    verdicts = _ensemble(aggregate="mean", quorum=3).judge(_items())
    assert [v.score("refusal_correct") for v in verdicts[:3]] == [1.0, 2 / 3, 0.0]
    # q3 has 2 scoring members < quorum 3: not a score, and invalid because a member was
    assert verdicts[3].status == INVALID and verdicts[3].scores == ()


def test_agreement_is_krippendorffs_alpha() -> None:
    ens = _ensemble()
    a = agreement(ens, ens.judge(_items()), "refusal_correct")
    assert (a.members, a.n) == (3, 4)
    # coincidences: q0 three 1s, q1 one 1 two 0s, q2 three 0s, q3 (0, 1): n = 11 values,
    # n_1 = 3 + 1 + 0 + 1 = 5, n_0 = 6; disagreeing pairs o_01 + o_10 = 2 (q1) + 2 (q3);
    # nominal alpha = 1 - (n - 1) * sum(o_ck, c != k) / sum(n_c n_k, c != k)
    assert a.alpha_approve.value == pytest.approx(1 - (11 - 1) * 4 / (2 * 5 * 6))
    assert a.alpha_score.value == pytest.approx(a.alpha_approve.value)  # 0/1 scores
    assert a.alpha_approve.ci_low is not None and a.alpha_approve.ci_high is not None
    assert a.unanimous == pytest.approx(2 / 4)  # q0, q2


def test_score_distribution_per_member_shows_the_ceiling() -> None:
    ens = _ensemble()
    dists = distributions(ens, ens.judge(_items()), "refusal_correct")
    assert [d.member for d in dists] == [*ens.labels, "ensemble"]
    first = dists[0]
    assert (first.n, first.ceiling, first.floor) == (4, 0.5, 0.5)
    assert dict(first.counts) == {"0": 2, "1": 2}
    assert dists[2].n == 3 and dists[2].ceiling == pytest.approx(2 / 3)  # one invalid
    agg = dists[3]  # 1, 1, 0 and the tie 0.5, counted in tenths
    assert (agg.n, agg.ceiling, agg.floor) == (4, 2 / 4, 1 / 4)
    assert {k: n for k, n in agg.counts if n} == {"0": 1, "0.5": 1, "1": 2}


def test_an_ensemble_of_one_is_refused_by_key() -> None:
    with pytest.raises(OptionError, match="at least 2 judges"):
        EnsembleJudge(generator=ScriptedGenerator(_script), ensemble=["refusal"])
    node = {"_target_": "bench.judge.ensemble.EnsembleJudge", "ensemble": ["refusal"]}
    with pytest.raises(ConfigError) as exc:
        build(node, "judge", generator=ScriptedGenerator(_script))
    assert exc.value.key == "judge.ensemble"


@pytest.mark.parametrize(("members", "key", "what"), [
    (["refusal", "refusal"], "judge.ensemble[1]", "repeats ensemble[0]"),
    (["refusal", "answer_relevancy"], "judge.ensemble[1].judge", "same metrics"),
    (["refusal", "unsupported_numbers"], "judge.ensemble[1].judge", "not an LLM judge"),
    (["refusal", {"judge": "refusal", "sede": 1}], "judge.ensemble[1].sede", "unknown option"),
])
def test_bad_members_name_their_key(members: list[object], key: str, what: str) -> None:
    node = {"_target_": "bench.judge.ensemble.EnsembleJudge", "ensemble": members}
    with pytest.raises(ConfigError) as exc:
        build(node, "judge", generator=ScriptedGenerator(_script))
    assert exc.value.key == key and what in str(exc.value)


def test_the_rubric_hash_moves_with_the_members() -> None:
    a, b = _ensemble(), _ensemble(aggregate="mean")
    single = RefusalJudge(generator=ScriptedGenerator(_script))
    assert a.rubric.judge == "refusal" and a.rubric.scores == single.rubric.scores
    assert len({a.rubric.digest, b.rubric.digest, single.rubric.digest}) == 3


ECHO = "generator._target_=tests.pipeline.test_generation_plan.EchoGenerator"
#: two members: the run's judge model and a second one of its own (another cache identity)
MEMBERS = ("judge.ensemble=[answer_relevancy, {judge: answer_relevancy, generator: "
           "{_target_: tests.pipeline.test_generation_plan.EchoGenerator, words: 5}}]")
GATE = "+gates=[{metric: answer_relevancy, min: 0.0}]"


def _run_overrides(cache: object, splits: object, split: str, records: object,
                   *extra: str) -> list[str]:
    return ["+experiment=quickstart", "dataset=synthetic", f"cache_dir={cache}",
            "metrics.bootstrap_resamples=100", "report.plot=false", ECHO, "judge=ensemble",
            MEMBERS, "generation.max_queries=8", f"subset.splits={splits}",
            f"subset.split={split}", f"judge.calibration.records={records}", *extra]


@pytest.mark.slow
def test_an_ensemble_runs_reports_and_calibrates_like_a_judge(  # type: ignore[no-untyped-def]
        compose_cfg, tmp_path) -> None:
    from bench.calibrate import main as calibrate_main
    from bench.data.synthetic import SyntheticDataset
    from bench.judge.labelling import LABELLING_FILE
    from bench.pipeline.run import run

    queries = SyntheticDataset(n_docs=60, n_queries=24, seed=0).load().queries
    splits = tmp_path / "splits.jsonl"
    splits.write_text("".join(json.dumps({"query_id": q.query_id,
                                          "split": "calibration" if i % 2 else "release"}) + "\n"
                              for i, q in enumerate(queries)))
    cache, records = tmp_path / "cache", tmp_path / "records"

    # an ensemble of one, and a gate on the ensemble's metric with no record: refused
    # before any work, naming the key
    with pytest.raises(ConfigError) as exc:
        run(compose_cfg([*_run_overrides(cache, splits, "release", records),
                         "judge.ensemble=[answer_relevancy]"]), tmp_path / "r0")
    assert exc.value.key == "judge.ensemble"
    with pytest.raises(ConfigError) as exc:
        run(compose_cfg(_run_overrides(cache, splits, "release", records, GATE)),
            tmp_path / "r0")
    assert exc.value.key == "gates[0].metric" and "ensemble.json" in str(exc.value)
    assert not any(p.is_file() for p in cache.rglob("*"))

    # the calibration split: the report's ensemble section, the labelling rows
    out = tmp_path / "r1"
    assert run(compose_cfg(_run_overrides(cache, splits, "calibration", records)),
               out).exit_code == 0
    report = (out / "report.md").read_text()
    assert "### Judge ensemble" in report and "0:answer_relevancy@echo-1" in report
    assert "| ensemble | answer_relevancy |" in report  # the aggregate's distribution row
    manifest = json.loads((out / "run.json").read_text())
    ens = manifest["stages"]["judge_files"]["ensemble"][0]
    assert [d["member"] for d in ens["distribution"]] == [
        "0:answer_relevancy@echo-1", "1:answer_relevancy@echo-1", "ensemble"]
    # the scripted judge rates every answer 5 (the ceiling): agreement is undefined, not 1
    assert ens["agreement"][0]["alpha_score"]["value"] is None
    assert all(d["ceiling"] == 1.0 for d in ens["distribution"] if d["n"])
    rows = [json.loads(x) for x in (out / LABELLING_FILE).read_text().splitlines()]
    assert {(r["judge"], r["rubric_judge"]) for r in rows} == {("ensemble", "answer_relevancy")}
    scored = [r for r in rows if r["status"] == "ok"]
    assert scored and {r["score"] for r in scored} == {5.0}

    # labels by construction (the loop, not a calibration): the human rates the first 1
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": r["item_id"], "human": 1 if i == 0
                                          else 5}) + "\n" for i, r in enumerate(scored)))
    assert calibrate_main([str(labels), str(out / LABELLING_FILE), "--records", str(records),
                           "--resamples", "50"]) == 0
    rec = json.loads((records / "ensemble.json").read_text())
    assert rec["judge"] == "ensemble" and rec["metrics"]["answer_relevancy"]["n"] == len(scored)
    # kappa 0 (the judge approves everything): below the default floor, above floor 0
    with pytest.raises(ConfigError, match=r"kappa 0\.000 < floor 0\.4"):
        run(compose_cfg(_run_overrides(cache, splits, "release", records, GATE)),
            tmp_path / "r2")
    assert run(compose_cfg(_run_overrides(cache, splits, "release", records, GATE,
                                          "judge.calibration.floor=0.0")),
               tmp_path / "r3").exit_code == 0
    # a record of other members (another rubric hash) is refused, naming what the hash
    # covers: an ensemble has no rubric file of its own
    (records / "ensemble.json").write_text(json.dumps({**rec, "rubric": "0" * 64}))
    with pytest.raises(ConfigError, match="recalibrate") as exc:
        run(compose_cfg(_run_overrides(cache, splits, "release", records, GATE,
                                       "judge.calibration.floor=0.0")), tmp_path / "r4")
    assert "judge.ensemble (its members' rubrics" in str(exc.value)
    assert "rubrics/ensemble.yaml" not in str(exc.value)


def test_context_relevance_can_bound_the_passage_numbers() -> None:
    from bench.judge.context_relevance import ContextRelevanceJudge

    seen: list[str | None] = []

    def script(r: GenerationRequest) -> str:
        seen.append(r.json_schema)
        return json.dumps({"relevant": [1], "irrelevant": []})

    plain = ContextRelevanceJudge(generator=ScriptedGenerator(script))
    bounded = ContextRelevanceJudge(generator=ScriptedGenerator(script), bounded=True)
    assert "partition_schema" not in plain.cache_params()  # earlier keys unchanged
    assert bounded.cache_params()["partition_schema"] == "bounded-1..n"
    assert [v.score("context_relevance") for v in bounded.judge(_items(1))] == [1.0]
    plain.judge(_items(1))
    schema = json.loads(seen[0] or "{}")["properties"]
    assert schema["relevant"]["items"]["enum"] == [1] and schema["irrelevant"]["maxItems"] == 1
    assert "enum" not in json.loads(seen[1] or "{}")["properties"]["relevant"]["items"]
