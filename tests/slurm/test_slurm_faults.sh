#!/usr/bin/env bash
# Slurm's faults as records, read from a real accounting database: the one-node cluster of
# tests/slurm/cluster.sh with slurmdbd over MariaDB, so the collector's states come from sacct.
#   1. three quick cells as one array, the third cancelled while pending: two ok cells recorded by their own
#      tasks (sacct: COMPLETED), the third by the collector (Slurm keeps no record of it, sacct included);
#   2. the node set DOWN (scontrol) while a long cell runs: the array is not requeued, the cell's task records
#      node_fail with slurmstepd's words and keeps its checkpointed epochs; sacct says NODE_FAIL;
#   3. the node dies while a long cell runs (slurmd, slurmstepd and the cell's processes SIGKILLed): only a
#      checkpoint is left; the controller declares the node DOWN (SlurmdTimeout) and the job NODE_FAIL; once
#      the node is back the collector records node_fail from sacct, keeping the epochs;
#   4. --resume over the five cells submits exactly the three that did not end ok, and leaves the two alone.
set -uo pipefail
khost=$1 src=${KHOST_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}
name=test_slurm_faults accounting=1 slurmd_timeout=10
. "$(dirname "$0")/cluster.sh"

quick=(--plugins cntk --devices cpu --epochs 1 --limit-train 256 --limit-val 128 --timeout 600)
long=(--plugins cntk --devices cpu --epochs 100000 --limit-train 256 --limit-val 64 --cpus-per-cell 1 --timeout 600)
out=$tmp/results
t0=$SECONDS
submitted() { # the matrix's output, the array's size - 1 -> "job collector plan"
  local j c p
  j=$(sed -n "s/.* -> job \([0-9]*\) (array 0-$2), collector job \([0-9]*\);.*/\1/p" <<<"$1")
  c=$(sed -n "s/.* -> job \([0-9]*\) (array 0-$2), collector job \([0-9]*\);.*/\2/p" <<<"$1")
  p=$(sed -n 's/.*; plan \(.*\)$/\1/p' <<<"$1")
  [ -n "$j" ] && [ -n "$c" ] && echo "$j $c $p"
}
acct_state() { sacct -n -P -X -j "$1" --format=JobID,State 2>/dev/null | sed -n "s/^$1_$2|//p"; }
reason() { grep -o '"reason":[[:space:]]*"[^"]*"' "$1" | head -n 1; }
node_back() { # the node idle again (ReturnToService=2 returns it when slurmd registers; an admin DOWN is resumed)
  for _ in $(seq 1 60); do
    case "$(node_state)" in idle) return 0 ;; down|drain*) scontrol update nodename=khostnode state=resume 2>/dev/null ;; esac
    sleep 1
  done
  say "the node is $(node_state) after 60 s"; return 1
}

# --- 1. three quick cells, the third cancelled while pending -------------------------------------------------
sub=$("$khost" matrix --slurm "${quick[@]}" --tasks mnist_mlp,imdb_fasttext,mnist_cnn --out "$out" 2>&1)
echo "$sub"
read -r job1 coll1 plan1 <<<"$(submitted "$sub" 2)"
check "1: one array of 3 cells and a collector" test -n "${job1:-}"
[ -n "${job1:-}" ] || exit 1
scancel "${job1}_2" # cells ask for the whole node: task 2 waits behind 0 and 1
check "1: the array script asks Slurm not to requeue" grep -q -- "^#SBATCH --no-requeue$" "$(dirname "$plan1")/array.sh"
wait_jobs "$job1,$coll1" 240
co1=$(cat "$(dirname "$plan1")/collect-$coll1.out" 2>/dev/null); echo "$co1"
for t in mnist_mlp imdb_fasttext; do
  check "1: $t ok, by its own task" test "$(field "$out/$t/cntk__cpu.json" status)" = ok
done
f=$out/mnist_cnn/cntk__cpu.json
# Slurm keeps no trace of an array element cancelled while pending, in the controller or in the database:
# the collector says so, and the missing output file shows the task never started.
check "1: the cancelled cell recorded by the collector: never started, not in Slurm's records" \
  test "$(field "$f" status)" = cancelled -a -n "$(reason "$f" | grep "array task ${job1}_2 never started (no ${job1}_2.out) and Slurm does not list it")"
check "1: the collector read the two ok cells' states from sacct" grep -q "(states: 2 from sacct, 0 from scontrol)" <<<"$co1"
check "1: the database: COMPLETED, COMPLETED, nothing" \
  test "$(acct_state "$job1" 0)" = COMPLETED -a "$(acct_state "$job1" 1)" = COMPLETED -a -z "$(acct_state "$job1" 2)"

