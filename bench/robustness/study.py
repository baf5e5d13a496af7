"""``robustness``: the robustness study after a run (``+experiment=robustness``).

In: the run's dataset and embedder, the study's own generator (``robustness.generator``, a
generator block: the run itself stays retrieval-only), the options below.
Out: ``<run>/robustness/``: ``cases.jsonl`` (every case with its context or planted cluster:
the generated set, reloadable), ``outcomes.parquet`` (one row per answered case),
``poison_retrieval.parquet`` (one row per poisoning query), ``robustness.json`` and
``robustness.md`` (the tables, also logged).

Retrieval here is document level and exact: every corpus document (``<title>\\n<text>``) and
every planted passage encoded once by the run's embedder, cosine top-k. Poisoned corpora are
the clean corpus plus every attacked query's cluster of one kind (mono and poly are planted
in two separate corpora over the same queries, so they are paired). The undefended system's
top-k is what the generator sees; the token-overlap filter (``bench.robustness.overlap``) is
measured on the same top-k.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.config.build import OptionError
from bench.data.base import Dataset
from bench.data.jsonl import write_jsonl
from bench.embedding.base import Embedder
from bench.errors import ConfigError
from bench.generation.base import (
    ChatMessage,
    GenerationRequest,
    Generator,
    SamplingParams,
    generator_name,
)
from bench.metrics.answer import AbstentionDetector
from bench.robustness.base import (
    CASE_TYPES,
    GENERATION_FAILED,
    POISON_TYPES,
    Case,
    CaseOutcome,
    Passage,
)
from bench.robustness.cases import CaseOptions, build_cases, passage_text
from bench.robustness.outcomes import classify
from bench.robustness.overlap import flagged
from bench.robustness.report import PoisonRow, TypeRow, markdown, type_rows, wilson

log = logging.getLogger("bench")

SCHEMA_VERSION = 1
SYSTEM = ("Answer the question using only the numbered passages. If the passages do not "
          "contain the answer, reply exactly: I don't know.")
_TERM = "Answer with the term only."
_YES_NO = "Answer yes or no."

OUTCOME_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("case_type", pa.string()), ("source_query_id", pa.string()),
    ("outcome", pa.string()), ("answer", pa.string()), ("status", pa.string()),
    ("attacked", pa.bool_()), ("poisoned_in_top_k", pa.int32()), ("caught", pa.int32()),
    ("clean_removed", pa.int32()), ("poisoned_after_filter", pa.int32()),
    ("e2e_ms", pa.float64()),
], metadata={"schema_version": str(SCHEMA_VERSION)})
RETRIEVAL_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("case_type", pa.string()), ("attacked", pa.bool_()),
    ("top_k_doc_ids", pa.list_(pa.field("element", pa.string()))), ("own_planted", pa.int32()),
    ("any_planted", pa.int32()), ("caught", pa.int32()), ("clean_removed", pa.int32()),
    ("own_planted_after_filter", pa.int32()),
], metadata={"schema_version": str(SCHEMA_VERSION)})


@dataclass(frozen=True)
class Retrieved:
    """One poisoning query's retrieval: the top-k and what the filter did to it."""

    case: Case
    top_k: tuple[Passage, ...]
    removed: frozenset[str]

    @property
    def own(self) -> int:
        own = {p.doc_id for p in self.case.planted}
        return sum(p.doc_id in own for p in self.top_k)

    @property
    def any_planted(self) -> int:
        return sum(p.planted for p in self.top_k)

    @property
    def caught(self) -> int:
        return sum(p.planted and p.doc_id in self.removed for p in self.top_k)

    @property
    def clean_removed(self) -> int:
        return sum(not p.planted and p.doc_id in self.removed for p in self.top_k)

    @property
    def own_after(self) -> int:
        own = {p.doc_id for p in self.case.planted}
        return sum(p.doc_id in own and p.doc_id not in self.removed for p in self.top_k)


@dataclass(frozen=True)
class RobustnessResult:
    types: tuple[TypeRow, ...]
    poison: tuple[PoisonRow, ...]
    lines: tuple[str, ...]
    wall_s: float


