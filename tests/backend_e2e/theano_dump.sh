#!/usr/bin/env bash
# theano_dump.sh KHOST — `[plugin theano] dump_dir`: a one-step mnist_mlp run writes each function's pass report
# (fusion ran and made Elemwise nodes), the optimised graph and a generated source with its entry point.
# Skipped (77) without the data sets.
set -uo pipefail
khost=$1 data=${KHOST_DATA:-}
[ -n "$data" ] && [ -d "$data/mnist" ] || { echo "SKIPPED: MNIST not installed in KHOST_DATA='$data'"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-thdump-XXXXXX"); trap 'rm -rf "$tmp"' EXIT
bin=$(cd "$(dirname "$khost")" && pwd)
sed -e "s|^\[plugin theano\]\$|[plugin theano]\ndump_dir = $tmp/dump|" -e "s|= plugins/|= $bin/plugins/|" \
    -e "s|= tasks/|= $bin/tasks/|" "$bin/khost.ini" > "$tmp/khost.ini"
mkdir "$tmp/dump"
XDG_CACHE_HOME="$tmp/cache" KHOST_CONF="$tmp/khost.ini" "$khost" run --plugin theano --task mnist_mlp --epochs 1 \
  --steps 1 --limit-val 64 --quiet --out "$tmp/out" || { echo "FAIL: run"; exit 1; }
fail=0
for f in train eval predict probe; do
  [ -s "$tmp/dump/$f.graph.txt" ] || { echo "FAIL: no $f.graph.txt"; fail=1; continue; }
  grep -q "th_main" "$tmp/dump/$f.c" || { echo "FAIL: $f.c has no th_main"; fail=1; }
done
# the train graph: fusion rewrote something, and bias/relu/dropout are gone into Elemwise programs
grep -Eq '^  fuse-elemwise +[0-9]+ -> +[0-9]+ nodes, +[1-9]' "$tmp/dump/train.graph.txt" || { echo "FAIL: fusion did nothing"; fail=1; }
grep -Eq '^  elemwise +0 -> +[1-9]' "$tmp/dump/train.graph.txt" || { echo "FAIL: no Elemwise nodes"; fail=1; }
grep -Eq '^  relu +[0-9]+ -> +0$' "$tmp/dump/train.graph.txt" || { echo "FAIL: relu not fused"; fail=1; }
grep -q "program:" "$tmp/dump/train.graph.txt" || { echo "FAIL: no Elemwise program listed"; fail=1; }
[ $fail -eq 0 ] && echo "test_theano_dump: 1 passed, 0 failed"
exit $fail
