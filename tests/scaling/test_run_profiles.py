"""``python -m bench`` run folders as a scale profile: each run's computed stages, the rest of
its wall time, its peak RSS and the bytes it wrote, at three corpus sizes of the scale corpus;
runs of other options, or whose corpus came from the cache, are refused in one line."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.data.scale import write_scale_corpus
from bench.errors import InputError
from bench.scaling.planner import predict, validate
from bench.scaling.profile import read_profile
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
    assert not profile.heap_measured and profile.settings["source"] == "python -m bench"
    # each size ran on its own cache_dir, so the engine's scratch folder differs: not a
    # setting of the curve (the sizes would be refused as other options)
    assert profile.settings["embedding"] == {
        "_target_": "bench.embedding.engine.LocalEngine", "shard_rows": None}
    big = profile.points[-1]
    assert big.dim == 384 and big.n_queries == 40
    # its timed stages and the rest add up to the run's wall time
    import json

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
    # the vectors it wrote: rows x 384 x 4 bytes (+ the .npy header and its small files)
    assert big.disk_bytes["embed_docs"] >= 3000 * 384 * 4
    pred = predict(profile, 30_000)
    assert pred.seconds > big.stages["chunk"].seconds and not pred.heap_measured
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
