#!/usr/bin/env bash
# tests/core_profile/test_profile.sh KHOST FX_TASKS FX_ABI10 — `khost profile` on cpu: the generated fixture
# task through the bundled backends (always; theano where it was built), the ABI 1.0 fixture backend (no
# profile call: exit 6 with a reason, not a crash), and mnist_cnn through cntk, tensorflow and theano, where
# conv2d[1] (89 % of the model's FLOPs) must dominate the per-layer times and the graph backends must show
# their convolution op kinds. theano's rows (fixture_conv, mnist_cnn, mnist_mlp) are checked against the
# contract as printed: one row per layer in order, every time >= 0, forward and backward > 0 in each layer with
# FLOPs (the rows that print a GFLOP/s figure), the rows adding up to no more than the step. The convolutions'
# share of the SGEMM peak is printed for every model with Conv2D (for theano on mnist_cnn within (0, 1.2); for
# cntk and tensorflow above 0: their kernels may outrun OpenBLAS's AVX2 SGEMM on an AVX-512 machine) and not for
# mnist_mlp, which has none. Each backend splits mnist_cnn's conv backward into its input and weight gradient
# (ABI 1.5), each part printed against its floor (its FLOPs at the peak) and the conv share given by part.
set -uo pipefail
khost=$1 fxtasks=$2 abi10=$3 default_data=${4:-}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-profile-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export KHOST_LIBCUDA=/nonexistent
bindir=$(dirname "$khost")
plugins="cntk tensorflow"
[ -f "$bindir/plugins/theano.so" ] && plugins="$plugins theano"
# a registry with the real plugins and the fixture tasks; theano's generated code in a cache of this run's own
printf '[khost]\nplugin_dirs = %s/plugins\ntask_dirs = %s\ndata_dir = %s\nseed = 1\n[plugin theano]\ncache_dir = %s/thc\n' \
    "$bindir" "$fxtasks" "$tmp" "$tmp" >"$tmp/k.ini"

# check_rows FILE LAYERS POSITIVE: the layer rows of a printed profile as backend.h asks them (see the header);
# POSITIVE 0 leaves out "> 0" (the fixture's layers take less than the 0.0005 ms the table can show)
check_rows() {
    local f=$1 n=$2 why
    why=$(awk -v n="$n" -v pos="$3" '
        /ms per step$/ { for (i = 1; i <= NF; i++) if ($i == "ms" && $(i+1) == "per") step = $(i-1) }
        /^[0-9]+ / {
            if ($1 != rows) { print "row " rows " is layer " $1; bad = 1 }
            rows++
            if ($3 < 0 || $4 < 0 || $5 < 0) { print "layer " $1 ": a negative time"; bad = 1 }
            if (pos && NF >= 7 && ($3 <= 0 || $4 <= 0)) { print "layer " $1 " has FLOPs but no forward or backward time"; bad = 1 }
            sum += $3 + $4 + $5
        }
        END {
            if (rows != n) { print rows " layer rows, " n " expected"; bad = 1 }
            if (step == "" || sum > step + 0.0005 * (rows + 1)) { print "rows add up to " sum " ms, the step is " step " ms"; bad = 1 }
            exit bad
        }' "$f") && ok || bad "$f: $why: $(cat "$f")"
}
# conv_share FILE: the printed share of the peak as a fraction ("" when there is no such line)
conv_share() { sed -n 's/^conv layers: .* GFLOP\/s, \([0-9.]*\) % of the .* peak (FLOP-weighted over forward and both gradients)$/\1/p' "$1"; }
in_range() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v / 100 > lo && v / 100 < hi) }'; }

for p in $plugins; do
    KHOST_CONF=$tmp/k.ini "$khost" profile --plugin $p --task fixture_conv --device cpu --steps 3 --warmup 1 \
        --batch-size 16 >"$tmp/$p.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ok || bad "$p x fixture_conv exit $rc: $(cat "$tmp/$p.txt")"
    for row in "0      conv2d" "1      flatten" "2      dense"; do
        grep -q "^$row" "$tmp/$p.txt" && ok || bad "$p: no row '$row': $(cat "$tmp/$p.txt")"
    done
    grep -q "ms per step" "$tmp/$p.txt" && ok || bad "$p: no per-step total"
    [ -n "$(conv_share "$tmp/$p.txt")" ] && ok || bad "$p x fixture_conv: no conv layers line: $(cat "$tmp/$p.txt")"
