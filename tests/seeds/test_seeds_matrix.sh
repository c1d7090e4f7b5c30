#!/usr/bin/env bash
# tests/seeds/test_seeds_matrix.sh KHOST E2E_DIR — `khost matrix --seeds N` on the fixture backend:
#   1. --seeds 3 --seed 40: three records per cell, repetition k of 3 in round k trained from seed 39 + k, each
#      with its epochs to target (the first epoch whose val_acc reached KHOST_FIXTURE_TARGET, or null and why);
#      without --seed the seeds start at the registry's (7);
#   2. reference rows get the same seeds (a stand-in runner that records the --seed it is given), and a runner
#      that trains from another seed than it was given fails its cell, naming the seeds;
#   3. --resume keeps a seed's record only when it is that seed's: the same --seeds rerun nothing, another
#      --seed reruns every record, a removed repetition is run again alone;
#   4. --seeds with --repeat N > 1 or auto, counts out of range and seeds past the largest are refused (exit 2);
#   5. --slurm: each cell is N array elements, each with its own seed in its plan line; element K run by hand
#      writes repetition k with that seed, the collector records the others by their seed and repetition, and
#      --resume at submit leaves out the seeds already recorded.
set -u
bin=$1 e2e=$2
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-seeds-XXXXXX")
trap 'rm -rf "$t"' EXIT
export KHOST_CONF=$e2e/khost-test.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
export KHOST_FIXTURE_TARGET=0.5
py=/usr/bin/python3
k() { timeout 120 "$bin" "$@"; }
m=(matrix --plugins fixture,fixture_codegen --tasks fixture_blobs --devices cpu --epochs 5 --limit-train 256 --steps 2)

# --- 1. three seeds, one round each ---------------------------------------------------------------------------
o=$(k "${m[@]}" --seeds 3 --seed 40 --order-seed 5 --out "$t/a" 2>&1); rc=$?
check "matrix --seeds 3 exits 0 ($rc): $o" test $rc -eq 0
check "six cells: two backends x three seeds" has "$o" "2 plugin(s) x 1 task(s) x 1 device(s) x seeds = 6 cell(s)"
check "the seeds are named" has "$o" "matrix: 3 seed(s), 40 to 42, one round each (seed k is repetition k), order seed 5"
# every record: seed 39 + k as repetition k of 3 in round k, its epochs to target as its own epochs say
records() { # DIR PLUGIN... : each plugin's three records, checked; prints nothing when all hold
  "$py" - "$@" <<'PY'
import json, sys
d, first, plugins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for p in plugins:
    for k in (1, 2, 3):
        f = "%s/fixture_blobs/%s__cpu.rep%d.json" % (d, p, k)
        r = json.load(open(f))
        assert r["status"] == "ok", (f, r["status"], r["reason"])
        assert r["seed"] == first + k - 1, (f, r["seed"])
        assert r["repeat"]["index"] == k and r["repeat"]["of"] == 3 and r["repeat"]["round"] == k, (f, r["repeat"])
        assert r["target"] == {"value": 0.5, "reach": "at_least"}, (f, r.get("target"))
        hit = [e["epoch"] for e in r["epochs"] if e["val_acc"] >= 0.5]
        if hit:
            assert r["epochs_to_target"] == hit[0] and "target_note" not in r, (f, r["epochs_to_target"])
            assert r["time_to_target_s"] == r["epochs"][hit[0] - 1]["elapsed"], f
        else:
            assert r["epochs_to_target"] is None and r["time_to_target_s"] is None, f
            assert r["target_note"].startswith("val_acc never reached its target 0.5 (at least) in 5 epochs"), f
PY
}
out=$(records "$t/a" 40 fixture fixture_codegen 2>&1)
check "records 1-3 of each backend: seeds 40-42, repetition k of 3 in round k, epochs to target: $out" test -z "$out"
# the two backends compute the same thing: seed k's epochs to target agree between them (a cross-check of the
# fixture itself, so a later failure of the report's convergence check on this set is not the fixture's)
same=$("$py" - "$t/a" <<'PY'
import json, sys
for k in (1, 2, 3):
    a, b = (json.load(open("%s/fixture_blobs/%s__cpu.rep%d.json" % (sys.argv[1], p, k))) for p in ("fixture", "fixture_codegen"))
    print(a["epochs_to_target"] == b["epochs_to_target"] and a["metric_value"] == b["metric_value"])
PY
)
check "both backends reach the target at the same epoch from the same seed: $same" test "$same" = $'True\nTrue\nTrue'
o=$(k "${m[@]}" --plugins fixture --seeds 3 --out "$t/reg" 2>&1); rc=$?
check "without --seed the seeds start at the registry's 7 ($rc): $o" has "$o" "3 seed(s), 7 to 9"
out=$(records "$t/reg" 7 fixture 2>&1)
check "... and the records say 7, 8, 9: $out" test -z "$out"

