"""The parsing stage in a whole run: dataset=raw_docs + parser=<name> before chunking, on the
tiny real-file folder (tests/parsing/parsing_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from parsing_fixtures import make_folder

from bench.errors import ConfigError
from bench.pipeline.run import RunResult, run

pytest.importorskip("pypdf", reason="the ingest extra (pip install -e '.[ingest]')")


def _run(cache: Path, run_dir: Path, *extra: str) -> RunResult:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            f"cache_dir={cache}", "embedder=static_l3", "metrics.bootstrap_resamples=100",
            *extra], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return run(cfg, run_dir)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_folder(tmp_path_factory.mktemp("raw"))


@pytest.mark.slow  # a whole run: six files through five parsers' worker processes, embedding,
# retrieval and the latency pass (~40 s CPU on the 2 shared cores)
def test_pypdf_run_reports_each_file_and_the_lost_scan(folder: Path, tmp_path: Path) -> None:
    res = _run(tmp_path / "cache", tmp_path / "run", "dataset=raw_docs",
               f"dataset.path={folder}", "parser=pypdf")
    assert res.exit_code == 0
    rows = {r["doc_id"]: r for r in pq.read_table(res.run_dir / "parsing.parquet").to_pylist()}
    assert set(rows) == {"pdf-1", "scan-1", "scan-2", "html-1", "docx-1", "md-1"}
    assert rows["pdf-1"]["parser"] == "pypdf" and rows["pdf-1"]["status"] == "ok"
    assert rows["pdf-1"]["pages"] == 2
    # the image-only PDF has no text layer: not silently dropped, a status with its reason
    assert rows["scan-2"]["status"] == "empty" and "no text layer" in rows["scan-2"]["reason"]
    assert rows["scan-2"]["gold_queries"] == 1
    assert rows["html-1"]["parser"] == "trafilatura"  # its type's default (fallback)
    manifest = json.loads((res.run_dir / "run.json").read_text())
    assert manifest["stages"]["parsing"]["queries_losing_gold"] == 1
    report = (res.run_dir / "report.md").read_text()
    assert "## Parsing" in report
    assert "Queries with a gold document that did not parse: 1 of 6" in report
    # every query is evaluated, the one whose gold document was lost too
    per_query = pq.read_table(res.run_dir / "per_query.parquet").to_pylist()
    assert {r["query_id"] for r in per_query} >= {"q-scan2", "q-pdf"}
    # chunk quality per document with a truth, and the extractive bound per answer query
    chunks = {r["doc_id"]: r for r in pq.read_table(
        res.run_dir / "parsing_chunks.parquet").to_pylist()}
    assert set(chunks) == set(rows)
    assert chunks["scan-2"]["chunks"] == 0 and chunks["scan-2"]["status"] == "empty"
    # fixed_tokens keeps no heading: the Markdown body's chunk misses "Compilers"
    assert chunks["md-1"]["heading_match"] == 0.0
    assert chunks["docx-1"]["tables_lost"] == 0.0
    answers = {r["query_id"]: r for r in pq.read_table(
        res.run_dir / "parsing_answers.parquet").to_pylist()}
    assert set(answers) == {"q-pdf", "q-md"}  # the queries with reference answers
    assert answers["q-md"]["answer_in_top_k"] == 1.0 and answers["q-md"]["k"] == 5
    assert "Extractive answer bound" in report and "heading match" in report


def test_parser_without_raw_docs_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config key parser: a parser reads raw files"):
        _run(tmp_path / "cache", tmp_path / "run", "dataset=synthetic", "parser=pypdf")


def test_raw_docs_without_parser_is_a_config_error(folder: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config key parser: dataset=raw_docs parses"):
        _run(tmp_path / "cache", tmp_path / "run", "dataset=raw_docs",
             f"dataset.path={folder}")