class RobustnessStudy:
    """Options (``robustness.*``): ``cases`` (case types, ``base.CASE_TYPES``), ``n`` cases per
    type answered, ``n_poison`` poisoning queries per kind (retrieval level), ``cluster_size``
    planted passages per attacked query, ``poison_rate`` (share of poisoning queries attacked,
    in (0, 1]), ``as_of`` (ISO date answers must hold at when a query has none), ``top_k``
    passages retrieved, ``overlap_threshold`` (the filter's Jaccard), ``passage_words``
    (words of a passage shown to the generator), ``max_tokens`` of an answer, ``confidence``
    of the intervals, ``seed``."""

    def __init__(self, *, cases: list[str] | None = None, n: int = 25, n_poison: int = 200,
                 cluster_size: int = 5, poison_rate: float = 1.0, as_of: str = "2026-01-01",
                 top_k: int = 5, overlap_threshold: float = 0.8, passage_words: int = 120,
                 max_tokens: int = 24, confidence: float = 0.95, seed: int = 0) -> None:
        cases = list(CASE_TYPES) if cases is None else cases
        unknown = [c for c in cases if c not in CASE_TYPES]
        if unknown:
            raise OptionError("cases", f"unknown case type {unknown[0]!r}; known: "
                              f"{', '.join(CASE_TYPES)}")
        if not cases or len(set(cases)) != len(cases):
            raise OptionError("cases", "list each case type once, at least one")
        for key, v, low in (("n", n, 1), ("n_poison", n_poison, 1), ("top_k", top_k, 1),
                            ("cluster_size", cluster_size, 2), ("max_tokens", max_tokens, 1),
                            ("passage_words", passage_words, 8)):
            if v < low:
                raise OptionError(key, f"must be >= {low}, got {v}")
        if not 0 < poison_rate <= 1:
            raise OptionError("poison_rate", f"must be in (0, 1], got {poison_rate}")
        if not 0 < overlap_threshold <= 1:
            raise OptionError("overlap_threshold", f"must be in (0, 1], got {overlap_threshold}")
        if not 0 < confidence < 1:
            raise OptionError("confidence", f"must be in (0, 1), got {confidence}")
        try:
            dt.date.fromisoformat(as_of)
        except ValueError:
            raise OptionError("as_of", f"not an ISO date (YYYY-MM-DD): {as_of!r}") from None
        self.opts = CaseOptions(cases=tuple(cases), n=n, n_poison=max(n_poison, n),
                                cluster_size=cluster_size, poison_rate=poison_rate,
                                as_of=as_of, seed=seed)
        self.top_k, self.threshold = top_k, overlap_threshold
        self.passage_words, self.max_tokens = passage_words, max_tokens
        self.confidence = confidence

    def run(self, ds: Dataset, embedder: Embedder, generator: Generator,
            out_dir: Path) -> RobustnessResult:
        t0 = time.perf_counter()
        out_dir.mkdir(parents=True, exist_ok=True)
        cases = build_cases(ds, self.opts)
        log.info("robustness: %d cases over %s (%s)", len(cases), ds.name,
                 ", ".join(f"{t} {sum(c.case_type == t for c in cases)}"
                           for t in self.opts.cases))
        retrieved = self._retrieve(ds, embedder, cases)
        cases = [self._incomplete(c, retrieved) if c.case_type == "incomplete_context" else c
                 for c in cases]
        write_jsonl(out_dir / "cases.jsonl", (dataclasses.asdict(c) for c in cases))
        asked = self._asked(cases)
        outcomes = self._answer(asked, retrieved, generator)
        poison = self._poison_rows(retrieved, outcomes)
        types = type_rows(outcomes, self.confidence)
        name = generator_name(generator)
        lines = markdown(types, poison, generator=name, plumbing="smollm2" in name,
                         top_k=self.top_k, threshold=self.threshold,
                         confidence=self.confidence)
        wall = time.perf_counter() - t0
        lines.append("")
        lines.append(f"Study wall time {wall:.1f} s (in-process, after the run).")
        self._write(out_dir, outcomes, retrieved, types, poison, lines)
        return RobustnessResult(tuple(types), tuple(poison), tuple(lines), wall)

    # ---------------------------------------------------------------- retrieval
    def _retrieve(self, ds: Dataset, embedder: Embedder, cases: Sequence[Case]
                  ) -> dict[str, Retrieved]:
        """Top-k of the incomplete-context and poisoning cases (key: case id)."""
        wanted = [c for c in cases if c.case_type == "incomplete_context"
                  or c.case_type in POISON_TYPES]
        if not wanted:
            return {}
        docs = [Passage(d.doc_id, passage_text(d)) for d in ds.documents]
        d_emb = _encode(embedder, [p.text for p in docs], "document")
        questions = sorted({c.question for c in wanted})
        q_emb = dict(zip(questions, _encode(embedder, questions, "query"), strict=True))
        out: dict[str, Retrieved] = {}
        gold_skip = max((len(c.gold_doc_ids) for c in wanted), default=0)
        for c in (c for c in wanted if c.case_type == "incomplete_context"):
            top = _top(q_emb[c.question], d_emb, self.top_k + gold_skip)
            kept = tuple(docs[i] for i in top if docs[i].doc_id not in c.gold_doc_ids)
            out[c.case_id] = Retrieved(c, kept[:self.top_k], frozenset())
        for kind in POISON_TYPES:
            mine = [c for c in wanted if c.case_type == kind]
            planted = [p for c in mine for p in c.planted]
            texts = sorted({p.text for p in planted})  # a repeated text is encoded once
            p_vec = dict(zip(texts, _encode(embedder, texts, "document"), strict=True))
            pool = docs + planted
            emb = np.vstack([d_emb, *(p_vec[p.text][None, :] for p in planted)]) \
                if planted else d_emb
            for c in mine:
                top_k = tuple(pool[i] for i in _top(q_emb[c.question], emb, self.top_k))
                removed = flagged({p.doc_id: p.text for p in top_k}, self.threshold)
                out[c.case_id] = Retrieved(c, top_k, frozenset(removed))
        return out

    def _incomplete(self, c: Case, retrieved: Mapping[str, Retrieved]) -> Case:
        return dataclasses.replace(c, context=retrieved[c.case_id].top_k)

    def _asked(self, cases: Sequence[Case]) -> list[Case]:
        """What is answered: every case but poisoning, whose first ``n`` ATTACKED queries per
        kind are answered (the rest are measured at retrieval level only)."""
        out, taken = [], dict.fromkeys(POISON_TYPES, 0)
        for c in cases:
            if c.case_type in POISON_TYPES:
                if not c.attacked or taken[c.case_type] >= self.opts.n:
                    continue
                taken[c.case_type] += 1
            out.append(c)
        return out

    # ---------------------------------------------------------------- generation
    def _prompt(self, c: Case, context: Sequence[Passage]) -> tuple[ChatMessage, ...]:
        blocks = []
        for i, p in enumerate(context, start=1):
            words = p.text.split(" ")
            text = " ".join(words[:self.passage_words]) + (" ..." if len(words) >
                                                           self.passage_words else "")
            blocks.append(f"[{i}] {p.label + ' ' if p.label else ''}{text}")
        today = f"Today is {c.as_of}. " if c.as_of else ""
        user = ("Passages:\n" + "\n\n".join(blocks) + f"\n\n{today}Question: {c.question}\n"
                + (_YES_NO if c.yes_no else _TERM))
        return ChatMessage("system", SYSTEM), ChatMessage("user", user)

    def _answer(self, cases: Sequence[Case], retrieved: Mapping[str, Retrieved],
                generator: Generator) -> list[CaseOutcome]:
        detector = AbstentionDetector()
        sampling = SamplingParams(max_tokens=self.max_tokens, temperature=0.0,
                                  seed=self.opts.seed)
        contexts = [retrieved[c.case_id].top_k if c.case_type in POISON_TYPES else c.context
                    for c in cases]
        requests = [GenerationRequest(c.case_id, self._prompt(c, ctx), sampling)
                    for c, ctx in zip(cases, contexts, strict=True)]
        log.info("robustness: answering %d cases", len(requests))
        gens = generator.generate(requests)
        out = []
        for c, g in zip(cases, gens, strict=True):
            r = retrieved.get(c.case_id) if c.case_type in POISON_TYPES else None
            ok = g.status == "ok"
            out.append(CaseOutcome(
                c.case_id, c.case_type, c.source_query_id,
                classify(c, g.text, detector) if ok else GENERATION_FAILED,
                g.text if ok else None, g.status if ok else f"{g.status}: {g.error or ''}",
                c.attacked, r.own if r else None, r.caught if r else None,
                r.clean_removed if r else None, r.own_after if r else None, g.e2e_ms))
        return out

    # ---------------------------------------------------------------- tables and files
    def _poison_rows(self, retrieved: Mapping[str, Retrieved],
                     outcomes: Sequence[CaseOutcome]) -> list[PoisonRow]:
        rows = []
        conf = self.confidence
        for kind in (k for k in self.opts.cases if k in POISON_TYPES):
            rs = [r for r in retrieved.values() if r.case.case_type == kind]
            att = [r for r in rs if r.case.attacked]
            ctl = [r for r in rs if not r.case.attacked]
            answered = [o for o in outcomes if o.case_type == kind and o.attacked
                        and o.outcome != GENERATION_FAILED]
            in_top = sum(r.any_planted for r in att)
            clean = sum(self.top_k - r.any_planted for r in att)
            rows.append(PoisonRow(
                kind,
                wilson(sum(r.own > 0 for r in att), len(att), conf),
                wilson(sum(r.own_after > 0 for r in att), len(att), conf),
                wilson(sum(r.caught for r in att), in_top, conf),
                wilson(sum(r.clean_removed for r in att), clean, conf),
                wilson(sum(o.outcome == "drifted_wrong" for o in answered), len(answered), conf),
                wilson(sum(r.any_planted > 0 for r in ctl), len(ctl), conf)))
        return rows

    def _write(self, out_dir: Path, outcomes: Sequence[CaseOutcome],
               retrieved: Mapping[str, Retrieved], types: Sequence[TypeRow],
               poison: Sequence[PoisonRow], lines: Sequence[str]) -> None:
        rows = [dataclasses.asdict(o) for o in outcomes]
        pq.write_table(pa.Table.from_pylist(rows, schema=OUTCOME_SCHEMA),
                       out_dir / "outcomes.parquet")
        rrows = [{"case_id": r.case.case_id, "case_type": r.case.case_type,
                  "attacked": r.case.attacked, "top_k_doc_ids": [p.doc_id for p in r.top_k],
                  "own_planted": r.own, "any_planted": r.any_planted, "caught": r.caught,
                  "clean_removed": r.clean_removed, "own_planted_after_filter": r.own_after}
                 for r in retrieved.values() if r.case.case_type in POISON_TYPES]
        pq.write_table(pa.Table.from_pylist(rrows, schema=RETRIEVAL_SCHEMA),
                       out_dir / "poison_retrieval.parquet")
        summary: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION, "options": dataclasses.asdict(self.opts),
            "top_k": self.top_k, "overlap_threshold": self.threshold,
            "confidence": self.confidence,
            "types": [dataclasses.asdict(t) for t in types],
            "poisoning": [dataclasses.asdict(p) for p in poison]}
        (out_dir / "robustness.json").write_text(json.dumps(summary, indent=2) + "\n")
        (out_dir / "robustness.md").write_text("\n".join(lines) + "\n")


