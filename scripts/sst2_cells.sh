#!/usr/bin/env bash
# Issue 33's remaining SST-2 Table 1 cells at the reference's time scale, one after another,
# each a resumable call of experiments/smat_table1.py (hours per cell on 2 CPU cores):
#   1. the leakage control: n=500 SMaT students on explanations of shuffled text (the
#      teacher is trained first, in $OUT/teacher, if it has not finished), then its
#      comparison with the n=500 cell's students;
#   2. n=1000: none, smat, attention_all, one seed per call (seed 0's three settings, then
#      seed 1's, ...), so that each finished student is committed on its own: a machine lent
#      for one session (the teacher retrained, then two or three students) loses at most
#      the student it was training; the hour-long SMaT student goes before the shorter
#      static one, so that a session's end cuts off the cheaper one. smat_table1_cells.py
#      joins the seeds' files into one table.
# Each finished cell's results.json and table.md are copied to docs/results/smat_table1_sst2/
# and committed. A cell's process grows to 14-15 GB between evaluations, so above
# LIMIT_KB of resident memory it is interrupted (SIGINT: it checkpoints its running step) and
# restarted; `touch runs/sst2_pause` interrupts it and waits until the file is removed
# (for timing runs). A cell that fails three times without being interrupted stops the
# queue. Usage:  nohup scripts/sst2_cells.sh > runs/sst2_cells.log 2>&1 &
set -u
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/sst2_glue}
OUT=${OUT:-runs/smat_table1_sst2}
CONTROL_OUT=${CONTROL_OUT:-runs/smat_table1_sst2_control}
LIMIT_KB=${LIMIT_KB:-14000000}
RESULTS=docs/results/smat_table1_sst2
PAUSE=runs/sst2_pause

# run_cell NAME OUTPUT_DIR ARGS...: run the driver until it exits 0, then commit its results.
run_cell() {
  local name=$1 output=$2 failures=0
  shift 2
  [ -f "$RESULTS/$name.json" ] && { echo "$name: already in $RESULTS"; return 0; }
  while true; do
    while [ -f "$PAUSE" ]; do sleep 30; done
    MALLOC_ARENA_MAX=2 .venv/bin/python experiments/smat_table1.py --variant sst2 \
      --data-dir "$DATA" --output-dir "$output" --no-progress "$@" &
    local pid=$! interrupted=0
    while kill -0 "$pid" 2>/dev/null; do
      local rss
      rss=$(ps -o rss= -p "$pid" 2>/dev/null | tr -d ' ')
      # one SIGINT, then time to exit (it can take a minute); never a second one mid-exit
      if [ "$interrupted" -eq 0 ] && { [ -f "$PAUSE" ] || [ "${rss:-0}" -gt "$LIMIT_KB" ]; }; then
        echo "$(date -u +%FT%TZ) $name: interrupting (resident ${rss:-?} kB)"
        interrupted=1
        kill -INT "$pid"
      fi
      sleep 20
    done
    wait "$pid"
    local status=$?
    if [ "$status" -eq 0 ]; then break; fi
    if [ "$interrupted" -eq 0 ]; then
      failures=$((failures + 1))
      echo "$(date -u +%FT%TZ) $name: exit $status ($failures failures)"
      [ "$failures" -ge 3 ] && { echo "$name: stopping the queue"; exit 1; }
    fi
  done
  cp "$output/results.json" "$RESULTS/$name.json"
  cp "$output/table.md" "$RESULTS/$name.md"
  git add "$RESULTS/$name.json" "$RESULTS/$name.md"
  git commit -q -m "SST-2 Table 1 cell $name (issue 33)" -- "$RESULTS/$name.json" "$RESULTS/$name.md"
  echo "$(date -u +%FT%TZ) $name: committed"
}

run_cell control_n500_smat "$CONTROL_OUT" --teacher "$OUT/teacher" \
  --explainers smat --sizes 500 --explanation-source shuffled_text
# the control paired by seed with its cell's students (experiments/smat_leakage_control.py)
if [ ! -f "$RESULTS/control_n500_comparison.md" ]; then
  .venv/bin/python experiments/smat_leakage_control.py \
    --control "$RESULTS/control_n500_smat.json" --cells "$RESULTS/n500_none.json" \
    "$RESULTS/n500_attention_all.json" "$RESULTS/n500_smat.json" \
    --output-dir runs/smat_leakage_control_sst2 \
  && cp runs/smat_leakage_control_sst2/table.md "$RESULTS/control_n500_comparison.md" \
  && cp runs/smat_leakage_control_sst2/results.json "$RESULTS/control_n500_comparison.json" \
  && git add "$RESULTS/control_n500_comparison.md" "$RESULTS/control_n500_comparison.json" \
  && git commit -q -m "SST-2 leakage control paired with its cell's students (issue 33)" \
    -- "$RESULTS/control_n500_comparison.md" "$RESULTS/control_n500_comparison.json"
fi
for seed in 0 1 2 3 4; do
  for explainer in none smat attention_all; do
    run_cell "n1000_${explainer}_seed$seed" "$OUT" --explainers "$explainer" --sizes 1000 \
      --seeds "$seed"
  done
done
