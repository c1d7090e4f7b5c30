#!/usr/bin/env bash
# tests/reference_rows/test_reference_rows.sh KHOST SOURCE_DIR — tools/reference's record writer (khref.cli,
# the code every PyTorch / Keras 3 script ends in; no framework needed) produces khost records that `khost
# report` reads: markdown and HTML show them as rows beside a khost backend, marked as references.
set -uo pipefail
khost=$1 src=$2
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-refrows-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$py" - "$src/tools/reference/lib" "$tmp/results" <<'PY' || { echo "FAIL: the record writer"; exit 1; }
import sys, types
sys.path.insert(0, sys.argv[1])
from khref import cli
for fw, t in (("pytorch", 2.5), ("keras3-jax", 3.5)):
    a = types.SimpleNamespace(task="mnist_mlp", framework=fw, epochs=2, batch_size=128, seed=1, threads=2,
                              limit_train=1000, limit_val=200, steps=0, warmup_steps=0, variant="")
    r = cli.Record(a, 1000, 200, {"dataset": "mnist", "path": "/data/mnist/train-images-idx3-ubyte",
                                  "dataset_bytes": 1})
    for e in (1, 2):
        r.add_row(dict(epoch=e, elapsed=t * e, loss=0.5 / e, acc=0.8 + 0.05 * e, val_loss=0.4 / e,
                       val_acc=0.85 + 0.05 * e, train_s=t - 0.2, val_s=0.2, epoch_s=t))
    r.set_env("framework_version", fw + " (test)")
    r.status = "ok"
    r.write(sys.argv[2])
# the FP32 math as khost records it (--math): tf32 on cuda, fp32 with a note on the cpu, fp32 by default
import json, os
for dev, asked, want, note in (("cuda:0", "tf32", "tf32", ""), ("cpu", "tf32", "fp32", "tf32 ignored on cpu"),
                               ("cuda:0", None, "fp32", "")):
    a = types.SimpleNamespace(task="mnist_mlp", framework="pytorch", epochs=1, batch_size=128, seed=1, threads=2,
                              limit_train=0, limit_val=0, steps=0, warmup_steps=0, variant="", device=dev)
    if asked:
        a.math = asked
    d = cli.Record(a, 10, 10, {"dataset": "mnist", "path": "/data/mnist/x"}).to_dict()
    if d.get("math") != want or not d.get("math_note", "").startswith(note) or (not note and "math_note" in d):
        print("FAIL: the record's math for %s --math %s: %s / %s" % (dev, asked, d.get("math"), d.get("math_note")))
        sys.exit(1)
PY
# a khost backend's record beside them
KHOST_LIBCUDA=/nonexistent KHOST_CONF=$(dirname "$khost")/tests/fixtures_e2e/khost-test.ini "$khost" run \
    --plugin fixture --task fixture_blobs --device cpu --epochs 1 --out "$tmp/results" --quiet >/dev/null 2>&1
for f in pytorch keras3-jax; do
    [ -f "$tmp/results/mnist_mlp/${f}__cpu.json" ] && ok || bad "no $f record"
done
"$khost" report "$tmp/results" >"$tmp/report.md" 2>"$tmp/report.err"
rc=$?
[ $rc -eq 0 ] && ok || bad "report exit $rc: $(cat "$tmp/report.err")"
grep -q "^| pytorch (reference) | 0.9500 |" "$tmp/report.md" && ok || bad "pytorch row: $(cat "$tmp/report.md")"
grep -q "^| keras3-jax (reference) | 0.9500 |" "$tmp/report.md" && ok || bad "keras3-jax row"
grep -q "^| pytorch (reference) | \*\*2.5 \[—\] (1.0x)\*\* |" "$tmp/report.md" && grep -q "^| keras3-jax (reference) | 3.5 \[—\] (1.4x \[—\]) |" "$tmp/report.md" &&
    ok || bad "time rows: $(cat "$tmp/report.md")"
grep -q "^## fixture_blobs" "$tmp/report.md" && grep -q "^| fixture |" "$tmp/report.md" && ok || bad "the khost row is missing"
"$khost" report "$tmp/results" --html "$tmp/r.html" >/dev/null 2>&1
grep -q 'keras3-jax <span class="ref">(reference)</span>' "$tmp/r.html" && grep -q 'framework_version' "$tmp/r.html" && ok ||
    bad "HTML reference rows or their environment"
echo "test_reference_rows: $pass passed, $fail failed"
[ $fail -eq 0 ]
