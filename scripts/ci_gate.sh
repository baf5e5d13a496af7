#!/usr/bin/env bash
# The benchmark steps of .github/workflows/bench-gate.yml (docs/ci.md), runnable locally too:
#   scripts/ci_gate.sh baseline OUT            the fast subset, no regression gates: what main
#                                              keeps as the pull requests' baseline artifact
#   scripts/ci_gate.sh pr BASELINE OUT         the same subset, gated against BASELINE
#   scripts/ci_gate.sh nightly BASELINE OUT    every query, gated against the last nightly run
#                                              (BASELINE=none: the first night, no baseline yet)
# Extra arguments after OUT go to `python -m bench` as they are (e.g. dataset.max_docs=400).
# Exit codes are bench's: 0 passed, 2 bad config or input, 3 a gate failed. Each run writes
# OUT/gates.junit.xml (threshold gates, regression gates, critical queries).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
EXPERIMENT=${BENCH_EXPERIMENT:-quickstart}
# the pull requests' subset: seeded, stratified by category, the same queries every run
SUBSET=${BENCH_SUBSET:-150}
# questions users ask most: never worse, each on its own (kept in any subset)
CRITICAL=${BENCH_CRITICAL:-foldoc2:q0001,foldoc2:q0003,foldoc2:q0005}

THRESHOLDS='gates=[{metric: ndcg@10, min: 0.4, use_ci_bound: true}]'
REGRESSION_GATES='regression.gates=[{metric: ndcg@10, max_drop: 0.02}, '
REGRESSION_GATES+='{metric: recall@100, max_drop: 0.02}, '
REGRESSION_GATES+='{metric: mrr, scope: "category:exact_lookup", max_drop: 0.03}]'
# the critical ids go to every mode: they are kept in any subset, so the baseline run
# evaluates the same queries as the gated one (and pairs with it)
KEEP="regression.critical.query_ids=[$CRITICAL]"

mode=${1:?usage: scripts/ci_gate.sh baseline OUT | pr BASELINE OUT | nightly BASELINE OUT}
shift
case "$mode" in
  baseline)
    out=${1:?baseline OUT}; shift
    args=("subset.max_queries=$SUBSET" "$THRESHOLDS" "$KEEP") ;;
  pr)
    base=${1:?pr BASELINE OUT}; out=${2:?pr BASELINE OUT}; shift 2
    args=("subset.max_queries=$SUBSET" "$THRESHOLDS" "$KEEP" "gates_against=$base"
          "$REGRESSION_GATES") ;;
  nightly)
    base=${1:?nightly BASELINE OUT}; out=${2:?nightly BASELINE OUT}; shift 2
    args=("$THRESHOLDS" "$KEEP")
    [[ "$base" == none ]] || args+=("gates_against=$base" "$REGRESSION_GATES") ;;
  *)
    echo "scripts/ci_gate.sh: unknown mode '$mode' (baseline, pr or nightly)" >&2; exit 2 ;;
esac

HF_HUB_OFFLINE=1 exec "$PY" -m bench "+experiment=$EXPERIMENT" "${args[@]}" \
  "hydra.run.dir=$out" "$@"
