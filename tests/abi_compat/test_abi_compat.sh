#!/usr/bin/env bash
# tests/abi_compat/test_abi_compat.sh KHOST ABI12_DIR — a backend and a task compiled against the ABI 1.2
# headers (their descriptors end before layer_spec_size) load into this host, are listed as ABI 1.2, and run:
# the old task through a current backend, the old backend on the old task, and verify of the old backend.
set -uo pipefail
khost=$1 old=$2
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-abi-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export KHOST_LIBCUDA=/nonexistent XDG_CACHE_HOME=$tmp/cache
bindir=$(dirname "$khost")
printf '[khost]\nplugin_dirs = %s/plugins:%s/plugins\ntask_dirs = %s/tasks\ndata_dir = %s\nresults_dir = %s/results\nseed = 1\n' \
    "$bindir" "$old" "$old" "$tmp" "$tmp" >"$tmp/k.ini"
export KHOST_CONF=$tmp/k.ini

"$khost" --list >"$tmp/list.txt" 2>&1
grep -Eq '^  sdk_refcpu +[^ ]+ +ABI 1\.2' "$tmp/list.txt" && grep -Eq '^  sdk_blobs +[^ ]+ +ABI 1\.2' "$tmp/list.txt" && ok ||
    bad "the ABI 1.2 modules are not listed as loaded ABI 1.2 modules: $(cat "$tmp/list.txt")"
grep -qi 'error\|refused' "$tmp/list.txt" && bad "load errors: $(cat "$tmp/list.txt")" || ok

run_ok() { # plugin task
    "$khost" run --plugin "$1" --task "$2" --device cpu --epochs 2 --quiet --json >"$tmp/$1.json" 2>"$tmp/$1.err"
    local rc=$?
    [ $rc -eq 0 ] && tail -1 "$tmp/$1.json" | grep -q '"status":"ok"' && ok ||
        { bad "$1 x $2: exit $rc: $(cat "$tmp/$1.json" "$tmp/$1.err")"; return; }
    local acc
    acc=$(tail -1 "$tmp/$1.json" | sed -n 's/.*"metric_value":\([0-9.e-]*\).*/\1/p')
    awk -v a="${acc:-0}" 'BEGIN{exit !(a > 0.9)}' && ok || bad "$1 x $2 did not learn the separable blobs: ${acc:-none}"
}
run_ok cntk sdk_blobs        # a 1.2 task's layers read by the 1.3 host, compiled by a 1.3 backend
run_ok sdk_refcpu sdk_blobs  # a 1.2 backend given its layers at its own element size
"$khost" verify --plugin sdk_refcpu --task sdk_blobs >"$tmp/verify.txt" 2>&1 && grep -q 'pass' "$tmp/verify.txt" && ok ||
    bad "verify of the 1.2 backend: $(tail -5 "$tmp/verify.txt")"

echo "test_abi_compat: $pass passed, $fail failed"
[ $fail -eq 0 ]
