#!/usr/bin/env bash
# tests/reference_rows/test_reference_matrix.sh KHOST SOURCE_DIR — reference cells under khost's protocol:
# `khost matrix --references` runs a reference framework as cells of the same shuffled rounds as a backend
# (its own child per repetition, the same --steps/--warmup-steps/--repeat options), through the launcher
# tools/reference/run, and the records it writes (khref: real data readers, loop, timing, record writer)
# carry per-step samples and the repetition, so `khost report` gives their rows intervals and a table
# against the fastest reference; with --seeds the reference trains from the backend's seeds and records its
# epochs to target. The framework is a numpy stand-in (numpy_ref.py); the launcher's own
# dispatch is checked separately, and a real PyTorch cell runs when tools/reference/setup was run.
set -uo pipefail
khost=$1 src=$2
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
py=/usr/bin/python3
"$py" -c 'import numpy' 2>/dev/null || { echo "SKIP: $py has no numpy (apt-get install python3-numpy)"; exit 77; }
data=${KHOST_DATA:-$src/data}
[ -e "$data/mnist" ] || { echo "SKIP: no MNIST in $data (tools/fetch-datasets)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-refmatrix-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/runner" <<RUN
#!/bin/sh
exec "$py" "$src/tests/reference_rows/numpy_ref.py" "\$@"
RUN
chmod +x "$tmp/runner"
export KHOST_DATA=$data KHOST_LIBCUDA=/nonexistent KHREF_CACHE=off
common=(--tasks mnist_mlp --devices cpu --epochs 1 --limit-val 256 --steps 6 --warmup-steps 2 --order-seed 7)

# 1. one backend and two references, three rounds
KHOST_REFERENCE_RUNNER=$tmp/runner "$khost" matrix --plugins cntk --references pytorch,keras3-jax --repeat 3 \
    "${common[@]}" --out "$tmp/r" >"$tmp/m.out" 2>&1
rc=$?
[ $rc -eq 0 ] && ok || bad "matrix exit $rc: $(cat "$tmp/m.out")"
grep -q "3 plugin(s) x 1 task(s) x 1 device(s) x repetitions = 9 cell(s)" "$tmp/m.out" && ok || bad "cell count: $(head -3 "$tmp/m.out")"
for fw in pytorch keras3-jax; do
    for k in 1 2 3; do
        f=$tmp/r/mnist_mlp/${fw}__cpu.rep$k.json
        [ -f "$f" ] || { bad "no $f"; continue; }
        "$py" - "$f" "$k" <<'PY' && ok || bad "record $f"
import json, sys
d = json.load(open(sys.argv[1]))
k = int(sys.argv[2])
assert d["khost_record"] == 2 and d["status"] == "ok", (d["khost_record"], d["status"], d["reason"])
assert d["repeat"]["index"] == k and d["repeat"]["of"] == 3 and d["repeat"]["order_seed"] == 7, d["repeat"]
s = d["samples"]
assert len(s["step_s"]) == 6 and all(v > 0 for v in s["step_s"]), s
assert s["warmup_steps"] == 2 and s["steps_per_epoch"] == 6 and s["step_sync"] == "device", s
assert len(s["epoch_s"]) == 1 and d["environment"]["limit_val"] == "256", d["environment"]
assert d["peak_rss_bytes"] > 1 << 20
PY
    done
    [ -f "$tmp/r/mnist_mlp/${fw}__cpu.stats.json" ] && ok || bad "no statistics of $fw"
done
# the rounds interleave references and the backend: in each round's order every cell has its own position
"$py" - "$tmp/r/mnist_mlp" <<'PY' && ok || bad "positions in the rounds"
import json, sys, glob
seen = {}
for f in glob.glob(sys.argv[1] + "/*.rep*.json"):
    d = json.load(open(f))
    seen.setdefault(d["repeat"]["round"], set()).add(d["repeat"]["position"])
assert sorted(seen) == [1, 2, 3] and all(v == {0, 1, 2} for v in seen.values()), seen
PY
"$khost" report "$tmp/r" >"$tmp/report.md" 2>&1 && ok || bad "report failed: $(cat "$tmp/report.md")"
grep -q '^| pytorch (reference) |' "$tmp/report.md" && ok || bad "no pytorch row"
grep -q '^Against the fastest reference' "$tmp/report.md" && ok || bad "no table against the references: $(cat "$tmp/report.md")"
grep -Eq '^\| cntk \| [0-9.]+x \[[0-9.]+, [0-9.]+\]( ≈)? vs (pytorch|keras3-jax) \|$' "$tmp/report.md" && ok ||
    bad "cntk against the fastest reference with its interval: $(grep -A4 '^Against' "$tmp/report.md")"

"$khost" report "$tmp/r" --html "$tmp/r.html" >/dev/null 2>&1 && grep -q '<table class="time vsref">' "$tmp/r.html" &&
    grep -Eq '<tr><th>cntk</th><td>[0-9.]+x \[[0-9.]+, [0-9.]+\]( ≈)? vs (pytorch|keras3-jax)</td></tr>' "$tmp/r.html" && ok ||
    bad "the HTML page's table against the references"

# 2. --resume keeps every repetition; --plugins none runs references only
KHOST_REFERENCE_RUNNER=$tmp/runner "$khost" matrix --plugins cntk --references pytorch,keras3-jax --repeat 3 \
    "${common[@]}" --out "$tmp/r" --resume >"$tmp/m2.out" 2>&1 && ok || bad "resume: $(cat "$tmp/m2.out")"
[ "$(grep -c 'skipped (recorded ok)' "$tmp/m2.out")" = 9 ] && ok || bad "resume skipped: $(cat "$tmp/m2.out")"
KHOST_REFERENCE_RUNNER=$tmp/runner "$khost" matrix --plugins none --references pytorch "${common[@]}" \
    --out "$tmp/o" >"$tmp/m3.out" 2>&1 && [ -f "$tmp/o/mnist_mlp/pytorch__cpu.json" ] && ! ls "$tmp/o/mnist_mlp" | grep -q cntk &&
    ok || bad "references only: $(cat "$tmp/m3.out")"

# 2b. --seeds: the reference trains from the backend's seeds and records its epochs to target as khost does
KHOST_REFERENCE_RUNNER=$tmp/runner "$khost" matrix --plugins cntk --references pytorch --seeds 2 --seed 21 \
    "${common[@]}" --out "$tmp/s" >"$tmp/s.out" 2>&1 && ok || bad "--seeds 2: $(cat "$tmp/s.out")"
"$py" - "$tmp/s/mnist_mlp" <<'PY' && ok || bad "--seeds 2 records"
import json, sys
for p in ("cntk", "pytorch"):
    for k in (1, 2):
        d = json.load(open("%s/%s__cpu.rep%d.json" % (sys.argv[1], p, k)))
        assert d["status"] == "ok" and d["seed"] == 20 + k and d["repeat"]["index"] == k, (p, k, d["seed"], d["repeat"])
        assert d["target"] == {"value": 0.98, "reach": "at_least"}, (p, d.get("target"))
        hit = [e["epoch"] for e in d["epochs"] if e["val_acc"] >= 0.98]
        assert d["epochs_to_target"] == (hit[0] if hit else None), (p, d["epochs_to_target"])
        assert hit or d["target_note"].startswith("val_acc never reached its target 0.98 (at least) in 1 epoch; best"), d
PY
"$khost" report "$tmp/s" >"$tmp/s.md" 2>&1 # to a file: grep -q ending first would cut the pipe under pipefail
grep -q '^| pytorch (reference) | cpu | 2 (21–22) |' "$tmp/s.md" && ok ||
    bad "the reference row across seeds: $(grep -A5 'across seeds' "$tmp/s.md")"

# 2c. the timing protocol: --references with no count gives every row 1 epoch of 100 timed steps after 5 warm-up,
#     and the report states each row's protocol; rows timed unlike are called so; --timing refuses --seeds,
#     and a count given overrides only its part
KHOST_REFERENCE_RUNNER=$tmp/runner "$khost" matrix --plugins cntk --references pytorch --tasks mnist_mlp \
    --devices cpu --limit-val 256 --out "$tmp/p" >"$tmp/p.out" 2>&1 && ok || bad "timing protocol: $(cat "$tmp/p.out")"
grep -q '^matrix: timing protocol: 1 epoch(s) of 100 timed steps after 5 untimed warm-up steps' "$tmp/p.out" && ok ||
    bad "the protocol line: $(head -3 "$tmp/p.out")"
"$py" - "$tmp/p/mnist_mlp" <<'PY' && ok || bad "timing protocol records"
import json, sys
for p in ("cntk", "pytorch"):
    d = json.load(open("%s/%s__cpu.json" % (sys.argv[1], p)))
    s = d["samples"]
    assert d["status"] == "ok" and len(d["epochs"]) == 1, (p, d["status"], d["reason"])
    assert s["warmup_steps"] == 5 and s["steps_per_epoch"] == 100 and len(s["step_s"]) == 100, (p, s["warmup_steps"])
PY
"$khost" report "$tmp/p" >"$tmp/p.md" 2>&1
grep -q '^| cntk | 5 | 100 | when its work finished on the device (device) |$' "$tmp/p.md" &&
    grep -q '^| pytorch (reference) | 5 | 100 | ' "$tmp/p.md" && ! grep -q 'not timed alike' "$tmp/p.md" && ok ||
    bad "the report's protocol table: $(grep -A6 '^How each row' "$tmp/p.md")"
"$khost" report "$tmp/p" --html "$tmp/p.html" >/dev/null 2>&1 && grep -q '<table class="protocol">' "$tmp/p.html" &&
    grep -q '<tr><th>cntk</th><td>5</td><td>100</td>' "$tmp/p.html" && ok || bad "the page's protocol table"
mkdir -p "$tmp/q/mnist_mlp" && cp "$tmp/p/mnist_mlp/cntk__cpu.json" "$tmp/q/mnist_mlp/" &&
    cp "$tmp/r/mnist_mlp/pytorch__cpu.rep1.json" "$tmp/q/mnist_mlp/pytorch__cpu.json"
"$khost" report "$tmp/q" >"$tmp/q.md" 2>&1
grep -q '^\*\*The rows were not timed alike' "$tmp/q.md" && ok ||
    bad "rows of 100 and 6 steps not called unlike: $(grep -A8 '^How each row' "$tmp/q.md")"
KHOST_REFERENCE_RUNNER=$tmp/runner "$khost" matrix --plugins cntk --references pytorch --timing --seeds 2 \
    --tasks mnist_mlp --devices cpu --out "$tmp/ts" >"$tmp/ts.out" 2>&1
[ $? -eq 2 ] && grep -q -- '--timing with --seeds' "$tmp/ts.out" && ok || bad "--timing --seeds: $(cat "$tmp/ts.out")"
"$khost" matrix --plugins cntk --tasks mnist_mlp --devices cpu --timing --steps 7 --limit-val 256 --out "$tmp/t7" \
    >"$tmp/t7.out" 2>&1 && "$py" - "$tmp/t7/mnist_mlp/cntk__cpu.json" <<'PY' && ok || bad "--timing --steps 7: $(cat "$tmp/t7.out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and len(d["epochs"]) == 1, d["status"]
assert d["samples"]["warmup_steps"] == 5 and d["samples"]["steps_per_epoch"] == 7, d["samples"]
PY

# 3. what cannot run: a task without a reference script is unsupported; a missing environment is an error
#    naming the setup command; an unknown framework is a usage error
KHOST_CONF=$(dirname "$khost")/tests/fixtures_e2e/khost-test.ini KHREF_PYTHON=$tmp/none "$khost" matrix --plugins none \
    --references pytorch --tasks fixture_blobs --devices cpu --epochs 1 --out "$tmp/u" >"$tmp/u.out" 2>&1
grep -Eq '"status":\s+"unsupported"' "$tmp/u/fixture_blobs/pytorch__cpu.json" 2>/dev/null &&
    grep -q 'has no script for task fixture_blobs' "$tmp/u/fixture_blobs/pytorch__cpu.json" && ok ||
    bad "task without a script: $(cat "$tmp/u.out")"
KHREF_PYTHON=$tmp/none "$khost" matrix --plugins none --references keras3-torch "${common[@]}" --out "$tmp/e" \
    >"$tmp/e.out" 2>&1
grep -Eq '"status":\s+"error"' "$tmp/e/mnist_mlp/keras3-torch__cpu.json" 2>/dev/null &&
    grep -q 'run tools/reference/setup' "$tmp/e/mnist_mlp/keras3-torch__cpu.json" && ok ||
    bad "missing environment: $(cat "$tmp/e.out")"
"$khost" matrix --plugins none --references caffe "${common[@]}" --out "$tmp/x" >"$tmp/x.out" 2>&1
[ $? -eq 2 ] && grep -q "unknown reference 'caffe'" "$tmp/x.out" && ok || bad "unknown framework: $(cat "$tmp/x.out")"

# 4. a real reference cell when the environment is installed (tools/reference/setup)
if [ -x "$src/.venv-ref/bin/python" ]; then
    "$khost" matrix --plugins none --references pytorch "${common[@]}" --out "$tmp/t" >"$tmp/t.out" 2>&1 &&
        grep -Eq '"framework_version":\s+"torch 2' "$tmp/t/mnist_mlp/pytorch__cpu.json" && ok ||
        bad "PyTorch cell: $(cat "$tmp/t.out") $(tail -5 "$tmp/t/mnist_mlp/pytorch__cpu.log" 2>/dev/null)"
else
    echo "note: $src/.venv-ref not installed (tools/reference/setup): the real PyTorch cell was not run"
fi
echo "test_reference_matrix: $pass passed, $fail failed"
[ $fail -eq 0 ]
