"""``system=http`` pointed at ``python -m bench.serve`` of config X reproduces X's in-process
per-query retrieval metrics exactly: the black-box path (HTTP, the response mapping, the
doc-id mapping, scoring) adds nothing and loses nothing."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from scripted_fixture import compose_run

SMALL = ["dataset=synthetic", "device=cpu", "embedder=static_l3"]


def _dense_config_id(cache: Path, tmp: Path) -> str:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register
    from bench.pipeline.run import prepare

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True,
                      overrides=[*SMALL, f"cache_dir={cache}"])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    p = prepare(cfg)
    (spec,) = [c for c in p.plan.configs if c.kind == "dense"]
    p.executor.value(spec.pool_node)  # the artifacts the server loads
    return spec.config_id


def test_served_config_reproduces_its_in_process_metrics(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cid = _dense_config_id(cache, tmp_path)
    # the run starts `python -m bench.serve` of X itself (system.serve), on its own cache
    serve = ",".join(f"'{a}'" for a in [*SMALL, f"config={cid}"])
    result = compose_run([*SMALL[1:], "system=http_retrieve", "system.url=/v1/retrieve",
                          f"system.serve=[{serve}]",
                          f"system.serve_log={tmp_path / 'serve.log'}"], cache,
                         tmp_path / "run")
    assert (tmp_path / "serve.log").read_text()  # the server's own log
    configs = {c["label"]: c for c in
               pq.read_table(result.run_dir / "configs.parquet").to_pylist()}
    mine = configs["system(retrieve)"]
    assert mine["kind"] == "system"
    rows = pq.read_table(result.run_dir / "per_query.parquet").to_pylist()
    ours = {(r["query_id"], r["metric"]): (r["status"], r["value"]) for r in rows
            if r["config_id"] == cid}
    theirs = {(r["query_id"], r["metric"]): (r["status"], r["value"]) for r in rows
              if r["config_id"] == mine["config_id"]}
    assert ours and set(ours) == set(theirs)
    assert all(s == "scored" for s, _ in theirs.values())
    assert theirs == ours  # exactly: same documents, same float32 scores, same ties
    split = pq.read_table(result.run_dir / "system.parquet").to_pylist()
    assert all(r["status"] == "ok" and r["server_ms"] is not None for r in split)
    assert all(0.0 < r["server_ms"] <= r["e2e_ms"] for r in split)