# --- 2. the node set DOWN while a cell runs ------------------------------------------------------------------
sub=$("$khost" matrix --slurm "${long[@]}" --tasks lstm_text_generation --out "$out" 2>&1); echo "$sub"
read -r job2 coll2 plan2 <<<"$(submitted "$sub" 0)"
f2=$out/lstm_text_generation/cntk__cpu.json
for _ in $(seq 1 240); do [ "$(epochs "$f2")" -ge 2 ] && break; sleep 0.5; done
check "2: the long cell runs and checkpoints" test "$(epochs "$f2")" -ge 2
scontrol update nodename=khostnode state=down reason=khost-test-down
for _ in $(seq 1 60); do [ -z "$(squeue -h -j "$job2" 2>/dev/null)" ] && break; sleep 0.5; done
node_back
wait_jobs "${job2:-0},${coll2:-0}" 120
cat "$(dirname "${plan2:-x}")/collect-$coll2.out" 2>/dev/null
say "$(reason "$f2")"
check "2: node_fail with slurmstepd's words, by the cell's own task" \
  test "$(field "$f2" status)" = node_fail -a -n "$(reason "$f2" | grep "CANCELLED AT .* DUE TO NODE FAILURE")"
check "2: checkpointed epochs kept" test "$(epochs "$f2")" -ge 2
check "2: not requeued: sacct says NODE_FAIL" test "$(acct_state "$job2" 0)" = NODE_FAIL

# --- 3. the node dies under a running cell -------------------------------------------------------------------
sub=$("$khost" matrix --slurm "${long[@]}" --tasks imdb_bidirectional_lstm --out "$out" 2>&1); echo "$sub"
read -r job3 coll3 plan3 <<<"$(submitted "$sub" 0)"
f3=$out/imdb_bidirectional_lstm/cntk__cpu.json
for _ in $(seq 1 240); do [ "$(epochs "$f3")" -ge 2 ] && break; sleep 0.5; done
check "3: the long cell runs and checkpoints" test "$(epochs "$f3")" -ge 2
stop_slurmd
pids=$(grep -lsa "^SLURM_JOB_ID=${job3:-x}\$" --null-data /proc/[0-9]*/environ | cut -d/ -f3 | tr '\n' ' ')
pkill -KILL -f "slurmstepd: \[${job3:-x}\." ; [ -n "$pids" ] && kill -KILL $pids
say "node down: slurmd, slurmstepd and the job's processes ($pids) SIGKILLed"
for _ in $(seq 1 60); do [ "$(node_state)" = "down*" ] && break; sleep 1; done
check "3: the controller declares the node down" test "$(node_state)" = "down*"
check "3: only the checkpoint is left" test "$(field "$f3" status)" = running
start_slurmd
node_back
wait_jobs "${job3:-0},${coll3:-0}" 120
co3=$(cat "$(dirname "${plan3:-x}")/collect-$coll3.out" 2>/dev/null); echo "$co3"
say "$(reason "$f3")"
check "3: node_fail recorded by the collector from sacct" \
  test "$(field "$f3" status)" = node_fail -a -n "$(reason "$f3" | grep "Slurm state NODE_FAIL (array task ${job3}_0, from sacct)")"
check "3: checkpointed epochs kept" test "$(epochs "$f3")" -ge 2

# --- 4. --resume runs exactly the three cells that did not end ok --------------------------------------------
stamp=$(stat -c %Y.%y "$out/mnist_mlp/cntk__cpu.json" "$out/imdb_fasttext/cntk__cpu.json")
all=mnist_mlp,imdb_fasttext,mnist_cnn,lstm_text_generation,imdb_bidirectional_lstm
sub=$("$khost" matrix --slurm "${quick[@]}" --cpus-per-cell 1 --tasks $all --out "$out" --resume 2>&1); echo "$sub"
read -r job4 coll4 plan4 <<<"$(submitted "$sub" 2)"
check "4: resume: 2 cells skipped, 3 submitted" test -n "${job4:-}" -a "$(grep -c 'cpu: 2 cell(s) skipped' <<<"$sub")" -eq 1
check "4: resume plan: the cancelled and the two node failures" \
  test "$(grep '^cell' "${plan4:-/dev/null}" | cut -f4 | sort | tr '\n' ' ')" = "imdb_bidirectional_lstm lstm_text_generation mnist_cnn "
wait_jobs "${job4:-0},${coll4:-0}" 300
for t in mnist_mlp imdb_fasttext mnist_cnn lstm_text_generation imdb_bidirectional_lstm; do
  want=${job4:-x}; case $t in mnist_mlp|imdb_fasttext) want=$job1 ;; esac
  check "4: after --resume, $t: ok from job $want" \
    test "$(field "$out/$t/cntk__cpu.json" status)" = ok -a "$(field "$out/$t/cntk__cpu.json" slurm_array_job_id)" = "$want"
done
check "4: the two ok records untouched" \
  test "$(stat -c %Y.%y "$out/mnist_mlp/cntk__cpu.json" "$out/imdb_fasttext/cntk__cpu.json")" = "$stamp"
say "Slurm part took $((SECONDS - t0)) s"
echo "$name: $passed passed, $failed failed"
[ $failed -eq 0 ]
