"""Answer relevancy, context relevance, citations, refusal, pairwise and the suite."""

from __future__ import annotations

import json

import pytest
from scripted import ScriptedGenerator, queue

from bench.context.base import Context, ContextPassage
from bench.errors import ConfigError
from bench.generation.base import ChatMessage, GenerationRequest
from bench.judge.base import JudgeItem, PairItem, position_consistency, schema_validity
from bench.judge.citations import CitationJudge
from bench.judge.context_relevance import ContextRelevanceJudge
from bench.judge.pairwise import PairwisePreferenceJudge
from bench.judge.refusal import RefusalJudge
from bench.judge.relevancy import AnswerRelevancyJudge
from bench.judge.suite import JudgeSuite, pointwise_judges
from bench.metrics.registry import parse_metric

CTX = Context("q1", "What is X?", (
    ContextPassage("d1", 0, "X is a small cat that purrs loudly.", 1),
    ContextPassage("d2", 5, "Y is a dog.", 2),
    ContextPassage("d1", 1, "X was born in Paris.", 3),
), (ChatMessage("user", "..."),), 10, 3)


def test_every_judge_metric_is_registered() -> None:
    # RAGChecker's diagnostics are shares of failing claims, and the unsupported-number
    # verifier flags answers: lower is better
    lower = {"noise_sensitivity_relevant", "noise_sensitivity_irrelevant", "hallucination",
             "self_knowledge", "unsupported_numbers"}
    for cls in (*pointwise_judges().values(), PairwisePreferenceJudge):
        for m in cls.metrics:  # type: ignore[attr-defined]
            assert parse_metric(m).higher_is_better == (m not in lower)


def test_answer_relevancy_rating_and_bounds() -> None:
    gen = ScriptedGenerator(queue(
        json.dumps({"reason": "r", "rating": 4}),
        json.dumps({"reason": "r", "rating": 7}),  # outside 1..5: schema failure, retried
        json.dumps({"reason": "r", "rating": 1}),
    ))
    a, b = AnswerRelevancyJudge(generator=gen).judge(
        [JudgeItem("q1", "What is X?", "X is a cat."), JudgeItem("q2", "What is Y?", "Hm.")])
    assert a.score("answer_relevancy") == (4 - 1) / 4
    assert b.score("answer_relevancy") == 0.0 and b.calls[0].attempts == 2
    assert "rating" in b.calls[0].errors[0]
    schema = json.loads(gen.requests[0].json_schema or "")
    assert schema["properties"]["rating"]["maximum"] == 5
    assert schema_validity([c for v in (a, b) for c in v.calls]).rate == 1 / 2


def test_context_relevance_partition_over_passages() -> None:
    gen = ScriptedGenerator(queue(
        json.dumps({"relevant": [1], "irrelevant": [2]}),  # passage 3 omitted: rejected
        json.dumps({"relevant": [1, 3], "irrelevant": [2]}),
    ))
    items = [JudgeItem("q1", "What is X?", None, CTX), JudgeItem("q2", "?", "a", None)]
    v, empty = ContextRelevanceJudge(generator=gen).judge(items)
    assert v.status == "ok" and v.score("context_relevance") == 2 / 3
    assert json.loads(v.detail)["passages"] == [["d1", 0, True], ["d2", 5, False],
                                                ["d1", 1, True]]
    assert empty.status == "not_applicable"


def test_citations_code_checks_and_judge_partition() -> None:
    answer = (
        'X is a small cat [doc:d1]. '  # pair 1: judge
        'X "purrs very quietly" [doc:d1]. '  # quote not in d1: unsupported in code
        'X lives in Rome [doc:d9]. '  # d9 not in context: unsupported in code
        'X was born in Paris [doc:d1] [doc:d2]. '  # pairs 2, 3: judge
        'It is nice.'  # needs a citation, has none
    )
    gen = ScriptedGenerator(queue(json.dumps({"supported": [1, 2], "unsupported": [3]})))
    [v] = CitationJudge(generator=gen).judge([JudgeItem("q1", "What is X?", answer, CTX)])
    assert v.status == "ok"
    # pairs: (s0,d1)=yes (s1,d1)=quote no (s2,d9)=no (s3,d1)=yes (s3,d2)=no -> 2 of 5
    assert v.score("citation_precision") == 2 / 5
    # 5 sentences need a citation ("It is nice." has 3 words); s0 and s3 are backed
    assert v.score("citation_recall") == 2 / 5
    # distinct cited docs in the context {d1, d2} / supplied {d1, d2}
    assert v.score("citation_coverage") == 2 / 2
    prompt = gen.requests[0].messages[1].content
    assert prompt.count("Sentence:") == 3 and "[doc:d9]" not in prompt
    assert "X was born in Paris." in prompt  # tags removed from the sentence shown


def test_citations_without_any_citation_and_abstention() -> None:
    gen = ScriptedGenerator(queue())
    judge = CitationJudge(generator=gen)
    plain, refused, none_ctx = judge.judge([
        JudgeItem("q1", "?", "X is a small cat.", CTX),
        JudgeItem("q2", "?", "I don't know.", CTX),
        JudgeItem("q3", "?", "X is a cat [doc:d1].", None),
    ])
    assert plain.status == "ok" and plain.score("citation_precision") is None
    assert plain.score("citation_recall") == 0.0 and plain.score("citation_coverage") == 0.0
    rows = {r.metric: r.status for r in plain.values(judge.metrics)}
    assert rows == {"citation_precision": "not_applicable", "citation_recall": "scored",
                    "citation_coverage": "scored"}
    assert refused.status == "no_claims" and none_ctx.status == "not_applicable"
    assert gen.requests == []  # nothing needed the judge model


