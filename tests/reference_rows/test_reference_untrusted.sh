#!/usr/bin/env bash
# tests/reference_rows/test_reference_untrusted.sh KHOST SOURCE_DIR — a reference runner is an outside program,
# and khost checks it like a module: a record naming another plugin, task, device or repetition than the cell it
# was started for fails that cell, naming the runner, and never lands in the results folder (the runner writes
# into a folder of its own); a runner and the processes it started end when the matrix is killed (SIGKILL: no
# handler of khost's runs) — tools/reference's guard (khref.cli.guard_parent), the rule khost's cells keep.
set -uo pipefail
khost=$1 src=$2
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-refuntrusted-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export KHOST_LIBCUDA=/nonexistent KHOST_DATA=${KHOST_DATA:-$src/data}

# 1. a runner that writes the record of another cell (cntk), and this cell's record claiming cntk
cat >"$tmp/liar" <<'RUN'
#!/bin/sh
fw=$1 task=$2; shift 2
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
mkdir -p "$out/$task"
rec='{"khost_record": 2, "plugin": "cntk", "task": "'$task'", "device": "cpu", "status": "ok", "reason": "",
      "epochs_requested": 1, "batch_size": 128, "seed": 1, "metric": "val_acc", "metric_value": 0.99,
      "mean_epoch_s": 0.001, "median_epoch_s": 0.001, "epochs": [{"epoch": 1, "epoch_s": 0.001, "val_acc": 0.99}]}'
echo "$rec" >"$out/$task/cntk__cpu.json"
echo "$rec" >"$out/$task/${fw}__cpu.json"
RUN
chmod +x "$tmp/liar"
KHOST_REFERENCE_RUNNER=$tmp/liar "$khost" matrix --plugins none --references pytorch --tasks mnist_mlp --devices cpu \
    --epochs 1 --out "$tmp/r1" >"$tmp/m1.out" 2>&1
rc=$?
[ $rc -ne 0 ] && ok || bad "matrix exit 0 although the runner's record is not its cell's"
[ ! -e "$tmp/r1/mnist_mlp/cntk__cpu.json" ] && ok || bad "the runner wrote cntk's record into the results folder"
python3 - "$tmp/r1/mnist_mlp/pytorch__cpu.json" <<'PY' && ok || bad "pytorch's record (above): $(cat "$tmp/m1.out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "error", r["status"]
assert "reference runner" in r["reason"] and "naming plugin 'cntk', not this cell's 'pytorch'" in r["reason"], r["reason"]
PY
ls -a "$tmp/r1" | grep -q '^\.reference-' && bad "the runner's folder was left behind: $(ls -a "$tmp/r1")" || ok

# 2. a runner that answers for the wrong repetition
cat >"$tmp/wrongrep" <<'RUN'
#!/bin/sh
fw=$1 task=$2; shift 2
while [ $# -gt 0 ]; do case $1 in --out) out=$2 ;; --repetition) rep=$2 ;; esac; shift; done
k=${rep%%/*}
mkdir -p "$out/$task"
echo '{"khost_record": 2, "plugin": "'$fw'", "task": "'$task'", "device": "cpu", "status": "ok", "reason": "",
       "epochs_requested": 1, "batch_size": 128, "seed": 1, "metric": "val_acc", "metric_value": 0.99,
       "mean_epoch_s": 0.001, "median_epoch_s": 0.001, "epochs": [{"epoch": 1, "epoch_s": 0.001, "val_acc": 0.99}],
       "repeat": {"index": 2, "of": 2, "round": 2, "position": 0, "order_seed": 1}}' >"$out/$task/${fw}__cpu.rep$k.json"
RUN
chmod +x "$tmp/wrongrep"
KHOST_REFERENCE_RUNNER=$tmp/wrongrep "$khost" matrix --plugins none --references pytorch --tasks mnist_mlp \
    --devices cpu --epochs 1 --repeat 2 --order-seed 3 --out "$tmp/r2" >"$tmp/m2.out" 2>&1
python3 - "$tmp/r2/mnist_mlp" <<'PY' && ok || bad "repetitions (above): $(cat "$tmp/m2.out")"
import json, sys
r1 = json.load(open(sys.argv[1] + "/pytorch__cpu.rep1.json"))
r2 = json.load(open(sys.argv[1] + "/pytorch__cpu.rep2.json"))
assert r1["status"] == "error" and "as repetition 2 of 2 (round 2), not this cell's 1 of 2 (round 1)" in r1["reason"], r1
assert r2["status"] == "ok", r2["status"]
PY

# 3. the matrix killed with SIGKILL while a runner (khref's guard) and a child of it run: both end
cat >"$tmp/sleeper.py" <<PY
import os, subprocess, sys, time
sys.path.insert(0, "$src/tools/reference/lib")
from khref import cli
cli.guard_parent()
child = subprocess.Popen(["sleep", "300"])
with open("$tmp/pids.tmp", "w") as f:
    f.write("%d %d\n" % (os.getpid(), child.pid))
os.rename("$tmp/pids.tmp", "$tmp/pids")
time.sleep(300)
PY
printf '#!/bin/sh\nexec python3 %s "$@"\n' "$tmp/sleeper.py" >"$tmp/sleeper"
chmod +x "$tmp/sleeper"
KHOST_REFERENCE_RUNNER=$tmp/sleeper "$khost" matrix --plugins none --references pytorch --tasks mnist_mlp \
    --devices cpu --epochs 1 --out "$tmp/r3" >"$tmp/m3.out" 2>&1 &
matrix=$!
for _ in $(seq 100); do [ -s "$tmp/pids" ] && break; sleep 0.1; done
if [ ! -s "$tmp/pids" ]; then
    bad "the sleeping runner never started: $(cat "$tmp/m3.out")"
    kill -9 $matrix 2>/dev/null
else
    read -r runner child <"$tmp/pids"
    kill -9 $matrix
    wait $matrix 2>/dev/null
    for _ in $(seq 50); do kill -0 "$runner" 2>/dev/null || kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$runner" 2>/dev/null && bad "the runner (pid $runner) outlived the killed matrix" || ok
    kill -0 "$child" 2>/dev/null && bad "the runner's child (pid $child) outlived the killed matrix" || ok
    kill -9 "$runner" "$child" 2>/dev/null
fi
echo "test_reference_untrusted: $pass passed, $fail failed"
[ $fail -eq 0 ]
