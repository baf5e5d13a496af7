"""Rubrics as data: the prompts every shipped judge sends are byte-identical to the ones its
module held before the move to conf/judge/rubrics/, and an incomplete rubric is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.errors import InputError
from bench.judge.citations import CitationJudge
from bench.judge.context_relevance import ContextRelevanceJudge
from bench.judge.diagnostics import GeneratorDiagnosticsJudge
from bench.judge.faithfulness import FaithfulnessJudge
from bench.judge.pairwise import PairwisePreferenceJudge
from bench.judge.refusal import RefusalJudge
from bench.judge.relevancy import AnswerRelevancyJudge
from bench.judge.rubric import RUBRIC_DIR, load_rubric, rubric

#: each judge's ``prompts`` as the modules held them at cbe9cca (before the rubric files)
BEFORE = json.loads((Path(__file__).parent / "data" / "prompts_before_rubrics.json").read_text())
JUDGES = {"faithfulness": FaithfulnessJudge, "answer_relevancy": AnswerRelevancyJudge,
          "context_relevance": ContextRelevanceJudge, "citations": CitationJudge,
          "refusal": RefusalJudge, "diagnostics": GeneratorDiagnosticsJudge,
          "pairwise": PairwisePreferenceJudge}


@pytest.mark.parametrize("name", sorted(JUDGES))
def test_prompts_are_byte_identical_to_before(name: str) -> None:
    assert list(JUDGES[name].prompts) == BEFORE[name]
    # and each judge's metrics have score definitions in its rubric
    rubric(name).check(JUDGES[name].metrics, ())


def test_every_shipped_rubric_defines_every_level() -> None:
    for path in sorted(RUBRIC_DIR.glob("*.yaml")):
        r = load_rubric(path)
        assert r.judge == path.stem and len(r.digest) == 64
        for s in r.scores:
            assert s.definition and s.levels


def _copy(tmp_path: Path, name: str = "answer_relevancy") -> Path:
    return Path(shutil.copy(RUBRIC_DIR / f"{name}.yaml", tmp_path / f"{name}.yaml"))


def test_missing_score_definition_names_file_and_key(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    path.write_text(path.read_text().replace("      4: addresses it with gaps or detours\n", ""))
    with pytest.raises(InputError, match=r"answer_relevancy.yaml: "
                                         r"scores.answer_relevancy.levels.4: missing score"):
        load_rubric(path)
    path = _copy(tmp_path, "refusal")
    text = path.read_text()
    path.write_text(text[:text.index("scores:")] + "scores:\n  other:\n    kind: binary\n"
                    "    definition: x\n    levels: {0: kept, 1: declined}\n    approve_at: 1\n")
    with pytest.raises(InputError, match=r"scores\.refusal_correct: missing score definition"):
        load_rubric(path).check(("refusal_correct",), ())


def test_digest_moves_with_a_definition_not_with_a_comment(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    base = load_rubric(path).digest
    assert base == rubric("answer_relevancy").digest
    path.write_text("# a comment\n" + path.read_text())
    assert load_rubric(path).digest == base
    path.write_text(path.read_text().replace("partly addresses it", "partly answers it"))
    assert load_rubric(path).digest != base
