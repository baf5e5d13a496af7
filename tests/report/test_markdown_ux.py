"""What a new user reads first in report.md: no alarming numbers for checks that did not
run, no percentiles of one sample, each stage once under Resources."""

from __future__ import annotations

import pytest

from bench.pipeline.run import run


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=[
            "dataset=synthetic", f"cache_dir={tmp_path_factory.mktemp('cache')}",
            "metrics.bootstrap_resamples=200"])
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    out = tmp_path_factory.mktemp("run")
    assert run(cfg, out).exit_code == 0
    return (out / "report.md").read_text()


def test_unauthorized_hits_read_not_enforced_without_a_filter(report: str) -> None:
    row = next(line for line in report.splitlines() if line.startswith("| `"))
    assert "not enforced" in row  # not a count that reads like a leak of a filter that ran
    assert "entitlement was not enforced" in report or "none was needed" in report


def test_a_stage_timed_once_has_no_percentiles(report: str) -> None:
    rows = [line for line in report.splitlines() if line.startswith("| chunk | total |")]
    assert rows and all("| 1 |" in r and "| - | - |" in r and "⚠" not in r for r in rows)


def test_resources_list_each_stage_once(report: str) -> None:
    start = report.index("## Resources")
    stages = [line.split("|")[1].strip() for line in report[start:].splitlines()
              if line.startswith("| ") and not line.startswith("| stage")]
    assert stages and len(stages) == len(set(stages)) and "data" in stages


def test_resources_show_the_heap_beside_rss(report: str) -> None:
    start = report.index("## Resources")
    lines = report[start:].splitlines()
    assert lines[2] == "| stage | peak RSS (MiB) | peak heap (MiB) | peak VRAM (MiB) |"
    rows = [[c.strip() for c in ln.split("|")[1:-1]] for ln in lines[4:]
            if ln.startswith("| ")]
    assert rows and all(len(r) == 4 for r in rows)
    for stage, rss, heap, vram in rows:
        assert int(rss) > 0 and heap != "-" and int(heap) > 0, stage  # /proc on Linux
        assert vram == "-"  # no GPU sampler on this machine
    assert "peak heap (RssAnon) is what the process allocated itself" in report