# --- 2. reference rows: the same seeds, checked ---------------------------------------------------------------
# A stand-in reference framework: writes the record khost asks for into --out, from the --seed it is given or,
# as "sloppy", from seed 1 whatever it was given.
cat >"$t/runner" <<RUN
#!/bin/sh
exec "$py" "$t/runner.py" "\$@"
RUN
cat >"$t/runner.py" <<'PY'
import json, os, sys
fw, task, a = sys.argv[1], sys.argv[2], sys.argv[3:]
opt = {a[i]: a[i + 1] for i in range(len(a) - 1) if a[i].startswith("--")}
k, n, rnd, pos, oseed = (int(v) for v in opt["--repetition"].split("/"))
seed = 1 if os.environ.get("SLOPPY_SEED") else int(opt["--seed"])
rows = [{"epoch": e, "elapsed": 0.1 * e, "loss": 1.0, "acc": 0.5, "val_loss": 1.0, "val_acc": 0.4 + 0.05 * e,
         "train_s": 0.1, "val_s": 0.0, "epoch_s": 0.1} for e in (1, 2, 3)]
rec = {"khost_record": 2, "plugin": fw, "task": task, "device": opt["--device"], "status": "ok", "reason": "",
       "epochs_requested": 3, "batch_size": 64, "seed": seed, "train_samples": 256, "val_samples": 512,
       "metric": "val_acc", "metric_value": rows[-1]["val_acc"], "mean_epoch_s": 0.1, "median_epoch_s": 0.1,
       "time_to_target_s": 0.2, "target": {"value": 0.5, "reach": "at_least"}, "epochs_to_target": 2,
       "epochs": rows, "repeat": {"index": k, "of": n, "round": rnd, "position": pos, "order_seed": oseed},
       "environment": {"reference": fw + " (stand-in)"}}
d = os.path.join(opt["--out"], task)
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "%s__%s.rep%d.json" % (fw, opt["--device"], k)), "w") as f:
    json.dump(rec, f)
PY
chmod +x "$t/runner"
o=$(KHOST_REFERENCE_RUNNER=$t/runner k "${m[@]}" --plugins fixture --references pytorch --seeds 3 --seed 40 \
    --out "$t/ref" 2>&1); rc=$?
check "matrix --references --seeds 3 exits 0 ($rc): $o" test $rc -eq 0
seeds=$("$py" - "$t/ref" <<'PY'
import json, sys
for p in ("fixture", "pytorch"):
    print(p, [json.load(open("%s/fixture_blobs/%s__cpu.rep%d.json" % (sys.argv[1], p, k)))["seed"] for k in (1, 2, 3)])
PY
)
check "the reference row trained from the backend's seeds: $seeds" test "$seeds" = $'fixture [40, 41, 42]\npytorch [40, 41, 42]'
o=$(SLOPPY_SEED=1 KHOST_REFERENCE_RUNNER=$t/runner k "${m[@]}" --plugins fixture --references pytorch --seeds 2 \
    --seed 40 --out "$t/sloppy" 2>&1); rc=$?
