"""The labelled judge-calibration set that ships: SQuAD 2.0's Normans article (CC BY-SA 4.0).

``dataset=squad2_calibration`` (:class:`Squad2Calibration`) loads its 39 paragraphs and 208
questions (answerable and unanswerable; ``calibration`` and ``release`` splits by paragraph)
from the files beside this module; ``labels.jsonl`` holds SQuAD 2.0's human answerability
label of each question against its own paragraph (README.md here: what the label means, the
source and the licence).

The label calibrates "does this passage answer this question?" verdicts — the
``context_relevance`` judge, or an ensemble of it — and only where the judge saw that
question's own paragraph: :func:`human_labels` turns a run's ``judge_labelling.jsonl`` into a
labels file for ``python -m bench.calibrate``, keeping an item when its context is one passage
of the question's paragraph and, for an answerable question, that passage holds one of the
annotators' answer spans (a chunk that misses the span is not what they labelled); every
other item is left out and counted by reason. Nothing is labelled by this project.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.data.base import Dataset
from bench.errors import InputError

HERE = Path(__file__).resolve().parent
#: the dataset's name (calibration records and gates check it)
NAME = "squad2-normans"
#: judge metrics the human label calibrates
CALIBRATES = ("context_relevance",)


class Squad2Calibration:
    """The shipped set; no options."""

    def load(self) -> Dataset:
        from bench.data.golden import GoldenDataset

        ds = GoldenDataset(corpus=str(HERE / "corpus.jsonl"),
                           queries=str(HERE / "queries.jsonl")).load()
        return replace(ds, name=NAME)


@dataclass(frozen=True)
class HumanLabel:
    """SQuAD 2.0's label of a question against its paragraph (README.md)."""

    query_id: str
    paragraph_id: str
    answerable: bool
    answers: tuple[str, ...]
    plausible_answers: tuple[str, ...]


def read_labels(path: str | Path = HERE / "labels.jsonl") -> dict[str, HumanLabel]:
    from bench.judge.labelling import read_jsonl

    out: dict[str, HumanLabel] = {}
    for n, obj in read_jsonl(path):
        try:
            lab = HumanLabel(str(obj["query_id"]), str(obj["paragraph_id"]),
                             bool(obj["answerable"]), tuple(obj["answers"]),
                             tuple(obj["plausible_answers"]))
        except KeyError as exc:
            raise InputError(path, n, f"missing field {exc.args[0]!r}") from None
        out[lab.query_id] = lab
    return out


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


#: why a labelling item got no human label (the counts :func:`human_labels` returns)
NOT_LABELLED = ("other_metric", "no_label", "other_passage", "span_not_in_passage",
                "not_one_passage")


def human_labels(rows: Iterable[Mapping[str, Any]],
                 labels: Mapping[str, HumanLabel] | None = None
                 ) -> tuple[list[dict[str, object]], Counter[str]]:
    """``{"item_id", "human"}`` rows for the items of a labelling file the shipped label
    applies to (module docstring), and how many items were left out, by reason."""
    labels = read_labels() if labels is None else labels
    out: list[dict[str, object]] = []
    skipped: Counter[str] = Counter()
    for r in rows:
        lab = labels.get(str(r.get("query_id")))
        passages: Sequence[Mapping[str, Any]] = r.get("context") or ()
        if r.get("rubric_judge", r.get("judge")) not in CALIBRATES or \
                r.get("metric") not in CALIBRATES:
            skipped["other_metric"] += 1
        elif lab is None:
            skipped["no_label"] += 1
        elif len(passages) != 1:
            skipped["not_one_passage"] += 1
        elif passages[0].get("doc_id") != lab.paragraph_id:
            skipped["other_passage"] += 1
        elif lab.answerable and not any(_norm(a) in _norm(str(passages[0].get("text", "")))
                                        for a in lab.answers):
            skipped["span_not_in_passage"] += 1
        else:
            out.append({"item_id": r["item_id"], "human": lab.answerable})
    return out, skipped
