#!/usr/bin/env bash
# Issue 33's remaining SST-2 Table 1 cells at the reference's time scale, one after another,
# each a resumable call of experiments/smat_table1.py (hours per cell on 2 CPU cores):
#   1. the leakage control: n=500 SMaT students on explanations of shuffled text (the
#      teacher is trained first, in $OUT/teacher, if it has not finished), then its
#      comparison with the n=500 cell's students;
#   2. the teacher portability probe (which XLA flags make teachers agree across machines);
#   3. n=1000: none, smat, attention_all, one seed per call (seed 0's three settings, then
#      seed 1's, ...), so that each finished student is committed on its own: a machine lent
#      for one session (the teacher retrained, then two or three students) loses at most
#      the student it was training; the hour-long SMaT student goes before the shorter
#      static one, so that a session's end cuts off the cheaper one. The teacher trained on
#      another machine can have other weights (its float summation order differs with the
#      CPU's vector instructions), and a paired comparison needs one teacher, so each
#      student is kept under its teacher's weights fingerprint,
#      $RESULTS/n1000/teacher_<weights>/<setting>_seed<s>.json, and only the students of
#      this machine's teacher count as done. smat_table1_cells.py joins one such folder.
# Each finished cell's results.json and table.md are copied to docs/results/smat_table1_sst2/
# and committed. A cell's process grows to 14-15 GB between evaluations, so above
# LIMIT_KB of resident memory it is interrupted (SIGINT: it checkpoints its running step) and
# restarted; `touch runs/sst2_pause` interrupts it and waits until the file is removed
# (for timing runs). A call that fails three times without being interrupted stops the
# queue. SETTINGS="none attention_all" trains only those settings (in that order; e.g. to
# finish the half-hour students before a session's end on a machine where a SMaT student
# takes two hours). Usage:  nohup scripts/sst2_cells.sh > runs/sst2_cells.log 2>&1 &
set -u
cd "$(dirname "$0")/.."
DATA=${DATA:-data/sst2_glue}
OUT=${OUT:-runs/smat_table1_sst2}
CONTROL_OUT=${CONTROL_OUT:-runs/smat_table1_sst2_control}
LIMIT_KB=${LIMIT_KB:-14000000}
PYTHON=${PYTHON:-.venv/bin/python}
RESULTS=docs/results/smat_table1_sst2
PAUSE=runs/sst2_pause

# run_driver NAME OUTPUT_DIR ARGS...: run the driver until it exits 0.
run_driver() {
  local name=$1 output=$2 failures=0
  shift 2
  while true; do
    while [ -f "$PAUSE" ]; do sleep 30; done
    MALLOC_ARENA_MAX=2 "$PYTHON" experiments/smat_table1.py --variant sst2 \
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
    if [ "$status" -eq 0 ]; then return 0; fi
    if [ "$interrupted" -eq 0 ]; then
      failures=$((failures + 1))
      echo "$(date -u +%FT%TZ) $name: exit $status ($failures failures)"
      [ "$failures" -ge 3 ] && { echo "$name: stopping the queue"; exit 1; }
    fi
  done
}

# run_cell DEST OUTPUT_DIR ARGS...: unless DEST.json is committed, train the cell, check that
# its students learned from $TEACHER (when set), copy its results to DEST.{json,md}, commit.
run_cell() {
  local dest=$1 output=$2
  shift 2
  [ -f "$dest.json" ] && { echo "$dest: already committed"; return 0; }
  run_driver "$dest" "$output" "$@"
  if [ -n "${TEACHER:-}" ]; then
    local learned
    learned=$("$PYTHON" -c 'import json, sys
print(*sorted({r["teacher_params"] for r in json.load(open(sys.argv[1]))["records"]}))' \
      "$output/results.json")
    [ "$learned" = "$TEACHER" ] || {
      echo "$dest: its students learned from teacher weights '$learned', not $TEACHER;" \
        "stopping the queue"; exit 1; }
  fi
  mkdir -p "$(dirname "$dest")"
  cp "$output/results.json" "$dest.json"
  cp "$output/table.md" "$dest.md"
  git add "$dest.json" "$dest.md"
  git commit -q -m "SST-2 Table 1 cell ${dest#"$RESULTS"/} (issue 33)" -- "$dest.json" "$dest.md"
  echo "$(date -u +%FT%TZ) $dest: committed"
}

run_cell "$RESULTS/control_n500_smat" "$CONTROL_OUT" --teacher "$OUT/teacher" \
  --explainers smat --sizes 500 --explanation-source shuffled_text
# the control paired by seed with its cell's students (experiments/smat_leakage_control.py)
if [ ! -f "$RESULTS/control_n500_comparison.md" ]; then
  "$PYTHON" experiments/smat_leakage_control.py \
    --control "$RESULTS/control_n500_smat.json" --cells "$RESULTS/n500_none.json" \
    "$RESULTS/n500_attention_all.json" "$RESULTS/n500_smat.json" \
    --output-dir runs/smat_leakage_control_sst2 \
  && cp runs/smat_leakage_control_sst2/table.md "$RESULTS/control_n500_comparison.md" \
  && cp runs/smat_leakage_control_sst2/results.json "$RESULTS/control_n500_comparison.json" \
  && git add "$RESULTS/control_n500_comparison.md" "$RESULTS/control_n500_comparison.json" \
  && git commit -q -m "SST-2 leakage control paired with its cell's students (issue 33)" \
    -- "$RESULTS/control_n500_comparison.md" "$RESULTS/control_n500_comparison.json"
fi
# which XLA CPU flags would give every kind of machine one teacher: a few minutes, once per
# machine, its fingerprints committed (scripts/teacher_portability.py); a failure stops only it
PORTABILITY=docs/results/teacher_portability
"$PYTHON" scripts/teacher_portability.py && git add "$PORTABILITY" \
  && { git diff --cached --quiet -- "$PORTABILITY" \
       || git commit -q -m "Teacher portability probe on another machine (issue 33)" \
         -- "$PORTABILITY"; }
# this machine's teacher (trained first if it has not finished) names the n=1000 folder
run_driver teacher "$OUT" --teacher-only
TEACHER=$("$PYTHON" -c 'import sys
from smat.store.model_store import saved_params_fingerprint
print(saved_params_fingerprint(sys.argv[1]))' "$OUT/teacher/model") || exit 1
echo "$(date -u +%FT%TZ) n=1000 students of teacher $TEACHER"
for seed in 0 1 2 3 4; do
  for explainer in ${SETTINGS:-none smat attention_all}; do
    run_cell "$RESULTS/n1000/teacher_$TEACHER/${explainer}_seed$seed" "$OUT" \
      --explainers "$explainer" --sizes 1000 --seeds "$seed"
  done
done