check "a runner that ignores --seed fails the matrix ($rc)" test $rc -eq 1
r2=$("$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], r["seed"], r["reason"])' \
    "$t/sloppy/fixture_blobs/pytorch__cpu.rep2.json" 2>&1)
check "... its seed-2 cell is an error naming both seeds: $r2" has "$r2" "error 41 the reference runner (tools/reference/run) wrote"
check "... (with seed 1, not this cell's --seed 41): $r2" has "$r2" "with seed 1, not this cell's --seed 41"

# --- 3. --resume by seed --------------------------------------------------------------------------------------
o=$(k "${m[@]}" --seeds 3 --seed 40 --resume --out "$t/a" 2>&1); rc=$?
check "--resume with the same seeds runs nothing ($rc)" test "$(grep -c 'skipped (recorded ok)' <<<"$o")" -eq 6
rm "$t/a/fixture_blobs/fixture__cpu.rep2.json"
o=$(k "${m[@]}" --seeds 3 --seed 40 --resume --out "$t/a" 2>&1); rc=$?
check "--resume after repetition 2 of fixture was removed runs it alone ($rc)" \
    test "$(grep -c 'skipped (recorded ok)' <<<"$o")" -eq 5 -a -f "$t/a/fixture_blobs/fixture__cpu.rep2.json"
o=$(k "${m[@]}" --seeds 3 --seed 41 --resume --out "$t/a" 2>&1); rc=$?
check "--resume from another first seed reruns every record ($rc)" test "$(grep -c 'skipped' <<<"$o")" -eq 0
out=$(records "$t/a" 41 fixture fixture_codegen 2>&1)
check "... which now say 41-43: $out" test -z "$out"

# --- 4. refusals ----------------------------------------------------------------------------------------------
for bad in "--seeds 3 --repeat 2" "--repeat 2 --seeds 3" "--seeds 2 --repeat auto" "--seeds 0" "--seeds 1001" \
           "--seeds x" "--seeds 3 --seed 9223372036854775806"; do
  o=$(k "${m[@]}" $bad --out "$t/bad" 2>&1); rc=$?
  check "$bad refused with exit 2 ($rc): $o" test $rc -eq 2
done
check "... having made nothing, not even the results folder" test ! -e "$t/bad"
o=$(k "${m[@]}" --seeds 3 --repeat 2 --out "$t/bad" 2>&1)
check "the refusal says why: $o" has "$o" "each seed is one repetition already"
o=$(k matrix --help 2>&1)
check "matrix --help names --seeds and its rule" has "$o" "not with --repeat N > 1 or auto (each seed is one repetition)"
o=$(k --help 2>&1)
check "khost --help names --seeds" has "$o" "--seeds N trains every cell from seeds S..S+N-1"

# --- 5. Slurm: an array element per seed ----------------------------------------------------------------------
o=$(k matrix --slurm-script-only --plugins fixture --tasks fixture_blobs --epochs 5 --limit-train 256 --seeds 3 \
    --seed 40 --out "$t/s" 2>&1); rc=$?
check "--slurm-script-only --seeds 3 ($rc): $o" has "$o" "slurm: cpu: 3 cell(s): wrote "
plan=$(ls "$t"/s/slurm/*-cpu/cells 2>/dev/null | head -1)
lines=$(grep '^cell' "$plan" 2>/dev/null | cut -f8,9 | tr '\t\n' ' ;')
check "each element's seed and k/N in its plan line: $lines" test "$lines" = "40 1/3;41 2/3;42 3/3;"
o=$(SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=1 k matrix --slurm-cell 1 --slurm-plan "$plan" 2>&1); rc=$?
check "array element 1 run by hand ($rc): $o" test $rc -eq 0
r=$("$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["seed"], r["repeat"]["index"], r["repeat"]["of"], r["status"])' \
    "$t/s/fixture_blobs/fixture__cpu.rep2.json" 2>&1)
check "... writes repetition 2 of 3 from seed 41: $r" test "$r" = "41 2 3 ok"
# the collector (scontrol standing in for Slurm, no accounting): element 0 cancelled, 1 its own record, 2 never
# started; each record it writes names its element's seed and repetition
mkdir -p "$t/bin"
printf '#!/bin/sh\nexit 1\n' >"$t/bin/sacct"
printf '#!/bin/sh\necho "JobId=78 ArrayJobId=77 ArrayTaskId=0 JobState=CANCELLED BatchHost=n1"\necho "JobId=79 ArrayJobId=77 ArrayTaskId=1 JobState=COMPLETED BatchHost=n1"\n' >"$t/bin/scontrol"
chmod +x "$t/bin/sacct" "$t/bin/scontrol"
o=$(PATH=$t/bin:$PATH k matrix --slurm-collect 77 --slurm-plan "$plan" 2>&1); rc=$?
check "the collector ($rc): $o" has "$o" "3 cell(s): 1 recorded by their array task, 2 recorded here"
r=$("$py" - "$t/s/fixture_blobs" <<'PY'
import json, sys
for k in (1, 2, 3):
    r = json.load(open("%s/fixture__cpu.rep%d.json" % (sys.argv[1], k)))
    print(k, r["status"], r["seed"], r["repeat"]["index"], r["repeat"]["of"], r["repeat"]["round"])
PY
)
check "collected records by seed: $r" test "$r" = $'1 cancelled 40 1 3 1\n2 ok 41 2 3 2\n3 cancelled 42 3 3 3'
o=$(k matrix --slurm-script-only --plugins fixture --tasks fixture_blobs --epochs 5 --limit-train 256 --seeds 3 \
    --seed 40 --resume --out "$t/s" 2>&1); rc=$?
check "--resume at submit leaves out the recorded seed ($rc): $o" has "$o" "slurm: cpu: 1 cell(s) skipped"
plan2=$(ls -t "$t"/s/slurm/*-cpu/cells | head -1)
lines=$(grep '^cell' "$plan2" | cut -f8,9 | tr '\t\n' ' ;')
check "... and submits seeds 40 and 42 as elements 0 and 1: $lines" test "$lines" = "40 1/3;42 3/3;"
finish test_seeds_matrix
