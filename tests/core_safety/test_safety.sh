#!/usr/bin/env bash
# tests/core_safety/test_safety.sh — nothing a kill or a full disk does loses or duplicates a result.
#  1. locks: a second matrix or a run on a folder a matrix writes to is refused naming the live holder's
#     pid; stale lock files (dead pid, no flock) are taken over; two runs of one cell exclude each other,
#     runs of different cells work side by side, and a matrix is refused while a run writes there.
#  2. SIGKILL of `khost matrix` in the middle of a cell: no child survives after 2 s; `--resume` then
#     records every cell exactly once (one .json and one .csv each, no temporary files), skips the cell
#     finished before the kill and re-runs the killed one.
#  3. --memory-limit: an allocation refused under RLIMIT_AS (KH_ERR_NOMEM), an out-of-memory abort and a cell
#     that retries a refused allocation until its timeout all become status oom with the limit in the reason;
#     a cell within the limit is ok. (Not under ASan, whose
#     shadow memory cannot live under an address-space limit: skipped with 77, never counted as passed.)
#  4. a full tmpfs and a read-only one (private mount namespace): run fails with exit 8 naming the path,
#     the record written before stays byte-identical, no temporary file is left.
# usage: test_safety.sh KHOST_BIN FAULTS_PLUGIN_DIR E2E_DIR ASAN(0|1) [PARTS: any of kill mem disk]
set -u
bin=$1 fplugins=$2 e2e=$3 asan=${4:-0} parts=${5:-kill mem disk}
want() { grep -qw "$1" <<<"$parts"; }
pass=0 fail=0 skipped=()
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { local what=$1; shift; if "$@"; then ok; else bad "$what"; fi; }
has() { grep -qF -- "$2" <<<"$1"; }

