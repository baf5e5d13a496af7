"""bench.scaling: profiles read and refused, each figure extrapolated by its law, the
validation's errors, stated figures, and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from bench.errors import InputError
from bench.scaling.__main__ import main
from bench.scaling.planner import (
    at_dim,
    figures,
    index_memory,
    memory_notes,
    predict,
    read_stated,
    validate,
)
from bench.scaling.profile import read_profile
from bench.scaling.report import prediction_markdown, validation_markdown
from tests.cli import REPO, in_process
from tests.scale_profiles import LAWS, MIB, Q, anon, record, write_profile


def test_every_figure_follows_its_law_to_ten_times_the_largest_size(tmp_path: Path) -> None:
    profile = read_profile(write_profile(tmp_path / "p", [100_000, 10_000, 1_000_000]))
    assert [p.n_chunks for p in profile.points] == [10_000, 100_000, 1_000_000]  # ascending
    n = 10_000_000
    pred = predict(profile, n)
    got = {s.stage: s.seconds for s in pred.stages}
    assert got == pytest.approx({s: law(n) for s, law in LAWS.items()}, rel=1e-9)
    assert pred.peak_anon_bytes == pytest.approx(anon(n))
    assert pred.peak_rss_bytes == pytest.approx(anon(n) + 1536 * n + 10 * MIB)
    assert pred.disk_bytes == pytest.approx({"chunks": 60 * n + 4096, "vectors": 1536 * n + 128,
                                             "index": 1544 * n})
    # twice the queries: the query-side stages twice as long, the corpus pass the same
    twice = {s.stage: s.seconds for s in predict(profile, n, n_queries=2 * Q).stages}
    assert twice["search"] == pytest.approx(2 * got["search"])
    assert twice["metrics"] == pytest.approx(2 * got["metrics"])
    assert twice["index"] == pytest.approx(got["index"])


def test_the_validation_measures_each_size_from_sizes_ten_times_smaller(tmp_path: Path) -> None:
    profile = read_profile(write_profile(tmp_path / "p", [10_000, 30_000, 100_000, 300_000,
                                                          1_000_000]))
    checks = validate(profile)
    # 100k has one size 10x below it: not checked; 300k from 10k+30k; 1M from 10k..100k
    assert [(c.n_chunks, c.fitted_on) for c in checks] == [
        (300_000, (10_000, 30_000)), (1_000_000, (10_000, 30_000, 100_000))]
    assert checks[1].ratio == pytest.approx(10)
    for c in checks:  # the laws are followed exactly: every error is (about) zero
        for f in c.figures:
            assert c.error(f) == pytest.approx(0, abs=1e-9), f


def test_the_power_method_follows_a_power_law_the_work_method_does_not(tmp_path: Path
                                                                         ) -> None:
    recs = [record(n) for n in (10_000, 100_000)]
    for r in recs:  # embedding that grows as n^1.5
        embed = next(s for s in r["stages"] if s["stage"] == "embed")
        embed["seconds"] = 1e-6 * r["n_chunks"] ** 1.5
    (tmp_path / "scale.json").write_text(json.dumps({"results": recs}))
    profile = read_profile(tmp_path)
    exact = 1e-6 * 1_000_000 ** 1.5
    power = {s.stage: s for s in predict(profile, 1_000_000, method="power").stages}
    assert power["embed"].seconds == pytest.approx(exact)
    assert power["embed"].seconds_fit.describe() == "chunks^1.50 through 10,000 and 100,000"
    work = {s.stage: s for s in predict(profile, 1_000_000).stages}
    assert work["embed"].seconds < 0.5 * exact  # linear in chunks: the wrong law here
    with pytest.raises(ValueError, match="method must be one of"):
        predict(profile, 10, method="linear")


def test_a_measured_miss_is_reported_with_its_sign(tmp_path: Path) -> None:
    recs = [record(n) for n in (10_000, 100_000, 1_000_000)]
    embed = next(s for s in recs[2]["stages"] if s["stage"] == "embed")
    embed["seconds"] *= 0.8  # the 1M size ran faster than its law
    (tmp_path / "scale.json").write_text(json.dumps({"results": recs}))
    (check,) = validate(read_profile(tmp_path), ratio=10)
    _pred, meas = check.figures["seconds.embed"]
    assert meas == pytest.approx(0.8 * LAWS["embed"](1_000_000))
    assert check.error("seconds.embed") == pytest.approx(1 / 0.8 - 1)


def test_stated_rates_replace_this_machines_seconds_stage_by_stage(tmp_path: Path) -> None:
    profile = read_profile(write_profile(tmp_path / "p", [10_000, 100_000]))
    stated_file = tmp_path / "h100.yaml"
    stated_file.write_text("machine: 1x H100\nsource: a measured run\nmemory_gb: 128\n"
                           "rates: {embed: 50000, search: 2e10}\n")
    stated = read_stated(stated_file)
    pred = predict(profile, 1_000_000, stated=stated)
    got = {s.stage: s for s in pred.stages}
    assert got["embed"].seconds == pytest.approx(1_000_000 / 50_000)  # chunks per second
    assert got["search"].seconds == pytest.approx(Q * 1_000_000 / 2.0e10)  # query x chunk
    assert got["chunk"].seconds == pytest.approx(LAWS["chunk"](1_000_000))  # this machine's
    assert got["embed"].seconds_fit.kind == "stated"
    assert got["embed"].seconds_fit.describe() == "stated: 5e+04 chunk per s"
    assert pred.machine == "1x H100" and "1x H100 (a measured run)" in pred.notes[0]
    # the heap against the stated machine's memory, not this one's
    assert memory_notes(pred, stated, 1) == []
    small = read_stated(_write(tmp_path / "s.yaml", "machine: m\nmemory_gb: 0.1\n"
                                                    "rates: {embed: 1}\n"))
    (note,) = memory_notes(pred, small, None)
    assert note.startswith("the predicted heap exceeds m's stated memory (0.1 GiB) from chunk "
                           "on")  # the first stage over it, and what holds the memory there
    assert note.endswith("this stage holds the corpus (its chunks, their texts or "
                         "statistics) in memory")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_the_gpu_boxs_own_check_is_a_statement_of_its_rates(tmp_path: Path) -> None:
    """scripts/gpu_check.sh's gpu_check.json: its embedding texts/s and its exact search's
    queries/s over its vectors become the embed and search rates."""
    rows = [{"section": "env", "item": "cuda", "status": "ok",
             "figures": {"gpu": "NVIDIA H200", "vram_gib": 139.8}},
            {"section": "embed", "item": "MiniLM bf16 on cuda", "status": "ok",
             "figures": {"texts": 50000, "texts_per_s": 25000.0}},
            {"section": "torch_flat", "item": "fp32 cuda", "status": "ok",
             "figures": {"n": 1_000_000, "queries": 10000, "qps": 4000.0}},
            {"section": "torch_flat", "item": "bf16 cuda", "status": "ok",
             "figures": {"n": 1_000_000, "queries": 10000, "qps": 9000.0}}]
    f = _write(tmp_path / "gpu_check.json", json.dumps({"device": "cuda", "rows": rows}))
    stated = read_stated(f)
    assert stated.machine == "NVIDIA H200 (139.8 GiB)"
    assert stated.rates == {"embed": 25000.0, "search": 4000.0 * 1_000_000}
    failed = [dict(r, status="FAIL") if r["section"] != "env" else r for r in rows]
    with pytest.raises(InputError, match="no embed or torch_flat fp32 figure"):
        read_stated(_write(tmp_path / "g2.json", json.dumps({"rows": failed})))


def test_another_vector_width_moves_the_bytes_by_the_math(tmp_path: Path) -> None:
    profile = read_profile(write_profile(tmp_path / "p", [10_000, 100_000, 1_000_000]))
    n = 8_841_823
    base = predict(profile, n)
    wide = at_dim(base, profile, 768)
    more = 4.0 * n * (768 - 384)  # the vectors' bytes at twice the width
    assert wide.disk_bytes["vectors"] - base.disk_bytes["vectors"] == pytest.approx(more)
    idx384 = index_memory("ivf_flat", n, 384)
    idx768 = index_memory("ivf_flat", n, 768)
    assert idx384 is not None and idx768 is not None
    grow = idx768["resident_bytes"] - idx384["resident_bytes"]
    assert grow == pytest.approx(more, rel=0.01)  # IVF-Flat keeps every vector (+ centroids)
    assert wide.peak_anon_bytes - base.peak_anon_bytes == pytest.approx(grow)
    assert wide.peak_rss_bytes - base.peak_rss_bytes == pytest.approx(grow + more)
    assert wide.seconds == pytest.approx(base.seconds)  # another encoder: measured or stated
    assert wide.index_memory == idx768 and "768-d vectors" in wide.notes[-1]
    assert at_dim(base, profile, 384) is base


@pytest.mark.parametrize(("text", "line", "says"), [
    ("machine: x\nrates: {embed: -1}\n", 0, "rates.embed: must be a number > 0"),
    ("machine: x\nrates: {embedd: 5}\n", 0, "rates.embedd: not a stage"),
    ("rates: {embed: 5}\n", 0, "need 'machine'"),
    ("machine: x\nrates: [1\n", 3, "not YAML"),
])
def test_bad_stated_figures_name_the_file(tmp_path: Path, text: str, line: int,
                                          says: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as err:
        read_stated(f)
    assert says in str(err.value)
    assert str(err.value).startswith(f"{f}:{line}:" if line else f"{f}:")


def test_bad_profiles_name_the_file_the_record_and_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "scale.json"
    bad.write_text('{"results": [\n  {"n_chunks": 1,\n  }]}')
    with pytest.raises(InputError, match=rf"^{bad}:3: not JSON"):
        read_profile(bad)
    rec = record(10_000)
    del rec["n_queries"]
    bad.write_text(json.dumps({"results": [record(1000), rec]}))
    with pytest.raises(InputError, match=r"results\[1\]: size record lacks 'n_queries'"):
        read_profile(bad)
    bad.write_text(json.dumps({"results": [record(1000), record(10_000, embedder="onnx")]}))
    with pytest.raises(InputError, match=r"measured with embedder='onnx'.*one curve"):
        read_profile(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no scale\.json or size-"):
        read_profile(tmp_path / "empty")


def test_older_profiles_without_disk_or_dim_are_read(tmp_path: Path) -> None:
    recs = []
    for n in (10_000, 100_000):
        r = record(n)
        for key in ("disk_bytes", "dim", "n_chars"):
            del r[key]
        recs.append(r)
    (tmp_path / "scale.json").write_text(json.dumps({"results": recs}))
    profile = read_profile(tmp_path)
    assert profile.points[0].dim == 384  # from the vectors file's bytes
    assert profile.chars_per_chunk is None
    assert figures(predict(profile, 10**6))["disk.vectors"] == pytest.approx(1536 * 10**6 + 128)


def test_the_command_line_plans_checks_and_refuses_in_one_line(tmp_path: Path) -> None:
    prof = write_profile(tmp_path / "p", [10_000, 100_000, 1_000_000])
    # the real command line once (end to end), then in this process
    out = subprocess.run([sys.executable, "-m", "bench.scaling", "plan", str(prof),
                          "--chunks", "8,841,823", "--json", str(tmp_path / "plan.json")],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "# Scale plan: 8,841,823 chunks, 1,000 queries" in out.stdout
    assert "k-means + assignment distance" in out.stdout  # the index's work count
    assert "Index memory math (IVF" in out.stdout  # faiss' math at the target
    plan = json.loads((tmp_path / "plan.json").read_text())["prediction"]
    assert plan["seconds"] == pytest.approx(sum(law(8_841_823) for law in LAWS.values()))
    res = in_process(main, ["validate", str(prof), "--json", str(tmp_path / "v.json")])
    assert res.returncode == 0, res.stderr
    assert "| 1,000,000 | 10,000, 100,000 | 10x | seconds.total |" in res.stdout
    assert json.loads((tmp_path / "v.json").read_text())["checks"][0]["n_chunks"] == 1_000_000
    docs = in_process(main, ["plan", str(prof), "--docs", "2000000"])
    assert "# Scale plan: 2,000,000 chunks" in docs.stdout  # the profile's 1 chunk per document
    (tmp_path / "bad.json").write_text("{")
    for argv, says in ((["plan", str(tmp_path / "bad.json"), "--chunks", "5"], "not JSON"),
                       (["validate", str(tmp_path / "nothing")], "cannot read"),
                       (["plan", str(prof), "--chunks", "0"], "must be >= 1")):
        res = in_process(main, argv)
        assert res.returncode == 2, argv
        assert says in res.stderr and "Traceback" not in res.stderr
        assert says in res.stderr.strip().splitlines()[-1]  # argparse: its usage first


def test_the_memory_need_is_the_heap_plus_the_files_it_maps(tmp_path: Path) -> None:
    """An in-memory IVF index is heap; its vectors are mapped. With on-disk lists the index
    file is mapped too. The verdict reads the heap and the need, never the RSS."""
    profile = read_profile(write_profile(tmp_path / "p", [10_000, 100_000, 1_000_000]))
    n = 10_000_000
    pred = predict(profile, n)
    assert pred.mapped == ("vectors",)  # conf/index/ivf_flat.yaml: in memory
    assert pred.mapped_bytes == pytest.approx(1536 * n + 128)
    assert pred.memory_need_bytes == pytest.approx(anon(n) + 1536 * n + 128)
    ivf = dict(OmegaConf.to_container(OmegaConf.load(REPO / "conf/index/ivf_flat.yaml")))
    on_disk = replace(profile, settings={**profile.settings, "ann": {**ivf, "on_disk": True}})
    disk_pred = predict(on_disk, n)
    assert disk_pred.mapped == ("vectors", "index")
    assert disk_pred.memory_need_bytes == pytest.approx(anon(n) + 1536 * n + 128 + 1544 * n)
    # the heap fits, the mapped files not beside it: said, not refused
    ram = int(anon(n) + 1536 * n)  # above the heap, below heap + vectors
    (note,) = memory_notes(pred, None, ram)
    assert note.startswith(f"the predicted heap ({anon(n) / 2**30:.1f} GiB) fits this "
                           "machine's memory")
    assert "the files it maps" in note and "(vectors)" not in note and ": vectors)" in note
    # the RSS over the memory (its file pages) but the need under it: nothing to say
    roomy = int(anon(n) + 1536 * n + 129)
    assert pred.peak_rss_bytes > roomy and memory_notes(pred, None, roomy) == []
    # the heap over it: the refusal, from the first stage over it
    (over,) = memory_notes(pred, None, int(anon(n)) - 1)
    assert over.startswith("the predicted heap exceeds this machine's memory")
    md = prediction_markdown(profile, pred)
    need = (anon(n) + 1536 * n + 128) / 2**30
    assert (f"memory **{need:,.2f} GiB** (heap {anon(n) / 2**30:,.2f} GiB + vectors "
            f"{(1536 * n + 128) / 2**30:,.2f} GiB mapped)") in md


def test_the_validation_reports_the_heap_beside_the_rss(tmp_path: Path) -> None:
    recs = [record(n) for n in (10_000, 100_000, 1_000_000)]
    for s in recs[2]["stages"]:  # the 1M size's heap a quarter below its law
        s["peak_anon_bytes"] = int(0.75 * s["peak_anon_bytes"])
    (tmp_path / "scale.json").write_text(json.dumps({"results": recs}))
    profile = read_profile(tmp_path)
    (check,) = validate(profile)
    assert check.figures["peak_anon"] == pytest.approx((anon(10**6), int(0.75 * anon(10**6))))
    assert check.error("peak_anon") == pytest.approx(1 / 0.75 - 1, rel=1e-6)
    assert check.error("peak_anon.index") == pytest.approx(1 / 0.75 - 1, rel=1e-6)
    assert check.error("peak_rss") == pytest.approx(0)
    md = validation_markdown(profile, [check], ratio=10, method="work")
    assert "| 1,000,000 | 10,000, 100,000 | 10x | peak_anon |" in md
    assert "| +33.3% |" in md.split("peak_anon |")[1].splitlines()[0]
    assert "| 10x | peak_rss |" in md
