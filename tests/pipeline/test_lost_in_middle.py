"""The lost-in-the-middle experiment as plan variants, on the synthetic dataset with a scripted
generator (``FirstPassageGenerator``, referenced by `_target_`) that answers from whatever
passage comes first in the prompt — the strongest primacy bias there is, so the gold at
`first` must win and the paired deltas of `middle` and `last` must be negative."""

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

_TAG = re.compile(r"^\[doc:([^\]]+)\]\s*")

#: (request id, doc id of the first passage) of every answer, across runs
CALLS: list[tuple[str, str]] = []


class FirstPassageGenerator:
    """Test double of the Generator protocol: answers with the first sentence of the body of
    the prompt's FIRST passage (the chunk's title line dropped)."""

    def cache_params(self) -> dict[str, object]:
        return {"backend": "scripted", "model": "first-passage-1"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            first = r.messages[-1].content.split("Context:\n", 1)[1].split("\n\n", 1)[0]
            m = _TAG.match(first)
            assert m is not None, first
            body = first[m.end():].split("\n", 1)[-1]
            text = body.split(". ")[0].rstrip(".") + "."
            CALLS.append((r.request_id, m.group(1)))
            n = len(text.split())
            out.append(Generation(r.request_id, text, "ok", "stop", 10, n, 5.0, 1.0,
                                  5.0 + (n - 1), tuple(1.0 for _ in range(n - 1))))
        return out

    def close(self) -> None:
        pass


def _overrides(cache: Path, *extra: str) -> list[str]:
    return ["+experiment=lost_in_middle", "dataset=synthetic", f"cache_dir={cache}",
            "metrics.bootstrap_resamples=200", "report.plot=false", "generator=none",
            "generator._target_=test_lost_in_middle.FirstPassageGenerator",
            "generation.max_queries=8", *extra]


def _plan(compose_cfg, *extra: str):  # type: ignore[no-untyped-def]
    from bench.pipeline.components import build_components
    from bench.pipeline.plan import plan
    from bench.pipeline.run import generation_settings
    from bench.pipeline.settings import run_settings

    cfg = compose_cfg(_overrides(Path("/nonexistent"), *extra))
    comps = build_components(cfg, "cpu")
    ds = comps.source.load()
    g = generation_settings(run_settings(cfg), comps, ds)
    return plan(comps, ds, device="cpu", relevance_level=1, generation=g), g


def test_plan_one_pool_three_positions(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    p, g = _plan(compose_cfg)
    gen = [c for c in p.configs if c.kind == "generated"]
    assert [c.label for c in gen] == [f"dense>gold@{pos}(4)>gen(first-passage-1)"
                                      for pos in ("first", "middle", "last")]
    (dense,) = [c for c in p.configs if c.kind == "dense"]
    # one pool node shared by the three positions; one context node per position
    assert {c.pool_node.key for c in gen} == {dense.leaf.key}
    assert all(c.parent_id == dense.config_id for c in gen)
    ctx = [c.answers.inputs[0] for c in gen]  # type: ignore[union-attr]
    assert len({n.key for n in ctx}) == 3 and {n.stage for n in ctx} == {"context"}
    assert len({c.config_id for c in gen}) == 3
    assert [c.params["gold_position"] for c in gen] == ["first", "middle", "last"]
    assert [c.params["gold_index"] for c in gen] == [0, 2, 4]
    # the subset is drawn from the probe-able queries only: one relevant doc, not must-abstain
    # (24 synthetic queries: 6 per category; multi_doc has two relevant documents)
    assert g is not None and g.scope is not None
    assert dict(g.scope.excluded) == {"must_abstain": 6, "multi_gold": 6}
    assert len(g.subset) == 8 and set(g.subset) <= set(g.scope.eligible)
    assert "dense" in p.render(lambda n: False)

    # stable ids: the same plan again, and a run sweeping fewer positions, name the same
    # configs; the pool config's id does not depend on generation at all
    again, _ = _plan(compose_cfg)
    assert [c.config_id for c in again.configs] == [c.config_id for c in p.configs]
    two, _ = _plan(compose_cfg, "context.positions=[first,last]")
    ids = {c.label: c.config_id for c in p.configs}
    assert {c.label: c.config_id for c in two.configs} == {
        k: v for k, v in ids.items() if "middle" not in k}
    none, _ = _plan(compose_cfg, "generator._target_=null")
    assert [c.config_id for c in none.configs] == [dense.config_id]
    # another N is another experiment: every generated id changes, the pool's does not
    six, _ = _plan(compose_cfg, "context.n_distractors=6")
    six_ids = {c.config_id for c in six.configs}
    assert dense.config_id in six_ids and not six_ids & {c.config_id for c in gen}


@pytest.mark.parametrize(("override", "key"), [
    ("context.positions=[first,centre]", "context.positions"),
    ("context.n_distractors=0", "context.n_distractors"),
])
def test_config_errors_name_the_key(compose_cfg, override: str, key: str) -> None:  # type: ignore[no-untyped-def]
    from bench.errors import ConfigError
    from bench.pipeline.components import build_components

    with pytest.raises(ConfigError) as err:
        build_components(compose_cfg(_overrides(Path("/nonexistent"), override)), "cpu")
    assert err.value.key == key


@pytest.mark.slow
def test_lost_in_middle_end_to_end(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    CALLS.clear()
    res = run(compose_cfg(_overrides(tmp_path / "cache")), tmp_path / "r")
    assert res.exit_code == 0
    configs = pq.read_table(tmp_path / "r" / "configs.parquet").to_pylist()
    gen = [c for c in configs if c["kind"] == "generated"]
    assert len(gen) == 3
    ids = [c["config_id"] for c in gen]
    rj = json.loads((tmp_path / "r" / "run.json").read_text())
    probes = rj["lost_in_middle"]
    assert [p["position"] for p in probes] == ["first", "middle", "last"]
    assert [p["gold_index"] for p in probes] == [0, 2, 4]
    for p in probes:
        assert (p["n_dataset_queries"], p["n_eligible"], p["n_drawn"]) == (24, 12, 8)
        assert dict(map(tuple, p["excluded"])) == {"must_abstain": 6, "multi_gold": 6}
        assert p["n_probed"] == 8 and p["n_injected"] == 0
    # every query answered once per position; the generator saw the gold first only at `first`
    assert len(CALLS) == 24
    first_docs = [d for _, d in CALLS]
    by_pos = [first_docs[0:8], first_docs[8:16], first_docs[16:24]]
    assert by_pos[1] == by_pos[2]  # same first distractor at middle and last
    assert all(a != b for a, b in zip(by_pos[0], by_pos[1], strict=True))

    # per_query: answer metrics on the 8 probed queries, per position
    pqr = pq.read_table(tmp_path / "r" / "per_query.parquet").to_pylist()
    acc = {cid: {r["query_id"]: r["value"] for r in pqr
                 if r["config_id"] == cid and r["metric"] == "answer_correct"} for cid in ids}
    f1 = {cid: {r["query_id"]: r["value"] for r in pqr
                if r["config_id"] == cid and r["metric"] == "token_f1"} for cid in ids}
    assert all(len(v) == 8 for v in acc.values()) and acc[ids[0]].keys() == acc[ids[1]].keys()
    exact = [q for q in acc[ids[0]] if f1[ids[0]][q] == 1.0]
    assert exact  # the exact lookups: the gold's first sentence IS the expected answer
    assert all(acc[ids[0]][q] == 1.0 for q in exact)
    assert sum(f1[ids[0]].values()) > sum(f1[ids[1]].values())
    assert sum(f1[ids[0]].values()) > sum(f1[ids[2]].values())

    # comparisons: middle and last paired with first, Holm-adjusted
    comps = [c for c in pq.read_table(tmp_path / "r" / "comparisons.parquet").to_pylist()
             if c["scope"] == "all" and c["metric"] in ("answer_correct", "token_f1")]
    for cid in ids[1:]:
        for metric in ("answer_correct", "token_f1"):
            (row,) = [c for c in comps if c["config_id"] == cid and c["metric"] == metric]
            assert row["baseline_config_id"] == ids[0] and row["n"] == 8
            vals = [v for q, v in (acc if metric == "answer_correct" else f1)[cid].items()]
            base = (acc if metric == "answer_correct" else f1)[ids[0]]
            assert row["delta"] == pytest.approx(sum(vals) / 8 - sum(base.values()) / 8)
            assert row["p_holm"] >= row["p_value"]
        assert next(c for c in comps if c["config_id"] == cid
                    and c["metric"] == "token_f1")["delta"] < 0

    # the report section
    report = (tmp_path / "r" / "report.md").read_text()
    section = report.split("## Lost in the middle", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| dense>gold@")]
    assert [r.split(" | ")[1] for r in rows] == ["first", "middle", "last"]
    assert [r.split(" | ")[2] for r in rows] == ["0", "2", "4"]
    assert all(r.split(" | ")[3] == "8" for r in rows)
    assert "(baseline)" in rows[0] and "(baseline)" not in rows[1]
    assert "6 must_abstain, 6 multi_gold" in section and "12 probe-able, 8 drawn" in section
    mean_first = sum(acc[ids[0]].values()) / 8
    assert f"{mean_first:.3f} [" in rows[0]


def test_nothing_to_probe_is_a_config_error(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    # no relevant grade reaches level 9: every query is excluded before any work is done
    with pytest.raises(ConfigError, match="no query of the dataset can be probed") as exc:
        _plan(compose_cfg, "metrics.relevance_level=9")
    assert exc.value.key == "context"
