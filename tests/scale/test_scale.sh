#!/usr/bin/env bash
# tests/scale/test_scale.sh KHOST_BIN OUT_DIR — report and compare at scale: two results folders of 100,000
# repetition records each (two cells of 50,000) and a Slurm plan of 100,000 cells. Checks what the commands
# say, not how long they take (the ctest TIMEOUT only stops a hang: matching cells or plan lines one against
# another would take hours here; tools/bench-scale records the times).
set -uo pipefail
khost=$1 out=$2 here=$(cd "$(dirname "$0")" && pwd)
reps=${KHOST_SCALE_REPS:-50000}
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
rm -rf "$out" && mkdir -p "$out"
python3 "$here/make_large_set.py" "$out/base" 1 "$reps" && python3 "$here/make_large_set.py" "$out/new" 2 "$reps" ||
    { echo "FAIL: could not write the sets"; exit 1; }

# report: both cells, every repetition counted, a CI on each median
"$khost" report "$out/base" >"$out/report.md" 2>"$out/report.err"
rc=$?
[ $rc -eq 0 ] && ok || bad "report exited $rc: $(head -3 "$out/report.err")"
grep -Eq '^\| cntk \| \*\*2\.0 \[[0-9.]+, [0-9.]+\] \(1\.0x\)\*\* \|' "$out/report.md" && ok ||
    bad "cntk's time row: $(grep '^| cntk' "$out/report.md" | head -1)"
grep -Eq '^\| theano \| 3\.0 \[[0-9.]+, [0-9.]+\] \(1\.5x \[' "$out/report.md" && ok ||
    bad "theano's time row: $(grep '^| theano' "$out/report.md" | head -1)"

# compare: two cells, each with all its repetitions on both sides, unchanged within the noise band
"$khost" compare "$out/base" "$out/new" --json --fail-above 5 >"$out/compare.json" 2>"$out/compare.err"
rc=$?
[ $rc -eq 0 ] && ok || bad "compare exited $rc: $(head -3 "$out/compare.err")"
python3 - "$out/compare.json" "$reps" <<'PY' && ok || bad "compare's JSON (above)"
import json, sys
o = json.load(open(sys.argv[1])); n = int(sys.argv[2])
cells = o["cells"]
assert o["cells_compared"] == 2 and len(cells) == 2, o["cells_compared"]
for c in cells:
    assert c["base_n"] == n and c["new_n"] == n, (c["plugin"], c["base_n"], c["new_n"])
    assert c["verdict"] == "unchanged" and abs(c["ratio"] - 1) < 0.01, (c["plugin"], c["verdict"], c["ratio"])
    assert c["ratio_ci_lo"] < c["ratio"] < c["ratio_ci_hi"], c
PY

# a Slurm plan of 100,000 cells, two of which have records (and one cell listed twice): 99,999 missing
mkdir -p "$out/base/slurm/p1"
{
    printf 'khost-slurm-plan\t1\nout\t%s\n' "$out/base"
    printf 'cell\tcntk\t\tmnist_mlp\t\tcpu\t\n'
    printf 'cell\ttheano\t\tmnist_mlp\t\tcpu\t\n'
    printf 'cell\tp7\t\tt0\t\tcpu\t\n'
    for ((i = 0; i < 99997; i++)); do printf 'cell\tp%d\t\tt%d\t\tcpu\t\n' $((i % 1000)) $((i / 1000)); done
} >"$out/base/slurm/p1/cells"
echo 4242 >"$out/base/slurm/p1/job"
"$khost" report "$out/base" >"$out/plan.md" 2>"$out/plan.err"
rc=$?
[ $rc -eq 0 ] && ok || bad "report with the plan exited $rc: $(head -3 "$out/plan.err")"
missing=$(grep -c ': missing: submitted to Slurm as array task 4242_' "$out/plan.md")
[ "$missing" -eq 99997 ] && ok || bad "$missing cells reported missing, expected 99,997 (p7 on t0 is listed twice)"
grep -q '^- cntk on cpu: missing' "$out/plan.md" && bad "a cell with records is reported missing" || ok
grep -Eq '^\| cntk \| \*\*2\.0 \[' "$out/plan.md" && ok || bad "the plan hid cntk's records"

echo "test_scale: $pass passed, $fail failed"
[ $fail -eq 0 ]
