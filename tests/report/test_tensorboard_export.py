"""TensorBoard export read back with EventAccumulator: scalars and hparams per config."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixture import N_CONFIGS

from bench.report.load import load_runs
from bench.report.tensorboard import write_tensorboard

pytest.importorskip("tensorboard")


def test_every_config_has_hparams_and_scalars(run_dir: Path, tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    m = load_runs([run_dir])
    logdir = write_tensorboard(m, tmp_path / "tb")
    runs = sorted(p.name for p in logdir.iterdir())
    assert runs == sorted(c.key for c in m.configs)
    seen_keys = None
    for c in m.configs:
        ea = EventAccumulator(str(logdir / c.key))
        ea.Reload()
        content = ea.PluginTagToContent("hparams")
        start = plugin_data_pb2.HParamsPluginData.FromString(
            content["_hparams_/session_start_info"]).session_start_info
        hp = dict(start.hparams)
        assert hp["label"].string_value == c.label
        assert hp["config_id"].string_value == c.config_id
        exp = plugin_data_pb2.HParamsPluginData.FromString(
            content["_hparams_/experiment"]).experiment
        declared = {h.name for h in exp.hparam_infos}
        seen_keys = seen_keys or declared
        assert declared == seen_keys  # one experiment (the same columns) for every config
        assert set(hp) <= declared and "param.ef" in declared
        metric_tags = {mi.name.tag for mi in exp.metric_infos}
        assert "quality/ndcg@10" in metric_tags and "latency/p95_ms" in metric_tags
        tags = ea.Tags()["scalars"]
        if c.kept:
            ndcg = ea.Scalars("quality/ndcg@10")[0].value
            row = c.mean("ndcg@10")
            assert row is not None and ndcg == pytest.approx(row.mean, abs=1e-6)
            assert ea.Scalars("latency/p95_ms")[0].value == pytest.approx(c.latency.p95_ms)
        else:
            assert "quality/ndcg@10" not in tags  # a pruned config gets no fake 0
            assert hp["status"].string_value == "pruned"
    assert len(runs) == N_CONFIGS
