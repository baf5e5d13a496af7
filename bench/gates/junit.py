"""Gate results as JUnit XML, so CI systems list every gate as a test.

One ``<testcase>`` per gate x config: the threshold gates of ``gates:`` (suite
``bench.gates.threshold``), the regression gates (``bench.gates.regression``) and one per
critical query x metric x config (``bench.gates.critical``). A failing case carries a
``<failure>`` whose message says the value, the bound and the margin; every case carries them
as ``<properties>`` too (value, bound, margin; delta and CI for a regression gate). A config
the budget pruned is ``<skipped>``. The file is written to ``gates.junit.xml`` in the run dir
whenever a run has a gate, and to ``gates_junit=<path>`` when set; ``python -m bench.compare
--gate ... --junit PATH`` writes the regression gates' file.

The layout is the common JUnit one (Jenkins, GitLab, GitHub test reporters read it):
``<testsuites name tests failures errors skipped>`` holding ``<testsuite>`` elements with the
same counts, ``<testcase classname name time>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.config.schema import GateConfig
from bench.gates.release import GateResult
from bench.report.fmt import num
from bench.results.records import ConfigRow

if TYPE_CHECKING:
    from bench.gates.regression import RegressionOutcome

THRESHOLD = "bench.gates.threshold"
REGRESSION = "bench.gates.regression"
CRITICAL = "bench.gates.critical"
JUNIT_NAME = "gates.junit.xml"


@dataclass(frozen=True)
class GateCase:
    """One test case: ``status`` is passed, failed or skipped."""

    suite: str
    classname: str
    name: str
    status: str
    message: str = ""
    properties: tuple[tuple[str, str], ...] = ()


def _bound_text(gate: GateConfig) -> str:
    parts = []
    if gate.min is not None:
        parts.append(f">= {gate.min:g}")
    if gate.max is not None:
        parts.append(f"<= {gate.max:g}")
    return " and ".join(parts)


def result_cases(results: Sequence[GateResult], pruned: Sequence[ConfigRow],
                 gates: Sequence[GateConfig]) -> list[GateCase]:
    """The ``gates:`` of a run as judged by ``bench.gates.release`` (one rule for the log,
    report.md, run.json and this file): one case per gate result, and a skipped case per
    gate x config the budget pruned."""
    out = [GateCase(THRESHOLD, f"{THRESHOLD}.{r.config_id}", f"{r.metric}[{r.scope}]",
                    "passed" if r.passed else "failed", "" if r.passed else r.line,
                    (("value", num(r.value, spec=".6g")), ("label", r.label), ("result", r.line)))
           for r in results]
    for gate in gates:
        for c in pruned:
            out.append(GateCase(THRESHOLD, f"{THRESHOLD}.{c.config_id}",
                                f"{gate.metric}[{gate.scope}] {_bound_text(gate)}", "skipped",
                                c.pruned_reason or c.status))
    return out


def regression_cases(outcome: RegressionOutcome) -> list[GateCase]:
    """One case per regression gate x paired config and per critical query x metric x config;
    a failing case when nothing paired (the gate checked nothing)."""
    out = []
    if outcome.nothing_paired:
        out.append(GateCase(REGRESSION, f"{REGRESSION}.pairing", "configs paired with the "
                            "baseline", "failed", outcome.failure_lines()[0]))
    for c in outcome.checks:
        name = f"{c.metric}[{c.scope}] {c.rule}"
        bound = None if c.budget is None else -c.budget
        props: tuple[tuple[str, str], ...] = (
            ("value", num(c.judged, spec=".6g")), ("bound", num(bound, spec=".6g")),
            ("margin", num(c.margin, spec=".6g")),
            ("baseline_mean", num(c.baseline_mean, spec=".6g")),
            ("current_mean", num(c.current_mean, spec=".6g")),
            ("delta", num(c.delta, spec=".6g")), ("ci_low", num(c.ci_low, spec=".6g")),
            ("ci_high", num(c.ci_high, spec=".6g")),
            ("n", str(c.n)), ("judged_on", outcome.bound))
        msg = "" if not c.regressed else (
            c.note if c.judged is None else
            f"judged gain {c.judged:+.4f} < bound {-(c.budget or 0):+.4g} (margin "
            f"{c.margin:+.4g}); delta {c.delta:+.4f}, CI [{c.ci_low:+.4f}, {c.ci_high:+.4f}]")
        out.append(GateCase(REGRESSION, f"{REGRESSION}.{c.config_id}", name,
                            "failed" if c.regressed else "passed", msg, props))
    for q in outcome.critical:
        name = f"{q.query_id} {q.metric} must not regress"
        sign = 1.0 if q.higher_is_better else -1.0
        bound = None if q.baseline is None else q.baseline - sign * outcome.tolerance
        props = (("value", num(q.current, spec=".6g")), ("bound", num(bound, spec=".6g")),
                 ("margin", num(None if q.current is None or bound is None
                                 else sign * (q.current - bound), spec=".6g")),
                 ("baseline", num(q.baseline, spec=".6g")), ("category", q.category))
        status = "failed" if q.regressed else "skipped" if q.current is None else "passed"
        msg = q.note if q.current is None or q.baseline is None or bound is None else (
            f"value {q.current:.4f}, bound {bound:.4f} (baseline {q.baseline:.4f}, tolerance "
            f"{outcome.tolerance:g}), margin {sign * (q.current - bound):+.4g}"
            if q.regressed else "")
        out.append(GateCase(CRITICAL, f"{CRITICAL}.{q.config_id}", name, status,
                            q.note if status == "skipped" else msg, props))
    return out


def to_xml(cases: Sequence[GateCase], *, name: str = "bench gates",
           properties: Sequence[tuple[str, str]] = ()) -> ET.Element:
    """The ``<testsuites>`` element (one ``<testsuite>`` per suite that has cases)."""
    root = ET.Element("testsuites", name=name)
    totals: dict[str, int] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in dict.fromkeys(c.suite for c in cases):
        mine = [c for c in cases if c.suite == suite]
        counts = {"tests": len(mine), "failures": sum(c.status == "failed" for c in mine),
                  "errors": 0, "skipped": sum(c.status == "skipped" for c in mine)}
        el = ET.SubElement(root, "testsuite", {"name": suite, "time": "0",
                                               **{k: str(v) for k, v in counts.items()}})
        if properties:
            props = ET.SubElement(el, "properties")
            for k, v in properties:
                ET.SubElement(props, "property", name=k, value=v)
        for c in mine:
            tc = ET.SubElement(el, "testcase", classname=c.classname, name=c.name, time="0")
            if c.properties:
                props = ET.SubElement(tc, "properties")
                for k, v in c.properties:
                    ET.SubElement(props, "property", name=k, value=v)
            if c.status == "failed":
                ET.SubElement(tc, "failure", message=c.message, type="GateFailed").text = (
                    c.message)
            elif c.status == "skipped":
                ET.SubElement(tc, "skipped", message=c.message)
        for key, count in counts.items():
            totals[key] += count
    for key, count in totals.items():
        root.set(key, str(count))
    return root


def write_junit(path: Path, cases: Sequence[GateCase], *,
                properties: Sequence[tuple[str, str]] = ()) -> Path:
    """Write the XML atomically (temp file + rename); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tree = ET.ElementTree(to_xml(cases, properties=properties))
    ET.indent(tree)
    tmp = path.with_name(f".{path.name}.tmp")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
    return path
