#!/usr/bin/env bash
# tests/core_scan/test_scan.sh — isolated discovery end to end. A plugin folder holds the working e2e
# fixture backend next to modules whose constructor raises SIGSEGV, hangs or calls exit(0), and whose entry
# returns NULL or a wild pointer: --list, run and matrix must all work and list each bad module under load
# errors with what happened; a module named explicitly is refused the same way; the module cache must be
# written, reused (a hanging module costs its timeout once), notice a file changed on disk, and survive
# garbage; the ownership/permission rule must refuse group/world-writable and foreign files, naming them,
# and strict_modes = false must turn it off.
# usage: test_scan.sh KHOST_BIN SCAN_FIXTURE_DIR E2E_DIR
set -u
bin=$1 fx=$2 e2e=$3
pass=0 fail=0 skipped=""
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { local what=$1; shift; if "$@"; then ok; else bad "$what"; fi; }
has() { grep -qF -- "$2" <<<"$1"; }

t=$(mktemp -d "${TMPDIR:-/tmp}/khost-scan-XXXXXX")
trap 'chattr -i "$t" 2>/dev/null; rm -rf "$t"' EXIT
mkdir -p "$t/plugins"
cp "$e2e/plugins/fixture.so" "$fx"/fxs_*.so "$t/plugins/"
chmod 644 "$t"/plugins/*.so
write_ini() { # extra [khost] lines
  { echo "[khost]"; echo "plugin_dirs = plugins"; echo "task_dirs = $e2e/tasks"; echo "data_dir = $e2e/data"
    echo "results_dir = results"; echo "default_device = cpu"; echo "scan_timeout = 2"
    echo "module_cache = cache/modules.cache"; printf '%s\n' "$@"; } >"$t/khost.ini"
}
write_ini
export KHOST_CONF=$t/khost.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1
# In a sanitizer build the scanner must die of the module's signal, as a plain build does.
export ASAN_OPTIONS="handle_segv=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
k() { "$bin" "$@" 2>&1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# --- --list: everything else works, each bad module says what happened -----------------------------------
s=$(now); out=$(k --list); rc=$?; e=$(elapsed "$s")
check "--list exits 0 ($rc): $out" test $rc -eq 0
check "--list lists the working backend" has "$out" "$t/plugins/fixture.so"
check "--list lists fx_scan_good" has "$out" "fx_scan_good"
check "segv constructor: signal named" grep -qE "fxs_ctor_segv.so: crashed while being inspected: SIGSEGV" <<<"$out"
check "hanging constructor: timeout named" grep -qE "fxs_ctor_hang.so: hung while being inspected: no answer after 2 s" <<<"$out"
check "exit(0) constructor: exit named" grep -qE "fxs_ctor_exit.so: exited with status [0-9]+ while being inspected" <<<"$out"
check "NULL descriptor: refusal named" grep -qE "fxs_nulldesc.so: khost_module_entry returned NULL" <<<"$out"
check "wild descriptor: crash named" grep -qE "fxs_wild.so: crashed while being inspected: SIG(SEGV|BUS)" <<<"$out"
check "first --list took the hang's timeout, not forever ($e s)" lt "$e" 20
cache=$t/cache/modules.cache
check "cache written" test -s "$cache"
check "cache header" grep -qx "khost-module-cache 1 abi [0-9]*\.[0-9]*" "$cache"
check "cache keeps the hang" grep -q "fxs_ctor_hang.so.*error.*hung while being inspected" "$cache"
check "cache keeps the good module" grep -qP "fixture.so\t.*\tok\t1\t" "$cache"

s=$(now); out2=$(k --list); e=$(elapsed "$s")
check "second --list uses the cache ($e s, no 2 s hang)" lt "$e" 1.8
check "second --list reports the same errors" has "$out2" "fxs_ctor_hang.so: hung while being inspected"

# --- run and matrix with the bad modules present ---------------------------------------------------------
out=$(k run --plugin fixture --task fixture_blobs --epochs 1 --out "$t/res" --quiet); rc=$?
check "run with bad modules around exits 0 ($rc): $out" test $rc -eq 0
check "run wrote its record" grep -qP '"status":\s*"ok"' "$t/res/fixture_blobs/fixture__cpu.json"
out=$(k run --plugin "$t/plugins/fxs_ctor_segv.so" --task fixture_blobs --epochs 1 --out "$t/res"); rc=$?
check "run --plugin <segv path> refused with exit 3 ($rc)" test $rc -eq 3
check "run --plugin <segv path> names the signal: $out" has "$out" "crashed while being inspected: SIGSEGV"
out=$(k run --plugin fxs_ctor_hang.so --task fixture_blobs --epochs 1 --out "$t/res"); rc=$?
check "run --plugin <hang file name> refused with exit 3 ($rc)" test $rc -eq 3
check "run --plugin <hang file name> names the timeout: $out" has "$out" "hung while being inspected"
out=$(k run --plugin fxs_ctor_exit.so --task fixture_blobs --epochs 1 --out "$t/res"); rc=$?
check "run --plugin <exit file name> refused with exit 3 ($rc): $out" test $rc -eq 3
out=$(k matrix --plugins fixture --tasks fixture_blobs --epochs 1 --out "$t/mx" --quiet); rc=$?
check "matrix with bad modules around exits 0 ($rc): $out" test $rc -eq 0
check "matrix cell ok" grep -qP '"status":\s*"ok"' "$t/mx/fixture_blobs/fixture__cpu.json"
out=$(k matrix --plugins fixture,fxs_ctor_segv.so --tasks fixture_blobs --epochs 1 --out "$t/mx2"); rc=$?
check "matrix naming a crashing module is refused up front ($rc): $out" test $rc -eq 3
check "... and says why" has "$out" "SIGSEGV"

# --- the cache notices a module changed on disk ----------------------------------------------------------
rm "$t/plugins/fxs_good.so" # changing.so takes over its name, fx_scan_good
cp "$fx/fxs_good.so" "$t/plugins/changing.so"
out=$(k --list)
check "changing.so first good: listed" has "$out" "$t/plugins/changing.so"
check "changing.so first good: no error" test "$(grep -c 'changing.so: ' <<<"$out")" -eq 0
cat "$fx/fxs_ctor_segv.so" >"$t/plugins/changing.so" # same inode, new contents
out=$(k --list)
check "changing.so rewritten in place: inspected again, crash seen" has "$out" "changing.so: crashed while being inspected: SIGSEGV"
cp "$fx/fxs_good.so" "$t/plugins/changing.so.new" && mv "$t/plugins/changing.so.new" "$t/plugins/changing.so"
out=$(k --list)
check "changing.so replaced (new inode): good again" test "$(grep -c 'changing.so: crashed' <<<"$out")" -eq 0
touch -d '2001-01-01' "$t/plugins/changing.so"
out=$(k -v --list)
check "mtime change alone triggers a new inspection" grep -q "changing.so: inspecting in a child process" <<<"$out"
out=$(k -v --list)
check "unchanged file is not inspected again" test "$(grep -c 'inspecting in a child process' <<<"$out")" -eq 0

# --- a garbage cache file is discarded and rewritten ----------------------------------------------------
head -c 3000 /dev/urandom >"$cache"
out=$(k --list); rc=$?
check "garbage cache: --list still works ($rc)" test $rc -eq 0
check "garbage cache: good module listed" has "$out" "fx_scan_good"
check "garbage cache rewritten" grep -qx "khost-module-cache 1 abi [0-9]*\.[0-9]*" "$cache"
printf 'khost-module-cache 1 abi 1.0\nmodule\t%s\t1\t2\t3\t4\tok\t1\t1.0\tforged\t1\td\tc\n' "$t/plugins/fixture.so" >"$cache"
out=$(k --list)
check "a stale entry (size/mtime/inode differ) is not trusted" has "$out" "$t/plugins/fixture.so"
check "... and the forged name never appears" test "$(grep -c forged <<<"$out")" -eq 0

# --- StrictModes-like refusals --------------------------------------------------------------------------
chmod 664 "$t/plugins/changing.so"
out=$(k --list)
check "group-writable module refused, naming file and mode" has "$out" "$t/plugins/changing.so: the module file is group-writable (mode 0664)"
check "... and the switch" has "$out" "strict_modes = false"
out=$(k run --plugin "$t/plugins/changing.so" --task fixture_blobs --epochs 1 --out "$t/res"); rc=$?
check "run --plugin <group-writable> refused with exit 3 ($rc)" test $rc -eq 3
chmod 646 "$t/plugins/changing.so"
out=$(k --list)
check "world-writable module refused" has "$out" "changing.so: the module file is world-writable (mode 0646)"
chmod 644 "$t/plugins/changing.so"
chmod 757 "$t/plugins"
out=$(k --list)
check "world-writable folder refused, naming the folder" has "$out" "$t/plugins: the module's folder is world-writable (mode 0757)"
chmod 755 "$t/plugins"
if [ "$(id -u)" = 0 ]; then
  chown 12345 "$t/plugins/changing.so"
  out=$(k --list)
  check "foreign owner refused, naming uid" has "$out" "changing.so: the module file is owned by uid 12345"
  out=$(k run --plugin "$t/plugins/changing.so" --task fixture_blobs --epochs 1 --out "$t/res"); rc=$?
  check "run --plugin <foreign> refused with exit 3 ($rc)" test $rc -eq 3
  write_ini "strict_modes = false"
  chmod 666 "$t/plugins/changing.so"
  out=$(k --list)
  check "strict_modes = false loads the foreign, writable module" test "$(grep -c 'changing.so: the module' <<<"$out")" -eq 0
  check "... which is listed" has "$out" "fx_scan_good"
  chown 0 "$t/plugins/changing.so"; chmod 644 "$t/plugins/changing.so"
  write_ini
else
  skipped="the foreign-owner refusal needs root (chown)"
fi
write_ini "strict_modes = maybe"
out=$(k --list); rc=$?
check "bad strict_modes value is a registry error ($rc)" test $rc -eq 3
check "... naming the key" has "$out" "strict_modes = 'maybe'"
write_ini

# --- no scanner survives -------------------------------------------------------------------------------
sleep 0.5
check "no scanner process left behind" test "$(pgrep -fc -- "--scan-module $t/" || true)" -eq 0

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] || exit 1
if [ -n "$skipped" ]; then echo "SKIP: $skipped"; exit 77; fi
exit 0
