"""What the merged report says about the fixture run (tests/report/report_fixture.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from report_fixture import N_CONFIGS, label

from bench.report import content, plots
from bench.report.drilldown import all_pairs, dataset_lookup, drilldown
from bench.report.load import load_runs
from bench.report.views import cost_axes, front, saturated


def test_front_on_p95_with_ties(run_dir: Path) -> None:
    m = load_runs([run_dir])
    # ndcg@10 all-scope means: (m * j % 7) for j = 1..6 is a permutation of 1..6 unless
    # 7 | m, so every config has 21 / 6 / 7 = 0.5 except c6 (m = 7): 0
    f = front(m, "ndcg@10", cost_axes()[0])
    got = {p.key: p.status for p in f.points}
    # c3 (p95 1.25 ms) is the cheapest at 0.5; the others at 0.5 cost more but their CIs
    # (±0.05) overlap c3's: tied; c6 at 0 is dominated; c8 pruned; fused c2 has its summed p95
    assert got == {"c0": "tied", "c1": "tied", "c2": "tied", "c3": "front", "c4": "tied",
                   "c5": "tied", "c6": "dominated", "c7": "tied", "c8": "pruned"}
    assert not front(m, "ndcg@10", cost_axes()[1]).measured  # no VRAM in this run
    # a price turns p50 into cost per query: $3.6 / h over 1 ms = $1e-6
    priced = cost_axes(price_per_hour=3.6)[2]
    assert priced.value(m.configs[0]) == pytest.approx(3.6 * (2.0 / 2) / 1000 / 3600)


def test_saturated_metric_is_flagged_not_plotted(run_dir: Path) -> None:
    m = load_runs([run_dir])
    assert saturated(m, "recall@100") == 1.0
    assert saturated(m, "ndcg@10") is None
    rep = content.build(m, content.Options(per_page=4))
    quality = next(s for s in rep.sections if s.title.startswith("Quality"))
    assert any("recall@100: saturated at 1.0000" in n for n in quality.notes)
    names = [f.name for f in quality.figures]
    # 8 kept configs, 4 per page -> 2 pages of ndcg@10, none of recall@100
    assert names == ["ndcg_10_1.png", "ndcg_10_2.png"]


def test_every_config_is_in_the_table_and_the_plots(run_dir: Path) -> None:
    m = load_runs([run_dir])
    rep = content.build(m)
    md = content.render_markdown(rep)
    table = rep.sections[0].tables[0]
    assert [r[2][0] for r in table.rows] == [label(i) for i in range(N_CONFIGS)]
    assert "pruned: p95 9.00 ms > 5 ms" in md
    assert "sum of inputs: retrieve + lexical + fusion/query" in md
    kept = [c for c in m.configs if c.kept]
    numbers = {c.key: i + 1 for i, c in enumerate(m.configs)}
    for per_page in (3, 8, 25):
        pages = plots.metric_pages(kept, numbers, "ndcg@10", ["all"], per_page)
        assert len(pages) == math.ceil(len(kept) / per_page)


def test_drilldown_worst_wins_losses(run_dir: Path) -> None:
    m = load_runs([run_dir])
    run = m.runs[0]
    lookup = dataset_lookup(run)
    assert lookup.source == "queries.parquet + documents.parquet"
    c3, base = m.configs[3], m.configs[0]
    d = drilldown(run, c3, base, "ndcg@10", lookup, n=2, depth=5)
    # c3: (4 j % 7) / 7 = 4, 1, 5, 2, 6, 3 (sevenths); baseline j / 7
    assert [q.query_id for q in d.worst] == ["q2", "q4"]
    assert d.worst[0].value == pytest.approx(1 / 7)
    # deltas (sevenths): q1 +3, q2 -1, q3 +2, q4 -2, q5 +1, q6 -3
    assert [q.query_id for q in d.wins] == ["q1", "q3"]
    assert [q.query_id for q in d.losses] == ["q6", "q4"]
    w = d.wins[0]
    assert (w.value - w.baseline) == pytest.approx(3 / 7)  # type: ignore[operator]
    assert w.text == "what is thing q1?" and w.gold_ids == ("d2",)
    # c3 ranks d{(1 + 3 + r) % 5 + 1} for q1: d5, d1, d2, d3, d4; gold d2 third
    assert [t.doc_id for t in w.top] == ["d5", "d1", "d2", "d3", "d4"]
    assert [t.relevant for t in w.top] == [False, False, True, False, False]
    assert w.top[0].title == "Title 5"


def test_all_pairs_holm(run_dir: Path) -> None:
    run = load_runs([run_dir]).runs[0]
    rows = all_pairs([run], "ndcg@10", resamples=200)
    kept = N_CONFIGS - 1
    assert len(rows) == kept * (kept - 1) // 2
    assert all(r["p_value"] <= r["p_holm"] <= 1.0 for r in rows)
    c0_c3 = next(r for r in rows if (r["a"], r["b"]) == ("c0", "c3"))
    assert c0_c3["delta"] == pytest.approx((21 - 21) / 6 / 7)  # same mean, different queries
    assert c0_c3["n"] == 6


def test_resources_show_heap_beside_rss(run_dir: Path) -> None:
    import json

    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["resources"] = [{"stage": "data", "peak_rss_bytes": 3 * 2**20,
                              "heap_peak_bytes": 2 * 2**20, "peak_vram_bytes": None},
                             {"stage": "chunk", "peak_rss_bytes": 2**20}]  # a run of before
    (run_dir / "run.json").write_text(json.dumps(manifest))
    res = next(x for x in content.build(load_runs([run_dir])).sections
               if x.title == "Resources per stage")
    table = res.tables[0]
    assert table.headers == ("run", "stage", "peak RSS MiB", "peak heap MiB", "peak VRAM MiB")
    assert [c[0] for c in table.rows[0][2:]] == ["3", "2", "-"]
    assert [c[0] for c in table.rows[1][2:]] == ["1", "-", "-"]


def test_telemetry_records_from_run_json_are_shown(run_dir: Path) -> None:
    import json

    from bench.telemetry.sampler import StageSampler

    s = StageSampler.for_device("cpu")
    with s.stage("embed_docs"):
        pass
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["telemetry"] = s.manifest()
    (run_dir / "run.json").write_text(json.dumps(manifest))
    rep = content.build(load_runs([run_dir]))
    assert rep.header[0].endswith("GPU sampler: off (device is cpu)")
    res = next(x for x in rep.sections if x.title == "Resources per stage")
    table = res.tables[0]
    assert table.rows[0][1][0] == "embed_docs"
    assert "sampler_off_reason" in table.headers and "torch_peak_allocated_bytes" in table.headers


def test_latency_is_end_to_end_for_every_config_fused_included(tmp_path: Path) -> None:
    from report_fixture import write_run

    from bench.report.load import E2E_SOURCE

    # the pipeline's e2e columns: config i costs 10 + i ms at p95 along its chain (the fused
    # c2 included, whose first-stage search p95 is null)
    e95 = [10.0 + i for i in range(N_CONFIGS)]
    d = write_run(tmp_path / "r", extra={
        "e2e_p50_ms": [v / 2 for v in e95], "e2e_p95_ms": e95,
        "e2e_p99_ms": [v * 2 for v in e95], "n_e2e_samples": [6] * N_CONFIGS})
    m = load_runs([d])
    assert [c.latency.p95_ms for c in m.configs] == e95
    assert m.configs[2].latency == m.configs[2].latency.__class__(6.0, 12.0, 24.0, 6, E2E_SOURCE)
    f = front(m, "ndcg@10", cost_axes()[0])
    assert [i.cost for i in f.inputs] == e95
    # c0 is now the cheapest config at ndcg 0.5 (10 ms): the front starts there
    assert {p.key: p.status for p in f.points}["c0"] == "front"
    rep = content.build(m)
    table = rep.sections[0].tables[0]
    col = table.headers.index("p95 ms")
    src = table.headers.index("latency from")
    assert [r[col][0] for r in table.rows] == [f"{v:.3f}" for v in e95]
    assert {r[src][0] for r in table.rows} == {E2E_SOURCE}
    assert any("'e2e: sum along the chain'" in n for n in rep.sections[0].notes)


def test_header_warns_of_truncated_passages_and_dropped_queries(run_dir: Path) -> None:
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["embedding"] = {"truncated_chunks": 7, "chunks_embedded": 40}
    manifest["dataset"].update(dropped_queries=3, dropped_reason="no positive judgement in "
                               "qrels/test.tsv (1 with only score-0 judgements, 2 not judged)")
    (run_dir / "run.json").write_text(json.dumps(manifest))
    md = content.render_markdown(content.build(load_runs([run_dir])))
    assert ("- ⚠ run: 7 of 40 passages are longer than the embedder's maximum length and were "
            "embedded truncated") in md
    assert ("- run: 3 queries of the source were left out: no positive judgement in "
            "qrels/test.tsv (1 with only score-0 judgements, 2 not judged)") in md


def test_header_is_quiet_without_truncation(run_dir: Path) -> None:
    md = content.render_markdown(content.build(load_runs([run_dir])))
    assert "truncated" not in md and "left out" not in md


def test_comparisons_show_the_mde_and_read_older_files_without_it(run_dir: Path) -> None:
    import pyarrow.parquet as pq

    md = content.render_markdown(content.build(load_runs([run_dir])))
    assert "| MDE |" in md.replace("MDE | p", "MDE |") and "0.1250" in md
    assert "no difference as large as the MDE was seen" in md
    # a schema-2 comparisons.parquet has no mde column: the cell reads "-", with a note
    path = run_dir / "comparisons.parquet"
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["mde"]), path)
    md = content.render_markdown(content.build(load_runs([run_dir])))
    assert "written before schema 3" in md


def test_power_and_decision_sections(run_dir: Path) -> None:
    rep = content.build(load_runs([run_dir]))
    titles = [s.title for s in rep.sections]
    # the fixture's run config has no decisions: no decision section, but a power table
    assert "Pre-registered decisions" not in titles
    power = next(s for s in rep.sections if s.title.startswith("Power"))
    rows = power.tables[0].rows
    assert {r[1][0] for r in rows} == {"ndcg@10", "recall@100"}
    assert rows[0][2][0] == "all" and rows[0][4][0].startswith("observed, median of")
    # a rule in run.json: evaluated from per_query.parquet, by label, with its hash
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["config"] = {"seed": 0, "metrics": {"confidence": 0.95, "bootstrap_resamples": 200},
                          "decisions": [{"name": "rrf", "baseline": "dense",
                                         "candidate": "rrf(k=60)", "metric": "ndcg@10",
                                         "min_gain": 0.5, "scopes": ["all"],
                                         "guardrails": {}}]}
    (run_dir / "run.json").write_text(json.dumps(manifest))
    md = content.render_markdown(content.build(load_runs([run_dir])))
    assert "## Pre-registered decisions" in md
    row = next(line for line in md.splitlines() if line.startswith("| run | rrf |"))
    # 6 queries: the 0.5 minimum gain is out of reach of rrf's gain of 0
    assert "| REJECT | rrf(k=60) | dense |" in row
