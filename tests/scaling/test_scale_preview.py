"""``plan_only=true scale_plan.profile=DIR``: the configured corpus' wall time, memory and
disk in the plan preview, from the cached chunk table's rows or an estimate; bad
``scale_plan`` keys refused in one line before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.data.synthetic import SyntheticDataset
from tests.cli import bench, bench_in_process
from tests.scale_profiles import LAWS, write_profile

FAST = ["dataset=synthetic", "embedder=static_l3", "index=flat"]


def _plan(tmp_path: Path, cache: Path, *extra: str) -> tuple[str, dict]:  # type: ignore[type-arg]
    run = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    res = bench_in_process(*FAST, f"cache_dir={cache}", "plan_only=true",
                           f"hydra.run.dir={run}", *extra)
    assert res.returncode == 0, res.stderr
    return (run / "plan.txt").read_text(), json.loads((run / "plan.json").read_text())


def _chunks_of(dataset: object) -> int:
    """The chunk count of FAST's chunker (conf/chunker/fixed_tokens.yaml, static_l3's
    tokenizer) over the whole corpus."""
    from omegaconf import OmegaConf

    from bench.config.build import build

    conf = Path(__file__).resolve().parents[2] / "conf"
    emb = build(OmegaConf.load(conf / "embedder" / "static_l3.yaml"), "embedder", device="cpu")
    chunker = build(OmegaConf.load(conf / "chunker" / "fixed_tokens.yaml"), "chunker")
    return len(chunker.chunk(dataset.documents, tokenizer=emb.tokenizer))  # type: ignore[attr-defined]


def test_the_plan_shows_the_corpus_at_scale_estimated_then_counted(tmp_path: Path) -> None:
    prof = write_profile(tmp_path / "profile", [10_000, 100_000, 1_000_000])
    cache = tmp_path / "cache"
    text, body = _plan(tmp_path, cache, f"scale_plan.profile={prof}")
    dataset = SyntheticDataset().load()
    n = _chunks_of(dataset)  # 60 documents: the sample is the whole corpus
    q = len(dataset.queries)
    assert f"scale plan for {n:,} chunks x {q} queries" in text
    assert "estimated: this plan's chunker on 60 sampled documents" in text
    # the profile measured ivf_flat; this plan builds Flat: said, and its own math shown
    assert "this plan's index flat (profile: ivf_flat)" in text
    assert f"this plan's index Flat at {n:,} x 384" in text
    (entry,) = body["scale_plan"]
    assert entry["prediction"]["n_chunks"] == n
    # the corpus pass at n chunks; the per-query stages at q of the profile's 1,000
    # queries; search_ann is flat in its work at every size: a fixed cost, whatever q
    expected = (LAWS["chunk"](n) + LAWS["embed"](n) + LAWS["index"](n)
                + LAWS["search"](n) * q / 1000 + LAWS["embed_queries"](n) * q / 1000
                + LAWS["metrics"](n) * q / 1000 + LAWS["search_ann"](n))
    assert entry["prediction"]["seconds"] == pytest.approx(expected, rel=1e-6)
    assert not any(p.name == "_meta.json" for p in cache.rglob("*")) if cache.exists() else True

    # once the chunks are cached, their rows are the count (read from Parquet's metadata)
    done = bench_in_process(*FAST, f"cache_dir={cache}", f"hydra.run.dir={tmp_path / 'full'}")
    assert done.returncode == 0, done.stderr
    (chunks,) = list(cache.rglob("chunks.parquet"))
    assert pq.ParquetFile(chunks).metadata.num_rows == n
    text, body = _plan(tmp_path, cache, f"scale_plan.profile={prof}")
    assert f"scale plan for {n:,} chunks" in text
    assert "chunks: the cached chunk table's rows" in text
    assert re.search(r"wall ~[\d.]+ s \(chunk ", text)

    # without a profile, plan.json has no scale_plan (unchanged for everyone else)
    _, plain = _plan(tmp_path, cache)
    assert "scale_plan" not in plain


def _beir(path: Path, n_docs: int) -> Path:
    """A BEIR folder of ``n_docs`` documents of 5 to 600 words (1 to ~6 chunks each)."""
    import random

    rng = random.Random(7)
    words = ["lattice", "compiler", "kernel", "protocol", "buffer", "socket", "parser",
             "index", "vector", "cache", "thread", "signal", "router", "packet", "schema"]
    path.mkdir()
    with (path / "corpus.jsonl").open("w") as fh:
        for i in range(n_docs):
            n = int(5 + 595 * rng.random() ** 3)  # mostly short, a long tail
            fh.write(json.dumps({"_id": f"d{i}", "title": "",
                                 "text": " ".join(rng.choice(words) for _ in range(n))}) + "\n")
    (path / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": "kernel cache"}) + "\n")
    (path / "qrels").mkdir()
    (path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n")
    return path


def test_a_large_corpus_is_estimated_from_a_sample_within_ten_percent(tmp_path: Path) -> None:
    from bench.data.beir import BeirDataset

    prof = write_profile(tmp_path / "profile", [10_000, 100_000])
    data = _beir(tmp_path / "beir", 3000)
    text, _ = _plan(tmp_path, tmp_path / "cache", f"scale_plan.profile={prof}",
                    "dataset=beir", f"dataset.path={data}")
    actual = _chunks_of(BeirDataset(path=str(data)).load())
    assert "this plan's chunker on 500 sampled documents" in text
    found = re.search(r"scale plan for ([\d,]+) chunks", text)
    assert found is not None
    est = int(found.group(1).replace(",", ""))
    assert actual > 3000 and abs(est - actual) <= 0.1 * actual, (est, actual)


@pytest.mark.parametrize(("override", "says"), [
    ("scale_plan.profile={tmp}/nothing", "config key scale_plan.profile: no such file"),
    ("scale_plan.method=linear", "config key scale_plan.method: must be one of work, power"),
    ("scale_plan.stated={tmp}/none.yaml", "config key scale_plan.stated: no such file"),
])
def test_bad_scale_plan_keys_stop_before_any_work(tmp_path: Path, override: str,
                                                  says: str) -> None:
    prof = write_profile(tmp_path / "profile", [10_000, 100_000])
    args = [*FAST, f"cache_dir={tmp_path / 'c'}", "plan_only=true",
            f"hydra.run.dir={tmp_path / 'run'}", override.format(tmp=tmp_path)]
    if "profile=" not in override:
        args.append(f"scale_plan.profile={prof}")
    # the first case as the user runs it, the others in this process (tests/cli.py)
    res = bench(*args) if "nothing" in override else bench_in_process(*args)
    assert res.returncode == 2, res.stderr
    assert says in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "run" / "plan.txt").exists()
