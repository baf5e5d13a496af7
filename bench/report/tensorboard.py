"""TensorBoard export: one TB run per config, with scalars and hparams, so
``tensorboard --logdir DIR`` shows a whole sweep (HPARAMS tab: one row per config).

Every config declares the same experiment (the union of hparam keys over the sweep, each with
the type of its first value, and the union of metric tags), so the dashboard shows one table;
a config's session holds only its own hparams (a key it lacks shows empty, never a filler of
another type) and a metric it did not measure is not written for it (no fake 0). Tags:
``quality/<metric>`` (+ ``_ci_low``/``_ci_high``), ``latency/p50_ms|p95_ms|p99_ms``,
``throughput/qps``, ``memory/peak_vram_mib``, ``cost/per_query``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.errors import MissingDependencyError
from bench.report.load import ConfigView, Merged


def _scalars(c: ConfigView, metrics: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in metrics:
        row = c.mean(m)
        if row is None:
            continue
        for name, v in (("", row.mean), ("_ci_low", row.ci_low), ("_ci_high", row.ci_high)):
            if v is not None:
                out[f"quality/{m}{name}"] = float(v)
    lat = c.latency
    for name, v in (("latency/p50_ms", lat.p50_ms), ("latency/p95_ms", lat.p95_ms),
                    ("latency/p99_ms", lat.p99_ms), ("throughput/qps", c.qps),
                    ("memory/peak_vram_mib",
                     None if c.peak_vram_bytes is None else c.peak_vram_bytes / 2**20),
                    ("cost/per_query", c.cost_per_query)):
        if v is not None:
            out[name] = float(v)
    return out


def _hparams(c: ConfigView) -> dict[str, Any]:
    hp: dict[str, Any] = {"run": c.run_name, "config_id": c.config_id, "label": c.label,
                          "kind": c.kind, "status": c.status}
    for k, v in c.params.items():
        hp[f"param.{k}"] = v if isinstance(v, (int, float, str, bool)) else json.dumps(v)
    return hp


def tb_run_name(c: ConfigView) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in c.key)


def write_tensorboard(merged: Merged, logdir: Path, metrics: list[str] | None = None) -> Path:
    """Write one event-file folder per config under ``logdir``; returns ``logdir``."""
    try:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams
    except ImportError:
        raise MissingDependencyError("tensorboard", "cpu", "the TensorBoard export") from None
    metrics = metrics if metrics is not None else merged.metrics()
    per = [(c, _hparams(c), _scalars(c, metrics)) for c in merged.configs]
    first: dict[str, Any] = {}
    for _, hp, _ in per:
        for k, v in hp.items():
            first.setdefault(k, v)
    names = {k: 0.0 for k in dict.fromkeys(k for _, _, sc in per for k in sc)}
    exp, _, _ = hparams(first, names)
    logdir.mkdir(parents=True, exist_ok=True)
    for c, hp, sc in per:
        _, ssi, sei = hparams(hp, names)
        w = SummaryWriter(log_dir=str(logdir / tb_run_name(c)))
        try:
            fw = w._get_file_writer()
            for summ in (exp, ssi, sei):
                fw.add_summary(summ)
            for tag, v in sc.items():
                w.add_scalar(tag, v, 0)
        finally:
            w.close()
    return logdir
