"""The documentation: every command's ``--help`` names its page, the pages exist with those
titles, the results schema is documented column by column, README's links resolve, and the
repository cites nothing outside itself. (``mkdocs build --strict`` in ``make lint`` checks
the site's own links and nav.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from bench import docs
from bench.results import schema

ROOT = Path(__file__).resolve().parents[1]

#: every module ``python -m`` runs, and the page its --help must name
CLIS = {
    "bench": docs.GETTING_STARTED,
    "bench.evaluate": docs.EVALUATE,
    "bench.compare": docs.COMPARE,
    "bench.report": docs.REPORTS,
    "bench.report.sweep": docs.REPORTS,
    "bench.cache": docs.CACHE,
    "bench.calibrate": docs.GENERATION,
    "bench.data.foldoc": docs.BENCHMARK_CARD,
    "bench.power": docs.DECISIONS,
    "bench.data.splits": docs.DATA,
    "bench.capacity.servers": docs.CAPACITY,
    "bench.capacity.services.chat": docs.CAPACITY_HTTP,
    "bench.capacity.services.rag": docs.CAPACITY_HTTP,
    "bench.serve": docs.SERVE,
    "bench.traces": docs.TRACES,
    "bench.monitor": docs.TRACES,
    "bench.ingest.build": docs.INGESTION_BENCHMARK,
    "bench.ingest.pii_figures": docs.INGESTION_BENCHMARK,
    "bench.parsing.sweep": docs.INGESTION,
    "bench.data.squad2_calibration": docs.JUDGES,
    "bench.scaling": docs.PERFORMANCE,
}


def _runnable_modules() -> set[str]:
    """Modules of bench/ that ``python -m`` can run (they hold a ``__main__`` guard)."""
    found = set()
    for path in (ROOT / "bench").rglob("*.py"):
        if '__name__ == "__main__"' in path.read_text(encoding="utf-8"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.add(".".join(p for p in parts if p != "__main__"))
    return found


def test_every_command_is_listed() -> None:
    assert _runnable_modules() == set(CLIS)


@pytest.mark.parametrize("module", sorted(CLIS))
def test_help_names_the_commands_page(module: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "kernels")]))
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                         text=True, env=env, timeout=180, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert CLIS[module].help_line() in out.stdout
    assert "Traceback" not in out.stderr


def _pages() -> list[docs.DocsPage]:
    return [v for v in vars(docs).values() if isinstance(v, docs.DocsPage)]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.path)
def test_each_page_exists_with_its_title(page: docs.DocsPage) -> None:
    text = (ROOT / page.path).read_text(encoding="utf-8")
    assert text.splitlines()[0] == f"# {page.title}"


def test_every_page_is_in_the_site_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert pages and [p for p in pages if p not in nav] == []


@pytest.mark.parametrize("name", ["PER_QUERY", "TIMINGS", "SUMMARY", "CONFIGS", "COMPARISONS"])
def test_results_page_names_every_column(name: str) -> None:
    table: pa.Schema = getattr(schema, name)
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert [f.name for f in table if f"`{f.name}" not in page] == []
    assert f"`schema_version` {schema.SCHEMA_VERSION}" in page or \
        f"`schema_version` is **{schema.SCHEMA_VERSION}**" in page


def test_readme_links_into_the_docs_resolve() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs/)[^)#\s]+)", readme)
    assert links, "README links into docs/"
    assert [link for link in links if not (ROOT / link).is_file()] == []


# Paths a user's clone does not have: the shared folder beside the lead's checkout, by any
# spelling, and the metric conventions' old file name (the page is docs/metrics.md). Built
# from parts so that this file does not match itself.
OUTSIDE = re.compile("|".join([re.escape(".." + "/shared"), re.escape("/work" + "/shared"),
                               r"\bshared/[A-Z]+\.md", re.escape("METRICS" + ".md")]))
SCANNED = ("bench", "kernels", "tests", "scripts", "conf", "docs", "README.md", "Makefile",
           "pyproject.toml", "mkdocs.yml", "Dockerfile.cuda")


def test_nothing_cites_a_path_outside_the_repository() -> None:
    hits = []
    for top in SCANNED:
        base = ROOT / top
        files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
        for path in files:
            if "__pycache__" in path.parts or path.suffix in (".parquet", ".pyc", ".png"):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            hits += [f"{path.relative_to(ROOT)}:{n}" for n, line in
                     enumerate(text.splitlines(), start=1) if OUTSIDE.search(line)]
    assert hits == [], f"these cite files outside a user's clone (cite docs/ instead): {hits}"

