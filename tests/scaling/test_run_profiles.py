"""``python -m bench`` run folders as a scale profile: each run's computed stages, the rest of
its wall time, its peak RSS and the bytes it wrote, at three corpus sizes of the scale corpus;
runs of other options, or whose corpus came from the cache, are refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.data.scale import write_scale_corpus
from bench.errors import InputError
from bench.scaling.planner import predict, validate
from bench.scaling.profile import read_profile
from bench.scaling.report import validation_markdown
from tests.cli import bench_in_process

SIZES = (300, 1000, 3000)


def _run(tmp: Path, n: int, *extra: str, cache: str = "") -> Path:
    corpus = tmp / f"corpus-{n}"
    if not corpus.exists():
        write_scale_corpus(corpus, n_docs=n, n_queries=40, seed=0)
    run = tmp / "runs" / f"{n}{''.join(extra).replace('=', '-')}{cache}"
    res = bench_in_process("dataset=scale", f"dataset.path={corpus}", "embedder=static_l3",
                           "index=ivf_flat", f"cache_dir={tmp / ('cache' + (cache or str(n)))}",
                           f"hydra.run.dir={run}", "report.plot=false",
                           "metrics.bootstrap_resamples=100", *extra)
    assert res.returncode == 0, res.stderr[-2000:]
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("runs")
    for n in SIZES:
        _run(tmp, n)
    return tmp


def test_three_pipeline_runs_are_a_profile(runs: Path) -> None:
    profile = read_profile(runs / "runs")
    assert [p.n_chunks for p in profile.points] == list(SIZES)  # one chunk per document
    assert {"chunk", "embed_docs", "index", "exact_topk", "retrieve", "rest"} <= set(
        profile.stages)
    assert profile.heap_measured and not profile.notes
    assert profile.settings["source"] == "python -m bench"
    # each size ran on its own cache_dir, so the engine's scratch folder differs: not a
    # setting of the curve (the sizes would be refused as other options)
    assert profile.settings["embedding"] == {
        "_target_": "bench.embedding.engine.LocalEngine", "shard_rows": None}
    big = profile.points[-1]
    assert big.dim == 384 and big.n_queries == 40
    # its timed stages and the rest add up to the run's wall time
    manifest = json.loads((runs / "runs" / "3000" / "run.json").read_text())
    assert sum(s.seconds for s in big.stages.values()) == pytest.approx(manifest["wall_s"])
    # a node is its computation in the cache's log, once, though timings.parquet repeats
    # its sample under each of the 6 configs built on it
    (event,) = [e for e in manifest["cache"]["events"] if e["stage"] == "chunk"]
    assert big.stages["chunk"].seconds == pytest.approx(event["wall_s"])
    timed = pq.read_table(runs / "runs" / "3000" / "timings.parquet").to_pylist()
    chunk_rows = [r["wall_ms"] / 1000 for r in timed if r["stage"] == "chunk"]
    assert len(chunk_rows) == 6 and chunk_rows[0] <= event["wall_s"] < 2 * chunk_rows[0]
    # the latency pass: one query at a time, every config's (not deduplicated away)
    latency = sum(r["wall_ms"] for r in timed if r["stage"] == "retrieve"
                  and r["sample_kind"] == "query") / 1000
    assert big.stages["retrieve.latency"].seconds == pytest.approx(latency)
    assert big.peak_rss_bytes == manifest["peak_rss_bytes"]
    # each stage's heap (RssAnon) beside its RSS: read while it ran, so never above the
    # process' RSS high-water mark at its end
    res = manifest["resources"]
    assert {r["stage"] for r in res} >= {"data", "chunk", "embed_docs", "index"}
    for r in res:
        assert 0 < r["heap_peak_bytes"] <= r["peak_rss_bytes"], r
        assert r["rss_file_peak_bytes"] > 0, r
    chunk_heap = max(r["heap_peak_bytes"] for r in res if r["stage"] == "chunk")
    assert big.stages["chunk"].peak_anon_bytes == chunk_heap
    # a stage without a resources entry (the untimed rest) takes the run's highest heap
    assert big.stages["rest"].peak_anon_bytes == max(r["heap_peak_bytes"] for r in res)
    # the vectors it wrote: rows x 384 x 4 bytes (+ the .npy header and its small files)
    assert big.disk_bytes["embed_docs"] >= 3000 * 384 * 4
    pred = predict(profile, 30_000)
    assert pred.seconds > big.stages["chunk"].seconds and pred.heap_measured
    assert pred.mapped == ("embed_docs",)  # the vectors; the in-memory index is heap
    assert {s.stage for s in pred.stages} == set(profile.stages)
    rest = next(s for s in pred.stages if s.stage == "rest")
    assert rest.seconds_fit.kind == "power"  # no work count is known for the untimed rest
    (check,) = validate(profile, ratio=3)
    assert check.n_chunks == 3000 and check.fitted_on == (300, 1000)


def test_runs_of_other_options_or_from_the_cache_are_refused(runs: Path, tmp_path: Path
                                                             ) -> None:
    other = _run(tmp_path, 300, "retriever.k=50")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for src in (runs / "runs" / "1000", other):
        (mixed / src.name).symlink_to(src, target_is_directory=True)
    with pytest.raises(InputError, match=r"measured with retriever=.*one curve per set"):
        read_profile(mixed)
    _run(tmp_path, 300, cache="shared")
    again = _run(tmp_path, 300, "seed=1", cache="shared")  # the first run's corpus artifacts
    with pytest.raises(InputError, match="its corpus pass came from the cache"):
        read_profile(again)


def test_runs_recorded_before_the_heap_fall_back_to_their_rss(runs: Path, tmp_path: Path
                                                              ) -> None:
    """A run.json without heap_peak_bytes (recorded before #36): every size's heap is then
    its RSS (one kind of figure on one curve), said in one line, not refused."""
    old = tmp_path / "old"
    for n in SIZES:
        shutil.copytree(runs / "runs" / str(n), old / str(n))
    where = old / str(SIZES[0]) / "run.json"
    manifest = json.loads(where.read_text())
    manifest["resources"] = [{k: v for k, v in r.items()
                              if k not in ("heap_peak_bytes", "rss_file_peak_bytes")}
                             for r in manifest["resources"]]
    where.write_text(json.dumps(manifest))
    profile = read_profile(old)
    assert not profile.heap_measured
    (note,) = profile.notes
    assert note.startswith("heap: 1 of 3 runs record no heap_peak_bytes (run.json before #36; ")
    assert note.endswith("the heap figures are peak RSS, file pages included")
    for p in profile.points:  # the sizes that recorded it too: one curve
        assert all(s.peak_anon_bytes == s.peak_rss_bytes for s in p.stages.values())
    (check,) = validate(profile, ratio=3)
    md = validation_markdown(profile, [check], ratio=3, method="work")
    assert note in md.splitlines() and "| peak_anon |" in md
    pred = predict(profile, 30_000)
    assert not pred.heap_measured and note in pred.notes