def _encode(embedder: Embedder, texts: Sequence[str], kind: str) -> np.ndarray:
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    if texts:
        embedder.encode(texts, kind=kind, out=out)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def _top(q: np.ndarray, emb: np.ndarray, k: int) -> list[int]:
    """Row indices of the ``k`` best cosine scores, best first, ties by row (stable)."""
    scores = emb @ q
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [int(i) for i in order[:k]]


def split_node(node: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """``robustness`` as (study options, generator block)."""
    from bench.config.build import to_container

    opts = dict(to_container(node))  # a DictConfig (validation) or the run's plain dict
    gen = opts.pop("generator", None)
    if not gen or not gen.get("_target_"):
        raise ConfigError("robustness.generator", "the study answers its cases with its own "
                          "generator: give a generator block (conf/experiment/robustness.yaml "
                          "uses the packaged transformers_cpu one)")
    return opts, gen


def build_study(node: Mapping[str, Any]) -> RobustnessStudy:
    """``robustness`` built and checked (a bad option: ConfigError naming
    ``robustness.<option>``, exit 2, before any work)."""
    from bench.config.build import build

    opts, _ = split_node(node)
    opts.setdefault("_target_", f"{__name__}.RobustnessStudy")
    study = build(opts, "robustness", RobustnessStudy)
    assert study is not None
    return study


def check_dataset(node: Mapping[str, Any], ds: Dataset) -> None:
    """Before any work: the dataset must give every configured case type a case (a query
    whose ``expected_answer`` is the title of its grade-2 gold document, with an attacker's
    term to pick), or the study would report empty tables after the whole run."""
    study = build_study(node)
    got = {c.case_type for c in build_cases(ds, study.opts)}
    missing = [t for t in study.opts.cases if t not in got]
    if missing:
        raise ConfigError("robustness.cases", f"dataset {ds.name} gives no {missing[0]} case: "
                          "the study needs answerable queries whose expected_answer is the "
                          "title of their grade-2 gold document (FOLDOC's term questions)")


def run_configured(node: Mapping[str, Any], ds: Dataset, embedder: Embedder,
                   run_dir: Path) -> RobustnessResult:
    """Build the study and its generator, run it into ``<run>/robustness``, log its tables."""
    from bench.config.build import build

    study = build_study(node)
    _, gen_node = split_node(node)
    # split_node refused a block without a _target_: this is a generator
    generator = cast(Generator, build(gen_node, "robustness.generator"))
    try:
        result = study.run(ds, embedder, generator, run_dir / "robustness")
    finally:
        generator.close()
    for line in result.lines:
        log.info("robustness: %s", line)
    return result