done
for p in tensorflow theano; do
    [ -f "$tmp/$p.txt" ] || continue
    grep -q "^conv2d " "$tmp/$p.txt" && grep -q "^apply_" "$tmp/$p.txt" && ok ||
        bad "$p: no op-kind rows: $(cat "$tmp/$p.txt")"
done
grep -q "^op kind" "$tmp/cntk.txt" && bad "cntk is not a graph backend: no op-kind rows expected" || ok
[ -f "$tmp/theano.txt" ] && check_rows "$tmp/theano.txt" 3 0

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
# theano through the build's plugins and tasks with this run's cache (the other two through the build registry)
printf '[khost]\nplugin_dirs = %s/plugins\ntask_dirs = %s/tasks\ndata_dir = %s\nseed = 1\n[plugin theano]\ncache_dir = %s/thc\n' \
    "$bindir" "$bindir" "$data" "$tmp" >"$tmp/real.ini"
profile() { if [ "$2" = theano ]; then KHOST_CONF=$tmp/real.ini "$khost" profile "$@"; else "$khost" profile "$@"; fi; }
for p in $plugins; do
    profile --plugin $p --task mnist_cnn --device cpu --steps 3 --warmup 1 --batch-size 32 >"$tmp/m$p.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ok || { bad "$p x mnist_cnn exit $rc: $(cat "$tmp/m$p.txt")"; continue; }
    [ "$(grep -cE '^[0-9]+ ' "$tmp/m$p.txt")" -eq 8 ] && ok || bad "$p: 8 layer rows expected: $(cat "$tmp/m$p.txt")"
    # the layer with the largest forward+backward time must be layer 1 (conv2d 32->64)
    top=$(awk '/^[0-9]+ /{t=$3+$4; if (t>best){best=t; l=$1}} END{print l}' "$tmp/m$p.txt")
    [ "$top" = 1 ] && ok || bad "$p: the heaviest layer is $top, not conv2d[1]: $(cat "$tmp/m$p.txt")"
    # the convolutions' share of the peak; the two conv rows' GFLOP/s
    share=$(conv_share "$tmp/m$p.txt")
    hi=1000
    if [ $p = theano ]; then
        # a peak calibrated beside other work (the machine shared: core/devices/peak.c says so and does not
        # cache it) understates the machine, and the share against it says nothing about the backend
        if grep -q "^  peak: .*beside other work" "$tmp/m$p.txt"; then
            echo "note: theano x mnist_cnn: the peak was calibrated beside other work; share $share % checked > 0 only"
        else
            hi=1.2
        fi
    fi
    in_range "$share" 0 $hi && ok || bad "$p x mnist_cnn: conv layers' share of the peak '$share' % outside (0, $hi): $(cat "$tmp/m$p.txt")"
    # the line is its own arithmetic: GFLOP/s / peak = share
    awk '/^conv layers: / { g = $3; s = $5; pk = $9; d = 100 * g / pk - s; if (d < 0) d = -d
                             exit !(pk > 0 && d <= 0.06 + 5 / pk + 5 * g / (pk * pk)) }' \
        "$tmp/m$p.txt" && ok || bad "$p x mnist_cnn: the conv layers line does not add up: $(grep '^conv layers' "$tmp/m$p.txt")"
    grep -q "^  peak: " "$tmp/m$p.txt" && ok || bad "$p x mnist_cnn: the peak's source is not printed"
    # the FLOPs behind the figures, per step at batch 32 (kit/base/flops.c: 2 FLOPs a MAC; the backward of the
    # first layer with weights is its filter gradient, of the others filter and input gradients):
    #   conv2d[0]: 26*26*32 outputs x 3*3*1 MACs, forward + filter gradient: 2 * 2 * 194688 * 32 = 0.02492 GFLOP
    #   conv2d[1]: 24*24*64 outputs x 3*3*32 MACs, forward + both gradients: 3 * 2 * 10616832 * 32 = 2.03843 GFLOP
    # each conv row's GFLOP/s x its forward + backward time gives them back, and the conv layers line is their
    # sum over the two rows' summed time (FLOP-weighted: a ratio of sums, not a mean of the rows' rates)
    # (the tolerances are the printing's rounding: 0.05 GFLOP/s, 0.0005 ms a figure)
    awk 'function near(x, want, tol) { d = x - want; if (d < 0) d = -d; return d <= want * tol }
         /^[01] +conv2d / && NF == 7 { tms = $3 + $4; f[$1] = $7 * tms / 1e3; r[$1] = 0.002 + 0.05 / $7 + 0.001 / tms; T += tms }
         /^conv layers: / { g = $3 }
         END { ok0 = near(f[0], 0.02492, r[0]); ok1 = near(f[1], 2.03843, r[1])
               okg = T > 0 && near(g, 2.06335 / (T / 1e3), 0.002 + 0.05 / g + 0.001 / T)
               if (!(ok0 && ok1 && okg)) printf "conv2d[0] %.5f, conv2d[1] %.5f GFLOP a step; line %.1f GFLOP/s, want %.2f\n", f[0], f[1], g, 2.06335 / (T / 1e3)
               exit !(ok0 && ok1 && okg) }' "$tmp/m$p.txt" && ok ||
        bad "$p x mnist_cnn: the GFLOP/s figures do not give back the convolutions' FLOPs: $(cat "$tmp/m$p.txt")"
    [ "$(awk '/^[01] +conv2d / && NF == 7 && $7 > 0' "$tmp/m$p.txt" | wc -l)" -eq 2 ] && ok ||
        bad "$p x mnist_cnn: no GFLOP/s on the conv2d rows: $(cat "$tmp/m$p.txt")"
    # the gradient split (ABI 1.5) against the floor: conv2d[1]'s three parts, each floor its FLOPs at the printed
    # peak (forward and each gradient 2 * 10616832 * 32 = 0.679477 GFLOP a step at batch 32); conv2d[0]'s input
    # gradient has no FLOPs (nothing before it learns); the two gradients add up to the backward column
    awk 'function near(x, want) { d = x - want; if (d < 0) d = -d; return d <= 0.0006 + want * 0.002 }
         /^against the floor \(a part.s FLOPs at the / { pk = $9 }
         /^[0-9]+ +conv2d / { bwd[$1] = $4 }
         /^  1 +conv2d +forward / { f1 = $4; fl1 = $5 }
         /^  1 +conv2d +input gradient / { i1 = $5; il1 = $6 }
         /^  1 +conv2d +weight gradient / { w1 = $5; wl1 = $6 }
         /^  0 +conv2d +input gradient / { il0 = $6 }
         END { want = 0.679477 / pk * 1e3
               ok = pk > 0 && near(fl1, want) && near(il1, want) && near(wl1, want) && il0 == "-" &&
                    i1 + w1 <= bwd[1] + 0.0015 && f1 > 0 && i1 > 0 && w1 > 0
               if (!ok) printf "peak %s, conv2d[1] floors %s %s %s (want %.3f), times %s + %s of %s, conv2d[0] input floor %s\n", pk, fl1, il1, wl1, want, i1, w1, bwd[1], il0
               exit !ok }' "$tmp/m$p.txt" && ok ||
        bad "$p x mnist_cnn: the split against the floor: $(cat "$tmp/m$p.txt")"
    grep -qE '^  by part: forward [0-9.]+ %, input gradient [0-9.]+ %, weight gradient [0-9.]+ % of the peak$' \
        "$tmp/m$p.txt" && ok || bad "$p x mnist_cnn: no conv share by part: $(cat "$tmp/m$p.txt")"
done
for p in tensorflow theano; do
    [ -f "$tmp/m$p.txt" ] || continue
    grep -q "^conv2d_backprop_filter" "$tmp/m$p.txt" && grep -q "^conv2d_backprop_input" "$tmp/m$p.txt" && ok ||
        bad "$p mnist_cnn: convolution gradient op kinds missing: $(cat "$tmp/m$p.txt")"
done
if [ -f "$tmp/mtheano.txt" ]; then
    check_rows "$tmp/mtheano.txt" 8 1
    KHOST_CONF=$tmp/real.ini "$khost" profile --plugin theano --task mnist_mlp --device cpu --steps 3 --warmup 1 \
        --batch-size 32 >"$tmp/mlp.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ok || bad "theano x mnist_mlp exit $rc: $(cat "$tmp/mlp.txt")"
    check_rows "$tmp/mlp.txt" 5 1
    grep -q "^conv layers" "$tmp/mlp.txt" && bad "mnist_mlp has no Conv2D, yet a conv layers line: $(cat "$tmp/mlp.txt")" || ok
fi
echo "test_profile: $pass passed, $fail failed"
for p in $plugins; do cat "$tmp/m$p.txt"; done
[ -f "$tmp/mlp.txt" ] && cat "$tmp/mlp.txt"
[ $fail -eq 0 ]
