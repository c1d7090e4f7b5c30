#!/usr/bin/env bash
# tests/core_profile/test_profile.sh KHOST FX_TASKS FX_ABI10 — `khost profile` on cpu: the generated fixture
# task through both bundled backends (always), the ABI 1.0 fixture backend (no profile call: exit 6 with a
# reason, not a crash), and mnist_cnn through cntk and tensorflow, where conv2d[1] (89 % of the model's
# FLOPs) must dominate the per-layer times and the graph backend must show its convolution op kinds.
set -uo pipefail
khost=$1 fxtasks=$2 abi10=$3 default_data=${4:-}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-profile-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export KHOST_LIBCUDA=/nonexistent
bindir=$(dirname "$khost")
# a registry with the real plugins and the fixture tasks
printf '[khost]\nplugin_dirs = %s/plugins\ntask_dirs = %s\ndata_dir = %s\nseed = 1\n' "$bindir" "$fxtasks" "$tmp" >"$tmp/k.ini"

for p in cntk tensorflow; do
    KHOST_CONF=$tmp/k.ini "$khost" profile --plugin $p --task fixture_conv --device cpu --steps 3 --warmup 1 \
        --batch-size 16 >"$tmp/$p.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ok || bad "$p x fixture_conv exit $rc: $(cat "$tmp/$p.txt")"
    for row in "0      conv2d" "1      flatten" "2      dense"; do
        grep -q "^$row" "$tmp/$p.txt" && ok || bad "$p: no row '$row': $(cat "$tmp/$p.txt")"
    done
    grep -q "ms per step" "$tmp/$p.txt" && ok || bad "$p: no per-step total"
done
grep -q "^conv2d " "$tmp/tensorflow.txt" && grep -q "^apply_" "$tmp/tensorflow.txt" && ok ||
    bad "tensorflow: no op-kind rows: $(cat "$tmp/tensorflow.txt")"
grep -q "^op kind" "$tmp/cntk.txt" && bad "cntk is not a graph backend: no op-kind rows expected" || ok

KHOST_CONF=$tmp/k.ini "$khost" profile --plugin "$abi10" --task fixture_conv --device cpu >"$tmp/old.txt" 2>&1
rc=$?
[ $rc -eq 6 ] && grep -q "ABI 1.0" "$tmp/old.txt" && grep -q "does not implement the profile call" "$tmp/old.txt" && ok ||
    bad "ABI 1.0 backend: exit $rc: $(cat "$tmp/old.txt")"
"$khost" profile --plugin cntk >"$tmp/usage.txt" 2>&1
[ $? -eq 2 ] && ok || bad "missing --task is a usage error"

# mnist_cnn: real data, real layer sizes
data=${KHOST_DATA:-$default_data} # the build registry's data_dir is <source>/data
if [ -z "$data" ] || ! ls "$data"/mnist/train-images-idx3-ubyte* >/dev/null 2>&1; then
    echo "test_profile: $pass passed, $fail failed; mnist_cnn part SKIPPED: no MNIST under KHOST_DATA (tools/fetch-datasets mnist)"
    [ $fail -eq 0 ] && exit 77 || exit 1
fi
for p in cntk tensorflow; do
    "$khost" profile --plugin $p --task mnist_cnn --device cpu --steps 3 --warmup 1 --batch-size 32 >"$tmp/m$p.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ok || { bad "$p x mnist_cnn exit $rc: $(cat "$tmp/m$p.txt")"; continue; }
    [ "$(grep -cE '^[0-9]+ ' "$tmp/m$p.txt")" -eq 8 ] && ok || bad "$p: 8 layer rows expected: $(cat "$tmp/m$p.txt")"
    # the layer with the largest forward+backward time must be layer 1 (conv2d 32->64)
    top=$(awk '/^[0-9]+ /{t=$3+$4; if (t>best){best=t; l=$1}} END{print l}' "$tmp/m$p.txt")
    [ "$top" = 1 ] && ok || bad "$p: the heaviest layer is $top, not conv2d[1]: $(cat "$tmp/m$p.txt")"
done
grep -q "^conv2d_backprop_filter" "$tmp/mtensorflow.txt" && grep -q "^conv2d_backprop_input" "$tmp/mtensorflow.txt" && ok ||
    bad "tensorflow mnist_cnn: convolution gradient op kinds missing: $(cat "$tmp/mtensorflow.txt")"
echo "test_profile: $pass passed, $fail failed"
cat "$tmp/mcntk.txt" "$tmp/mtensorflow.txt"
[ $fail -eq 0 ]