t=$(mktemp -d "${TMPDIR:-/tmp}/khost-safety-XXXXXX")
bgpids=()
cleanup() {
  for p in "${bgpids[@]}"; do kill -9 "$p" 2>/dev/null; done
  umount "$t/full" "$t/ro" 2>/dev/null
  rm -rf "$t"
}
trap cleanup EXIT
cat >"$t/khost.ini" <<EOF
[khost]
plugin_dirs = $e2e/plugins:$fplugins
task_dirs = $e2e/tasks
data_dir = $e2e/data
results_dir = results
default_device = cpu
EOF
export KHOST_CONF=$t/khost.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1
export ASAN_OPTIONS="handle_segv=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
k() { "$bin" "$@" 2>&1; }
# processes (not zombies) whose command line mentions $1
alive() { local n=0 p; for p in /proc/[0-9]*; do
  if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$1"; then n=$((n + 1)); fi; done; echo $n; }
wait_for_file() { local i; for i in $(seq 1 300); do [ -e "$1" ] && return 0; sleep 0.05; done; return 1; }
json_status() { grep -oP '"status":\s*"\K[a-z]+' "$1" 2>/dev/null; }

# --- 1 + 2: the lock, then SIGKILL in the middle of a cell and --resume ----------------------------------
if want kill; then
out=$t/kr
cells=(fixture_blobs/fixture__cpu fixture_blobs/fixture_faults__cpu fixture_conv/fixture__cpu fixture_conv/fixture_faults__cpu)
KHOST_FIXTURE_SLOW_MS=40 "$bin" matrix --plugins fixture,fixture_faults --tasks fixture_blobs,fixture_conv \
  --epochs 3 --out "$out" >"$t/first.log" 2>&1 &
mpid=$!
bgpids+=("$mpid")
# the second cell (fixture_faults x fixture_blobs) writes its first checkpoint after epoch 1
wait_for_file "$out/fixture_blobs/fixture_faults__cpu.log"
check "the first cell finished before the kill" test "$(json_status "$out/fixture_blobs/fixture__cpu.json")" = ok
check "the lock file holds the matrix pid" test "$(head -1 "$out/.khost.lock" 2>/dev/null)" = "$mpid"
o=$(k matrix --plugins fixture --tasks fixture_blobs --epochs 1 --out "$out" --resume); rc=$?
check "a second matrix on the same folder is refused with exit 8 ($rc)" test $rc -eq 8
check "... naming the live holder's pid: $o" has "$o" "in use by khost pid $mpid"
o=$(k run --plugin fixture --task fixture_blobs --epochs 1 --out "$out"); rc=$?
check "khost run on the same folder is refused too ($rc): $o" test $rc -eq 8
sleep 1.2 # well inside the slow cell (3 epochs x 32 batches x 40 ms)
cellpid=$(pgrep -P "$mpid" | head -1)
check "a cell process is running under the matrix" test -n "$cellpid"
kill -9 "$mpid"
wait "$mpid" 2>/dev/null
sleep 2
check "no process of the killed matrix survives after 2 s" test "$(alive "--out $out")" -eq 0
gone() { [ ! -e "/proc/$1" ] || [ -z "$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" ]; }
check "the cell's pid is gone" gone "${cellpid:-0}"
check "the killed cell had not finished" test "$(json_status "$out/fixture_blobs/fixture_faults__cpu.json")" != ok
o=$(k matrix --plugins fixture,fixture_faults --tasks fixture_blobs,fixture_conv --epochs 3 --out "$out" --resume); rc=$?
check "--resume after the kill takes over the stale lock and exits 0 ($rc): $o" test $rc -eq 0
check "--resume skips the cell finished before the kill" grep -q "fixture x fixture_blobs x cpu ... skipped" <<<"$o"
check "--resume re-runs the killed cell" grep -qE "fixture_faults x fixture_blobs x cpu \.\.\. ok" <<<"$o"
for c in "${cells[@]}"; do
  base=$(basename "$c")
  n_json=$(find "$out/${c%/*}" -name "$base.json*" | wc -l) n_csv=$(find "$out/${c%/*}" -name "$base.csv*" | wc -l)
  check "$c recorded exactly once ($n_json json, $n_csv csv)" test "$n_json" -eq 1 -a "$n_csv" -eq 1
  st=$(json_status "$out/$c.json")
  check "$c final status ($st)" test "$st" = ok -o "$st" = unsupported
done
check "no partial files left" test "$(find "$out" -name '*.tmp.*' | wc -l)" -eq 0
check "4 records in all" test "$(find "$out" -name '*.json' | wc -l)" -eq 4
# stale locks (a dead pid, no flock) are taken over: the folder's by a matrix, a cell's by a run
echo 999999 >"$out/.khost.lock"
o=$(k -v matrix --plugins fixture --tasks fixture_blobs --epochs 3 --out "$out" --resume); rc=$?
check "stale folder lock taken over by matrix ($rc)" test $rc -eq 0
check "... saying so: $o" has "$o" "taking over the lock of pid 999999"
echo 999998 >"$out/fixture_blobs/.fixture__cpu.lock"
o=$(k -v run --plugin fixture --task fixture_blobs --epochs 1 --out "$out"); rc=$?
check "stale cell lock taken over by run ($rc)" test $rc -eq 0
check "... saying so: $o" has "$o" "taking over the lock of pid 999998"
# runs: one writer per cell, different cells side by side, no matrix beside them
KHOST_FIXTURE_SLOW_MS=40 "$bin" run --plugin fixture_faults --task fixture_blobs --epochs 2 --out "$out" >/dev/null 2>&1 &
rpid=$!
bgpids+=("$rpid")
for i in $(seq 1 200); do [ "$(head -1 "$out/fixture_blobs/.fixture_faults__cpu.lock" 2>/dev/null)" = "$rpid" ] && break; sleep 0.05; done
o=$(k run --plugin fixture_faults --task fixture_blobs --epochs 1 --out "$out"); rc=$?
check "a second run of the same cell is refused with exit 8 ($rc)" test $rc -eq 8
check "... naming the running one's pid: $o" has "$o" "in use by khost pid $rpid"
o=$(k run --plugin fixture --task fixture_blobs --epochs 1 --out "$out"); rc=$?
check "a run of another cell works beside it ($rc): $o" test $rc -eq 0
o=$(k matrix --plugins fixture --tasks fixture_blobs --epochs 1 --out "$out"); rc=$?
check "a matrix is refused while a run writes there ($rc)" test $rc -eq 8
check "... saying why: $o" has "$o" "in use by running khost run processes"
wait "$rpid"
check "the slow run finished ok" test "$(json_status "$out/fixture_blobs/fixture_faults__cpu.json")" = ok
fi

# --- 3: memory limit -------------------------------------------------------------------------------------
if ! want mem; then
  :
elif [ "$asan" = 1 ]; then
  skipped+=("--memory-limit (RLIMIT_AS) cannot be tested under ASan, whose shadow memory needs terabytes of address space")
else
  mo=$t/mem
  o=$(KHOST_FIXTURE_ALLOC_MB=1024 k matrix --plugins fixture_faults --tasks fixture_blobs --epochs 1 --out "$mo" --memory-limit 256M); rc=$?
  check "matrix with a cell over the limit exits 1 ($rc)" test $rc -eq 1
  j=$mo/fixture_blobs/fixture_faults__cpu.json
  check "KH_ERR_NOMEM under the limit is status oom" test "$(json_status "$j")" = oom
  check "... with the limit in the reason" grep -q "out of memory under the memory limit of 256 MiB" "$j"
  check "... and the summary counts it: $o" grep -q ", 1 oom" <<<"$o"
  o=$(KHOST_FIXTURE_ALLOC_MB=1024 KHOST_FIXTURE_ALLOC_ABORT=1 k matrix --plugins fixture_faults --tasks fixture_blobs --epochs 1 --out "$mo" --memory-limit 256M); rc=$?
  check "abort on out of memory: status oom" test "$(json_status "$j")" = oom
  check "... reason has the signal and the limit" grep -q "signal 6 (Aborted) under --memory-limit 256M" "$j"
  o=$(KHOST_FIXTURE_ALLOC_MB=64 k matrix --plugins fixture_faults --tasks fixture_blobs --epochs 1 --out "$mo" --memory-limit 1G); rc=$?
  check "a cell within the limit is ok ($rc): $o" test $rc -eq 0 -a "$(json_status "$j")" = ok
  # a backend that retries a failing allocation for ever (as OpenBLAS does): oom at the timeout, not "timeout"
  o=$(KHOST_FIXTURE_ALLOC_MB=1024 KHOST_FIXTURE_ALLOC_SPIN=1 k matrix --plugins fixture_faults --tasks fixture_blobs --epochs 1 --out "$mo" --memory-limit 256M --timeout 3); rc=$?
  check "a cell stuck at its address-space limit ends ($rc): $o" test $rc -eq 1
  check "... as oom, not timeout" test "$(json_status "$j")" = oom
  check "... saying where it was stuck" grep -q "stuck at its address-space limit" "$j"
  o=$(k matrix --plugins fixture --tasks fixture_blobs --memory-limit 12x --out "$mo"); rc=$?
  check "bad --memory-limit is a usage error ($rc)" test $rc -eq 2
fi

# --- 4: full and read-only results folders ---------------------------------------------------------------
if ! want disk; then
  :
elif ! unshare -m true 2>/dev/null; then
  skipped+=("full/read-only tmpfs (unshare -m is not permitted here)")
else
  mkdir -p "$t/full" "$t/ro"
  # everything in a private mount namespace: the mounts vanish with it
  o=$(unshare -m bash -s "$bin" "$t" <<'EOS' 2>&1
set -u
bin=$1 t=$2
say() { echo "RESULT $*"; }
mount -t tmpfs -o size=64k tmpfs "$t/full" || { say mount-failed; exit 0; }
mount -t tmpfs -o size=256k tmpfs "$t/ro"
"$bin" run --plugin fixture --task fixture_blobs --epochs 1 --out "$t/full/res" --quiet >/dev/null 2>&1; say first=$?
"$bin" run --plugin fixture --task fixture_blobs --epochs 1 --out "$t/ro/res" --quiet >/dev/null 2>&1; say firstro=$?
sum() { cat "$1/fixture_blobs/fixture__cpu.json" "$1/fixture_blobs/fixture__cpu.csv" | md5sum | cut -c1-32; }
say sum_before=$(sum "$t/full/res") sumro_before=$(sum "$t/ro/res")
dd if=/dev/zero of="$t/full/filler" bs=4k 2>/dev/null
msg=$("$bin" run --plugin fixture --task fixture_blobs --epochs 1 --out "$t/full/res" --quiet 2>&1); say full=$?
echo "MSG_FULL $msg"
say sum_after=$(sum "$t/full/res") tmp_left=$(find "$t/full/res" -name '*.tmp.*' | wc -l)
mount -o remount,ro "$t/ro"
msg=$("$bin" run --plugin fixture --task fixture_blobs --epochs 1 --out "$t/ro/res" --quiet 2>&1); say ro=$?
echo "MSG_RO $msg"
msg=$("$bin" matrix --plugins fixture --tasks fixture_blobs --epochs 1 --out "$t/ro/res" --quiet 2>&1); say romx=$?
echo "MSG_ROMX $msg"
say sumro_after=$(sum "$t/ro/res")
EOS
)
  r() { sed -n "s/.*RESULT .*\b$1=\([^ ]*\).*/\1/p" <<<"$o" | head -1; }
  if grep -q "RESULT mount-failed" <<<"$o"; then
    skipped+=("tmpfs mount failed in the private namespace")
  else
    check "record written on the small tmpfs ($(r first)): $o" test "$(r first)" = 0
    check "run on a full disk exits 8 ($(r full))" test "$(r full)" = 8
    check "... naming the record's path and the cause" grep -qE "MSG_FULL .*$t/full/res/fixture_blobs/fixture__cpu\.(json|csv): cannot write: No space left on device" <<<"$o"
    check "... the earlier record is byte-identical" test -n "$(r sum_before)" -a "$(r sum_before)" = "$(r sum_after)"
    check "... and no temporary file is left ($(r tmp_left))" test "$(r tmp_left)" = 0
    check "run on a read-only folder exits 8 ($(r ro))" test "$(r ro)" = 8
    check "... naming the path and the cause" grep -qE "MSG_RO .*$t/ro/res[^ ]*: .*Read-only file system" <<<"$o"
    check "matrix on a read-only folder exits 8 ($(r romx))" test "$(r romx)" = 8
    check "... naming the path" grep -qE "MSG_ROMX .*$t/ro/res[^ ]*: .*Read-only file system" <<<"$o"
    check "... the earlier record is byte-identical" test -n "$(r sumro_before)" -a "$(r sumro_before)" = "$(r sumro_after)"
  fi
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] || exit 1
if [ ${#skipped[@]} -gt 0 ]; then printf 'SKIP: %s\n' "${skipped[@]}"; exit 77; fi
exit 0
