#!/usr/bin/env bash
# The calibration loop on the shipped set, end to end (docs/judges-calibration.md):
#   1. a gate on context_relevance without a record: refused before any work (exit 2);
#   2. +experiment=judge_calibration on the calibration split (wall time, /usr/bin/time);
#   3. SQuAD 2.0's human labels for its verdicts, bench.calibrate, a record;
#   4. the same gate on the release split: checked against the record (refused below the
#      floor; accepted with a floor the record clears).
# Usage: scripts/judge_calibration.sh OUT [extra overrides, e.g. judge=ensemble]
set -uo pipefail
out=${1:?usage: scripts/judge_calibration.sh OUT [overrides...]}; shift
py=${PYTHON:-python}
mkdir -p "$out"
records="$out/records"
gate='+gates=[{metric: context_relevance, min: 0.0}]'
common=(+experiment=judge_calibration "judge.calibration.records=$records" "$@")
echo "== 1. gate without a calibration record"
$py -m bench "${common[@]}" subset.split=release "$gate" "hydra.run.dir=$out/gate0"
echo "exit $?"
echo "== 2. calibration split"
/usr/bin/time -f "wall %e s" $py -m bench "${common[@]}" "hydra.run.dir=$out/calibration"
echo "exit $?"
echo "== 3. human labels, agreement, record"
$py -m bench.data.squad2_calibration "$out/calibration/judge_labelling.jsonl" \
    -o "$out/labels.jsonl"
$py -m bench.calibrate "$out/labels.jsonl" "$out/calibration/judge_labelling.jsonl" \
    --records "$records" | tee "$out/calibration_table.txt"
echo "== 4. the gate against the record (default floor 0.4)"
$py -m bench "${common[@]}" subset.split=release subset.max_queries=10 "$gate" \
    "hydra.run.dir=$out/gate1"
echo "exit $?"
echo "== 5. the same gate with a floor the record clears (the gate reads the record; a floor"
echo "      this low is a demonstration of the mechanism, not a release policy)"
floor=$($py -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['metrics']['context_relevance']['kappa'][0])" \
    "$records/context_relevance.json" 2>/dev/null) || floor=
if [[ -n "$floor" && "$floor" != "None" ]]; then
  $py -m bench "${common[@]}" subset.split=release subset.max_queries=10 "$gate" \
      "judge.calibration.floor=$floor" "hydra.run.dir=$out/gate2"
  echo "exit $?"
else
  echo "the record holds no kappa: no floor can be cleared"
fi
