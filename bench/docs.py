"""The documentation page of each command, for the last line of its ``--help``.

The pages live in the repository's ``docs/`` (built with ``mkdocs build --strict``); a path
relative to the repository root is what a user of a clone can open, and the title is what the
built site shows. ``tests/test_docs.py`` checks that every page exists with that title.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DocsPage:
    """One page of ``docs/``: its path from the repository root and its title (its ``# H1``)."""

    path: str
    title: str

    def help_line(self) -> str:
        """The line a command's ``--help`` ends with."""
        return f"documentation: {self.path} ({self.title})"


GETTING_STARTED = DocsPage("docs/getting-started.md", "Getting started")
EXPERIMENTS = DocsPage("docs/experiments/index.md", "Experiments")
METRICS = DocsPage("docs/metrics.md", "Metric conventions")
EVALUATE = DocsPage("docs/evaluate.md", "Scoring a TREC run")
COMPARE = DocsPage("docs/compare.md", "Comparing runs")
REPORTS = DocsPage("docs/reports.md", "Reports and gates")
CACHE = DocsPage("docs/cache.md", "The cache")
GENERATION = DocsPage("docs/generation.md", "Generation and judges")
BENCHMARK_CARD = DocsPage("docs/benchmark-card.md", "The benchmark card")
DECISIONS = DocsPage("docs/decisions.md", "Decisions and power")
CI = DocsPage("docs/ci.md", "Regression gates and CI")
DATA = DocsPage("docs/data.md", "Bring your own data")
CAPACITY = DocsPage("docs/experiments/capacity.md", "capacity")
CAPACITY_HTTP = DocsPage("docs/experiments/capacity_http.md", "capacity_http")
SERVE = DocsPage("docs/serve.md", "Serving a config")
TRACES = DocsPage("docs/traces.md", "Production traces")
INGESTION_BENCHMARK = DocsPage("docs/ingestion-benchmark.md", "The ingestion benchmark")
INGESTION = DocsPage("docs/ingestion.md", "Ingestion: raw documents and parsers")
JUDGES = DocsPage("docs/judges-calibration.md",
                  "Judges you can trust: rubrics, calibration, verifiers")
PERFORMANCE = DocsPage("docs/performance.md", "Performance")
