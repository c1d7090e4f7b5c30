#!/usr/bin/env bash
# `khost matrix --slurm` against a real Slurm: the one-node cluster of tests/slurm/cluster.sh, without
# accounting (so the collector finds no sacct and reads the states from scontrol; test_slurm_faults has both).
#   1. all six tasks (cntk, cpu, 1 epoch, a slice of the data) as one array; array task 5 is cancelled while
#      pending, so only the collector job can record it: the report shows five ok cells and that one,
#      cancelled, and every record names its job, array task and node;
#   2. a long cell is cancelled while running: the array task's own SIGTERM handling records it, keeping
#      the epochs it checkpointed; a cell with a 1-minute Slurm time limit ends "timeout";
#   3. --resume submits only the cancelled cell of 1, and only that record changes (its task fetches its data
#      set into the node's data folder first: --fetch-data).
set -uo pipefail
khost=$1 src=${KHOST_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}
name=test_slurm accounting=0
. "$(dirname "$0")/cluster.sh"

tasks=(cifar10_cnn imdb_bidirectional_lstm imdb_fasttext lstm_text_generation mnist_cnn mnist_mlp)
quick=(--plugins cntk --tasks all --devices cpu --epochs 1 --limit-train 256 --limit-val 128 --timeout 600)
t0=$SECONDS

# --- 1. the matrix as an array; one pending task cancelled ---------------------------------------------------
out=$tmp/results
sub=$("$khost" matrix --slurm "${quick[@]}" --out "$out" 2>&1); rc=$?
echo "$sub"
job=$(sed -n 's/.* -> job \([0-9]*\) (array 0-5), collector job \([0-9]*\);.*/\1/p' <<<"$sub")
coll=$(sed -n 's/.* -> job \([0-9]*\) (array 0-5), collector job \([0-9]*\);.*/\2/p' <<<"$sub")
plan=$(sed -n 's/.*; plan \(.*\)$/\1/p' <<<"$sub")
check "submit: exit 0, one array of 6 cells and a collector job" test $rc -eq 0 -a -n "$job" -a -n "$coll"
[ -n "$job" ] || exit 1
scancel "${job}_5" # cells run one at a time (each asks for the whole node): task 5 is still pending
check "plan line 5 is cntk x mnist_mlp x cpu" \
  grep -q "^cell	cntk	cntk	mnist_mlp	mnist_mlp	cpu	" <(grep '^cell' "$plan" | sed -n 6p)
check "array script: 6 tasks, whole node, time limit from --timeout" \
  grep -qzE -- "--array=0-5.*--time=15.*--exclusive" "$(dirname "$plan")/array.sh"
wait_jobs "$job,$coll" 180
report=$("$khost" report "$out" 2>&1); rc=$?
echo "$report" | grep -E '^## |^\| cntk|^- cntk|^Slurm'
check "report: exit 0" test $rc -eq 0
for t in "${tasks[@]}"; do
  f=$out/$t/cntk__cpu.json
  want=ok; [ $t = mnist_mlp ] && want=cancelled
  check "$t: status $want" test "$(field "$f" status)" = $want
  if [ $t = mnist_mlp ]; then # never ran: no node
    check "$t: record names array job $job and task 5" \
      test "$(field "$f" slurm_array_job_id)" = "$job" -a "$(field "$f" slurm_array_task_id)" = 5
  else
    check "$t: record names array job $job, its task and node khostnode" \
      test "$(field "$f" slurm_array_job_id)" = "$job" -a -n "$(field "$f" slurm_array_task_id)" \
        -a "$(field "$f" slurm_node)" = khostnode -a -n "$(field "$f" slurm_job_id)"
  fi
  check "report has a $t section" grep -q "^## $t\$" <<<"$report"
done
check "report: five cells with a value, one cancelled" \
  test "$(grep -cE '^\| cntk \| [0-9.]+ \|$' <<<"$report")" -eq 5 \
    -a "$(grep -c '^| cntk | cancelled |$' <<<"$report")" -eq 2
check "report says why, from the collector: never started" \
  grep -q "^- cntk on cpu: cancelled: array task ${job}_5 never started .*cancelled while pending" <<<"$report"
check "report names each cell's array task and node" \
  grep -q "^Slurm array tasks: cntk on cpu = ${job}_4 on khostnode\.\$" <<<"$report"
check "the collector's output: states from scontrol (no accounting database)" \
  grep -q "1 recorded here (states: 0 from sacct, 5 from scontrol)" "$(dirname "$plan")/collect-$coll.out"