def test_refusal_patterns_first_then_judge() -> None:
    gen = ScriptedGenerator(queue(json.dumps({"reason": "r", "refused": True}),
                                  json.dumps({"reason": "r", "refused": False})))
    verdicts = RefusalJudge(generator=gen).judge([
        JudgeItem("q1", "?", "I don't know.", must_abstain=True),
        JudgeItem("q2", "?", "Sadly that is beyond what I was given.", must_abstain=True),
        JudgeItem("q3", "?", "X is a cat.", must_abstain=True),
        JudgeItem("q4", "?", "X is a cat.", must_abstain=False),
    ])
    assert [v.score("refusal_correct") for v in verdicts] == [1.0, 1.0, 0.0, None]
    assert [v.status for v in verdicts] == ["ok", "ok", "ok", "not_applicable"]
    assert verdicts[0].calls == () and len(gen.requests) == 2


def _pair_script(answers: dict[str, str]):  # type: ignore[no-untyped-def]
    def script(r: GenerationRequest) -> str:
        qid, order = r.request_id.split("/")[:2]
        return json.dumps({"reason": "r", "winner": answers[f"{qid}/{order}"]})
    return script


def test_pairwise_both_orders_and_position_consistency() -> None:
    gen = ScriptedGenerator(_pair_script({
        "q1/ab": "A", "q1/ba": "B",  # a both times: consistent win for a
        "q2/ab": "A", "q2/ba": "A",  # first position both times: flips -> tie
        "q3/ab": "tie", "q3/ba": "tie",  # consistent tie
        "q4/ab": "B", "q4/ba": "A",  # b both times
    }))
    items = [PairItem(f"q{i}", "?", "cfgA", "ans a", "cfgB", "ans b") for i in range(1, 5)]
    verdicts = PairwisePreferenceJudge(generator=gen).compare(items)
    assert [v.winner for v in verdicts] == ["cfgA", "tie", "tie", "cfgB"]
    assert [v.preference_a for v in verdicts] == [1.0, 0.5, 0.5, 0.0]
    assert [v.value().value for v in verdicts] == [1.0, 0.5, 0.5, 0.0]
    rate = position_consistency(verdicts)
    assert (rate.numerator, rate.denominator, rate.rate) == (3, 4, 3 / 4)
    # the second order really swaps the answers
    ab, ba = gen.requests[0].messages[1].content, gen.requests[1].messages[1].content
    assert ab.index("Answer A: ans a") < ab.index("Answer B: ans b")
    assert "Answer A: ans b" in ba


def test_pairwise_invalid_when_one_order_fails() -> None:
    ok = json.dumps({"reason": "r", "winner": "A"})
    gen = ScriptedGenerator(lambda r: "{}" if "/ba/" in r.request_id else ok)
    [v] = PairwisePreferenceJudge(generator=gen, max_retries=1).compare(
        [PairItem("q1", "?", "a", "x", "b", "y")])
    assert v.status == "invalid" and v.preference_a is None
    assert [c.attempts for c in v.calls] == [1, 2]
    assert position_consistency([v]).rate is None
    assert (v.value().value, v.value().status) == (0.0, "invalid")


def test_suite_runs_each_judge_and_validates_names() -> None:
    gen = ScriptedGenerator(queue(json.dumps({"reason": "r", "rating": 5})))
    suite = JudgeSuite(generator=gen, judges=["answer_relevancy", "refusal"])
    verdicts = suite.judge([JudgeItem("q1", "?", "X.")])
    assert [(v.judge, v.status) for v in verdicts] == [("answer_relevancy", "ok"),
                                                       ("refusal", "not_applicable")]
    assert suite.metrics == ("answer_relevancy", "refusal_correct")
    assert suite.cache_params()["suite"][0]["generator"] == {"backend": "scripted"}  # type: ignore[index]
    from omegaconf import OmegaConf

    from bench.config.build import build

    with pytest.raises(ConfigError) as err:
        build(OmegaConf.create({"_target_": "bench.judge.suite.JudgeSuite", "judges": ["x"]}),
              "judge", generator=gen)
    assert err.value.key == "judge.judges"


def test_rows_for_per_query_parquet() -> None:
    from bench.data.base import Query
    from bench.generation.base import Generation
    from bench.judge.base import judge_items

    queries = [Query("q1", "What is X?", expected_answer="a cat"),
               Query("q2", "Who?", must_abstain=True)]
    gens = [Generation("q1", "X is a cat.", "ok", "stop", 5, 4, 1.0, 1.0, 9.0),
            Generation("q2", "", "timeout", "timeout", 5, 0, None, None, 9.0)]
    items = judge_items(queries, gens, [CTX, None])
    assert items[0].answer == "X is a cat." and items[1].answer is None
    assert items[1].must_abstain and items[0].reference == "a cat"
    gen = ScriptedGenerator(queue(json.dumps({"reason": "r", "rating": 3})))
    suite = JudgeSuite(generator=gen, judges=["answer_relevancy", "refusal"])
    rows = suite.values(suite.judge(items))
    assert [(r.query_id, r.metric, r.value, r.status) for r in rows] == [
        ("q1", "answer_relevancy", 0.5, "scored"),
        ("q2", "answer_relevancy", 0.0, "error"),
        ("q1", "refusal_correct", 0.0, "not_applicable"),
        ("q2", "refusal_correct", 0.0, "error"),
    ]


def test_the_suite_finds_its_judges_by_option_file_name() -> None:
    # no second registry: conf/judge/<name>.yaml is the name
    assert set(pointwise_judges()) == {"faithfulness", "answer_relevancy", "context_relevance",
                                       "citations", "refusal", "diagnostics",
                                       # verifiers that ask no model (bench.judge.verifiers)
                                       "unsupported_numbers", "quantity_consistency",
                                       "structured_match", "nli_support"}
