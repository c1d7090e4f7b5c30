# tests/slurm/cluster.sh — sourced by the Slurm tests: a one-node Slurm cluster of this machine, started as root
# and stopped again on any exit. munged, slurmctld and slurmd (Debian's slurm-wlm); with accounting=1 also
# MariaDB and slurmdbd, so sacct answers from a real accounting database. Every address is 127.0.0.1, every port
# picked free; state, spool, database, logs and sockets live in a temporary folder ($tmp). proctrack/linuxproc
# and task/none: no cgroups needed, whatever the host's cgroup setup (a container may give none).
# The sourcing script sets name, khost, src and accounting (0 or 1) first. Skips (77) without root, without the
# packages (and no way to install them) or without the data sets. Every wait is bounded.
# Defines: say, check, passed, failed, tmp, data, wait_jobs, field, epochs, node_state, start_slurmd, stop_slurmd.
passed=0 failed=0
say() { echo "$name: $*"; }
check() { # description, command...
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); say "ok: $what"; else failed=$((failed + 1)); say "FAIL: $what"; fi
}

[ "$(id -u)" -eq 0 ] || { echo "SKIPPED: needs root (starts munged, slurmctld and slurmd)"; exit 77; }
export PATH=$PATH:/usr/sbin:/sbin # the daemons live there; a PATH without them must not turn into a skip
need=(munged munge slurmctld slurmd sbatch squeue scontrol scancel sinfo)
[ "$accounting" = 1 ] && need+=(slurmdbd sacct sacctmgr mariadbd mariadb-install-db mariadb)
missing() { for c in "${need[@]}"; do command -v "$c" >/dev/null || return 0; done; return 1; }
if missing; then
  say "Slurm, munge or MariaDB missing: running tools/install-deps"
  "$src/tools/install-deps" >/dev/null 2>&1 || true
  missing && { echo "SKIPPED: ${need[*]} are not all installed and could not be (tools/install-deps)"; exit 77; }
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
  stop_slurmd
  for p in "${started[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${started[@]}"; do
    for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$p" 2>/dev/null && pkill -KILL -P "$p" && kill -KILL "$p" # the daemon under this timeout
  done
  local mp; mp=$(cat "$tmp/munge/munged.pid" 2>/dev/null) # under runuser: only if it is still that munged
  [ -n "$mp" ] && [ "$(cat "/proc/$mp/comm" 2>/dev/null)" = munged ] && kill -KILL "$mp"
  if [ $failed -ne 0 ] || [ "${ready:-0}" != 1 ]; then
    for f in "$tmp"/log/*.log "$tmp"/db/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 25 "$f"; }; done
  fi
  [ -n "${KHOST_SLURM_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Free TCP ports on the loopback interface, none of them among the arguments.
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    { exec 3<>"/dev/tcp/127.0.0.1/$p"; } 2>/dev/null && { exec 3>&-; continue; }
    [[ " $* " == *" $p "* ]] || { echo "$p"; return; }
  done
  return 1
}
ctld_port=$(free_port) && slurmd_port=$(free_port "$ctld_port") && dbd_port=$(free_port "$ctld_port" "$slurmd_port") &&
  db_port=$(free_port "$ctld_port" "$slurmd_port" "$dbd_port") || { say "FAIL: no free port"; exit 1; }

# munge: a key of our own, the daemon as the munge user, its socket in the folder.
mkdir -p "$tmp/munge" "$tmp/log" "$tmp/state" "$tmp/spool"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1 count=1024 status=none
chown -R munge:munge "$tmp/munge" && chmod 700 "$tmp/munge" && chmod 600 "$tmp/munge/munge.key"
sock=$tmp/munge/munge.sock
chmod 711 "$tmp/munge" # clients reach the socket, nothing else
# Every daemon runs in the foreground under `timeout`: should the test be killed outright (no trap runs), they
# still stop on their own, after the longest it may take.
life=${life:-840}
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
if [ "$accounting" = 1 ]; then
  # MariaDB: a database folder of its own (--no-defaults: none of the machine's configuration), TCP on the
  # loopback only; root reaches it through its socket, slurmdbd as a user of its own over TCP.
  mkdir -p "$tmp/db" && chown mysql:mysql "$tmp/db"
  dbsock=$tmp/db/mysqld.sock
  if ! mariadb-install-db --no-defaults --user=mysql --datadir="$tmp/db/data" --skip-test-db \
      --auth-root-authentication-method=socket >"$tmp/log/mariadb-install.out" 2>&1; then
    say "FAIL: mariadb-install-db"; tail -n 20 "$tmp/log/mariadb-install.out"; failed=1; exit 1
  fi
  timeout $life mariadbd --no-defaults --user=mysql --datadir="$tmp/db/data" --socket="$dbsock" \
    --port="$db_port" --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$tmp/db/mariadb.pid" \
    --log-error="$tmp/db/mariadb.log" --innodb-buffer-pool-size=64M --innodb-log-file-size=16M >"$tmp/log/mariadb.out" 2>&1 &
  started+=("$!")
  for _ in $(seq 1 120); do mariadb --no-defaults -S "$dbsock" -u root -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
  dbpass=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
  if ! mariadb --no-defaults -S "$dbsock" -u root -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$dbpass';
      GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" 2>"$tmp/log/mariadb-grant.log"; then
    say "FAIL: MariaDB did not start or refused the slurm user"; cat "$tmp/log/mariadb-grant.log"
    tail -n 20 "$tmp/db/mariadb.log"; failed=1; exit 1
  fi
  ( umask 077; cat > "$tmp/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$sock
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
PidFile=$tmp/slurmdbd.pid
LogFile=$tmp/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$dbpass
StorageLoc=slurm_acct_db
EOF
  )
  timeout $life slurmdbd -D >"$tmp/log/slurmdbd.out" 2>&1 & # finds slurmdbd.conf beside $SLURM_CONF
  started+=("$!")
  for _ in $(seq 1 60); do { exec 3<>"/dev/tcp/127.0.0.1/$dbd_port"; } 2>/dev/null && { exec 3>&-; break; }; sleep 0.5; done
  acct="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStoragePass=$sock" # for slurmdbd this names the munge socket
else
  acct="AccountingStorageType=accounting_storage/none"
fi

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
$acct
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=${slurmd_timeout:-300}
KillWait=10
MinJobAge=600
InactiveLimit=0
NodeName=khostnode NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=khost Nodes=khostnode Default=YES MaxTime=INFINITE State=UP
EOF
timeout $life slurmctld -D -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
ctld_pid=$!; started+=("$ctld_pid")
# slurmd is started and stopped on its own: a test may kill it as a failing node would die.
start_slurmd() {
  timeout $life slurmd -D -N khostnode -f "$SLURM_CONF" >>"$tmp/log/slurmd.out" 2>&1 &
  slurmd_pid=$!
}
stop_slurmd() { # SIGKILL, as a node that dies gives no notice; its job steps stay (slurmstepd is its own process)
  [ -n "${slurmd_pid:-}" ] || return 0
  pkill -KILL -P "$slurmd_pid" slurmd 2>/dev/null; kill -KILL "$slurmd_pid" 2>/dev/null
  wait "$slurmd_pid" 2>/dev/null; slurmd_pid=
}
node_state() { sinfo -h -n khostnode -o %T 2>/dev/null; }
start_slurmd
for _ in $(seq 1 60); do
  [ "$(node_state)" = idle ] && { ready=1; break; }
  sleep 0.5
done
if [ "${ready:-0}" != 1 ]; then
  say "FAIL: the node did not become idle in 30 s: $(sinfo 2>&1 | tail -n 2)"
  cat "$tmp/log/slurmctld.out" "$tmp/log/slurmd.out"; failed=1; exit 1
fi
say "one-node Slurm up: controller 127.0.0.1:$ctld_port, node khostnode 127.0.0.1:$slurmd_port, $(nproc) CPUs$(
  [ "$accounting" = 1 ] && echo ", slurmdbd 127.0.0.1:$dbd_port over MariaDB 127.0.0.1:$db_port")"

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
