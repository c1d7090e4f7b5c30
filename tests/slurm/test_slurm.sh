#!/usr/bin/env bash
# `khost matrix --slurm` against a real Slurm: munged, slurmctld and slurmd (Debian's slurm-wlm) as a one-node
# cluster of this machine (its CPUs; every address 127.0.0.1; state, spool, logs and sockets in a temporary
# folder; ports picked free). proctrack/linuxproc and task/none: the test needs no cgroups, whatever the
# host's cgroup setup (a container may give none).
#   1. all six tasks (cntk, cpu, 1 epoch, a slice of the data) as one array; array task 5 is cancelled while
#      pending, so only the collector job can record it: the report shows five ok cells and that one,
#      cancelled, and every record names its job, array task and node;
#   2. a long cell is cancelled while running: the array task's own SIGTERM handling records it, keeping
#      the epochs it checkpointed; a cell with a 1-minute Slurm time limit ends "timeout";
#   3. --resume submits only the cancelled cell of 1, and only that record changes (its task fetches its data
#      set into the node's data folder first: --fetch-data).
# Skips (77) only without root, without the packages (and no way to install them) or without the data sets.
# Every wait is bounded; the daemons and the folder go away on any exit.
set -uo pipefail
khost=$1 src=${KHOST_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}
name=test_slurm passed=0 failed=0
say() { echo "$name: $*"; }
check() { # description, command...
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); say "ok: $what"; else failed=$((failed + 1)); say "FAIL: $what"; fi
}

[ "$(id -u)" -eq 0 ] || { echo "SKIPPED: needs root (starts munged, slurmctld and slurmd)"; exit 77; }
export PATH=$PATH:/usr/sbin:/sbin # the daemons live there; a PATH without them must not turn into a skip
need=(munged munge slurmctld slurmd sbatch squeue scontrol scancel sinfo)
missing() { for c in "${need[@]}"; do command -v "$c" >/dev/null || return 0; done; return 1; }
if missing; then
  say "Slurm or munge missing: running tools/install-deps"
  "$src/tools/install-deps" >/dev/null 2>&1 || true
  missing && { echo "SKIPPED: slurm-wlm and munge are not installed and could not be (tools/install-deps)"; exit 77; }
fi
data=${KHOST_DATA:-$src/data}
for d in mnist imdb nietzsche cifar10; do
  [ -d "$data/$d" ] || { echo "SKIPPED: data set $d not installed in '$data' (tools/fetch-datasets)"; exit 77; }
done
export KHOST_DATA=$data

tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-slurm-XXXXXX") || exit 1
chmod 755 "$tmp" # munged's socket folder must be reachable by every user
export SLURM_CONF=$tmp/slurm.conf
started=()
cleanup() {
  set +e
  if [ -n "${ctld_pid:-}" ]; then
    scancel --full --quiet --user root 2>/dev/null # ours is the only cluster this SLURM_CONF reaches
    for _ in $(seq 1 40); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
  fi
  for p in "${started[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${started[@]}"; do
    for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$p" 2>/dev/null && pkill -KILL -P "$p" && kill -KILL "$p" # the daemon under this timeout
  done
  local mp; mp=$(cat "$tmp/munge/munged.pid" 2>/dev/null) # under runuser: only if it is still that munged
  [ -n "$mp" ] && [ "$(cat "/proc/$mp/comm" 2>/dev/null)" = munged ] && kill -KILL "$mp"
  if [ $failed -ne 0 ] || [ "${ready:-0}" != 1 ]; then
    for f in "$tmp"/log/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 25 "$f"; }; done
  fi
  [ -n "${KHOST_SLURM_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Two free TCP ports on the loopback interface.
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    { exec 3<>"/dev/tcp/127.0.0.1/$p"; } 2>/dev/null && { exec 3>&-; continue; }
    [ "$p" != "${1:-}" ] && { echo "$p"; return; }
  done
  return 1
}
ctld_port=$(free_port) && slurmd_port=$(free_port "$ctld_port") || { say "FAIL: no free port"; exit 1; }

# munge: a key of our own, the daemon as the munge user, its socket in the folder.
mkdir -p "$tmp/munge" "$tmp/log" "$tmp/state" "$tmp/spool"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1 count=1024 status=none
chown -R munge:munge "$tmp/munge" && chmod 700 "$tmp/munge" && chmod 600 "$tmp/munge/munge.key"
sock=$tmp/munge/munge.sock
chmod 711 "$tmp/munge" # clients reach the socket, nothing else
# Every daemon runs in the foreground under `timeout`: should this script be killed outright (no trap
# runs), they still stop on their own, after the longest this test may take.
life=840
timeout $life runuser -u munge -- munged -F --socket="$sock" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" \
  >"$tmp/log/munged.out" 2>&1 &
started+=("$!")
for _ in $(seq 1 40); do [ -S "$sock" ] && break; sleep 0.25; done
if ! munge -S "$sock" -n 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; then
  say "FAIL: munged did not start or does not answer"; cat "$tmp/log/munged.out" "$tmp/munge/munged.log"
  failed=1; exit 1
fi

host=$(hostname -s)
cat > "$SLURM_CONF" <<EOF
ClusterName=khosttest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
KillWait=10
MinJobAge=600
InactiveLimit=0
NodeName=khostnode NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=khost Nodes=khostnode Default=YES MaxTime=INFINITE State=UP
EOF
timeout $life slurmctld -D -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
ctld_pid=$!; started+=("$ctld_pid")
timeout $life slurmd -D -N khostnode -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
started+=("$!")
for _ in $(seq 1 60); do
  [ "$(sinfo -h -n khostnode -o %T 2>/dev/null)" = idle ] && { ready=1; break; }
  sleep 0.5
done
if [ "${ready:-0}" != 1 ]; then
  say "FAIL: the node did not become idle in 30 s: $(sinfo 2>&1 | tail -n 2)"
  cat "$tmp/log/slurmctld.out" "$tmp/log/slurmd.out"; failed=1; exit 1
fi
say "one-node Slurm up: controller 127.0.0.1:$ctld_port, node khostnode 127.0.0.1:$slurmd_port, $(nproc) CPUs"

# Wait (at most $2 seconds) until none of the jobs in $1 is queued or running.
wait_jobs() {
  local jobs=$1 limit=$2 t=0
  while [ $t -lt $((limit * 2)) ]; do
    [ -z "$(squeue -h -j "$jobs" 2>/dev/null)" ] && return 0
    sleep 0.5; t=$((t + 1))
  done
  say "jobs $jobs still queued after $limit s:"; squeue; return 1
}
field() { grep -o "\"$2\":[[:space:]]*\"[^\"]*\"" "$1" 2>/dev/null | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/'; }
epochs() { local n; n=$(grep -c "\"epoch\":" "$1" 2>/dev/null); echo "${n:-0}"; }
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
check "the collector's output" grep -q "1 recorded here" "$(dirname "$plan")/collect-$coll.out"

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
