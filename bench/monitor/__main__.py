"""``python -m bench.monitor RULES WINDOW [--out monitor.json]``: the guardrails of RULES
(bench.monitor.rules) over WINDOW (records.jsonl of ``python -m bench.traces import``).

Exit codes like the release gates: 0 every rule passed (or had no data, which is said),
3 at least one alert, 2 bad input (a malformed rules file names RULES:line and the key).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bench.docs import TRACES
from bench.metrics.cli import OneLineParser, format_table, run_cli


def _body(argv: Sequence[str] | None) -> int:
    from bench.monitor.rules import check, read_rules
    from bench.traces.importer import read_records

    p = OneLineParser(prog="python -m bench.monitor",
                      description="Guardrails over a window of production traces.",
                      epilog=TRACES.help_line())
    p.add_argument("rules", type=Path, help="rules YAML")
    p.add_argument("window", type=Path, help="records.jsonl (python -m bench.traces import)")
    p.add_argument("--out", type=Path, default=None, help="monitor.json report")
    a = p.parse_args(argv)
    rules = read_rules(a.rules)
    records = read_records(a.window)
    outcomes = check(rules, records)
    print(format_table(["rule", "status", "value", "bound", "n", "deploy in window"],
                       [[o.rule, o.status, o.value, o.bound, o.n,
                         ", ".join(o.deploys) or "no"] for o in outcomes]))
    alerts = [o for o in outcomes if o.status == "alert"]
    for o in alerts:
        print(f"bench.monitor: alert: {o.rule} = {o.value:.4g}, want {o.bound}; {o.triage}")
    for o in outcomes:
        if o.status == "no_data":
            print(f"bench.monitor: {o.rule}: no data in this window (not checked)")
    if a.out is not None:
        from bench.results.write import atomic_write_bytes

        atomic_write_bytes(a.out, json.dumps({
            "rules": str(a.rules), "window": str(a.window), "records": len(records),
            "outcomes": [o.to_json() for o in outcomes], "alerts": len(alerts)},
            indent=2).encode())
    return 3 if alerts else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(_body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