# --- 2. a running cell cancelled, and one that hits its Slurm time limit --------------------------------------
long=(--plugins cntk --devices cpu --epochs 100000 --limit-train 256 --limit-val 64 --cpus-per-cell 1)
sub_t=$("$khost" matrix --slurm "${long[@]}" --tasks mnist_mlp --time-per-cell 1 --out "$tmp/limit" 2>&1)
echo "$sub_t"
job_t=$(sed -n 's/.* -> job \([0-9]*\) (array 0-0), collector job \([0-9]*\);.*/\1 \2/p' <<<"$sub_t")
sub_c=$("$khost" matrix --slurm "${long[@]}" --tasks mnist_cnn --timeout 600 --out "$tmp/cancel" 2>&1)
echo "$sub_c"
job_c=$(sed -n 's/.* -> job \([0-9]*\) (array 0-0), collector job \([0-9]*\);.*/\1 \2/p' <<<"$sub_c")
check "two one-cell arrays submitted" test -n "$job_t" -a -n "$job_c"
fc=$tmp/cancel/mnist_cnn/cntk__cpu.json
for _ in $(seq 1 120); do [ "$(epochs "$fc")" -ge 2 ] && break; sleep 0.5; done # checkpointed epochs
check "the long cell is running and checkpointing" test "$(epochs "$fc")" -ge 2
scancel "${job_c%% *}_0"

# --- 3. --resume: only the cancelled cell of 1 --------------------------------------------------------------
stamp=$(stat -c %Y.%y "$out/mnist_cnn/cntk__cpu.json")
# ... with the node's data folder filled by tools/fetch-datasets (--fetch-data): here links to the installed
# data sets, which it finds installed, offline.
mkdir -p "$tmp/data" && for d in "$data"/*/; do ln -s "${d%/}" "$tmp/data/"; done
sub=$(KHOST_FETCH_OFFLINE=1 "$khost" matrix --slurm "${quick[@]}" --cpus-per-cell 1 --out "$out" --resume \
  --data "$tmp/data" --fetch-data 2>&1); rc=$?
echo "$sub"
job_r=$(sed -n 's/.* -> job \([0-9]*\) (array 0-0), collector job \([0-9]*\);.*/\1/p' <<<"$sub")
coll_r=$(sed -n 's/.* -> job \([0-9]*\) (array 0-0), collector job \([0-9]*\);.*/\2/p' <<<"$sub")
check "resume: 5 cells skipped, 1 submitted" \
  test $rc -eq 0 -a -n "$job_r" -a "$(grep -c 'cpu: 5 cell(s) skipped' <<<"$sub")" -eq 1
plan_r=$(sed -n 's/.*; plan \(.*\)$/\1/p' <<<"$sub")
check "resume plan: only cntk x mnist_mlp" test "$(grep '^cell' "$plan_r" | cut -f4 | tr '\n' ' ')" = "mnist_mlp "

wait_jobs "${job_c/ /,},$job_r,$coll_r" 120
check "--fetch-data: the array task ran tools/fetch-datasets for mnist on the node" \
  grep -q "mnist: already installed in $tmp/data/mnist" "$(dirname "$plan_r")/${job_r}_0.out"
check "cancelled while running: recorded by the array task" \
  test "$(field "$fc" status)" = cancelled -a -n "$(grep -o '"reason":[^,]*CANCELLED AT' "$fc")"
check "cancelled while running: checkpointed epochs kept" test "$(epochs "$fc")" -ge 2
for t in "${tasks[@]}"; do
  f=$out/$t/cntk__cpu.json
  want=$job; [ $t = mnist_mlp ] && want=$job_r
  check "after --resume, $t: ok from job $want" \
    test "$(field "$f" status)" = ok -a "$(field "$f" slurm_array_job_id)" = "$want"
done
check "a skipped cell's record is untouched" test "$(stat -c %Y.%y "$out/mnist_cnn/cntk__cpu.json")" = "$stamp"
report=$("$khost" report "$out" 2>&1)
check "report after --resume: every cell has a value" test "$(grep -cE '^\| cntk \| [0-9.]+ \|$' <<<"$report")" -eq 6

wait_jobs "${job_t/ /,}" 150
ft=$tmp/limit/mnist_mlp/cntk__cpu.json
check "time limit: status timeout, Slurm's reason, epochs kept" \
  test "$(field "$ft" status)" = timeout -a -n "$(grep -o '"reason":[^,]*DUE TO TIME LIMIT' "$ft")" \
    -a "$(epochs "$ft")" -ge 1
say "$(grep -o '"reason":[^,]*' "$fc")"
say "$(grep -o '"reason":[^,]*' "$ft")"
say "Slurm part took $((SECONDS - t0)) s"
echo "$name: $passed passed, $failed failed"
[ $failed -eq 0 ]
