#!/usr/bin/env bash
# tests/compare_noise/test_compare_noise.sh KHOST E2E_DIR — `khost compare` on sets the fixture backend measured:
#   a. a set measured while two CPU hogs run (shell busy loops started here; the fixture spins 60 ms a step, so
#      each repetition's noise window is over a second) against a quiet one: the cell is "too noisy to tell"
#      (most of the hogged side's repetitions were taken under noise, the report's rule), the why says so, and
#      --fail-above 5 exits 9;
#   b. two quiet sets of this build on this machine (an A/A comparison): the A/A section, in the text and the
#      JSON, with a false-positive rate in [0, 1] and a detectable change that is finite and above 0.
set -u
bin=$1 e2e=$2
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-cmpnoise-XXXXXX")
hogs=()
trap 'for p in "${hogs[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf "$t"' EXIT
export KHOST_CONF=$e2e/khost-test.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
k() { timeout 200 "$bin" "$@"; }
m=(matrix --plugins fixture --tasks fixture_blobs --devices cpu --epochs 1 --steps 20 --repeat 5 --quiet)
env_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["environment"].get(sys.argv[2], ""))' "$1" "$2"; }

# --- a. a hogged set against a quiet one ------------------------------------------------------------------------
KHOST_FIXTURE_STEP_US=60000 k "${m[@]}" --out "$t/quiet" >/dev/null 2>&1
for _ in 1 2; do sh -c 'while :; do :; done' & hogs+=($!); done
KHOST_FIXTURE_STEP_US=60000 k "${m[@]}" --out "$t/hog" >/dev/null 2>&1
for p in "${hogs[@]}"; do kill -9 $p 2>/dev/null; done; hogs=()
noisy=0
for f in "$t"/hog/fixture_blobs/fixture__cpu.rep*.json; do
  python3 -c 'import sys; e=sys.argv[1:]; sys.exit(0 if float(e[1] or 0) >= 1.0 and float(e[0] or 0) > 0.25 else 1)' \
    "$(env_of "$f" noise_other_cores)" "$(env_of "$f" noise_window_s)" && noisy=$((noisy + 1))
done
check "the hogged set: most of its 5 repetitions recorded under noise ($noisy)" test "$noisy" -ge 3
o=$(k compare "$t/quiet" "$t/hog" 2>&1)
check "too noisy to tell: $(grep fixture <<<"$o" | head -n 3)" \
  grep -qE "^\\| fixture_blobs \\| fixture \\| cpu \\| step \\|.*\\| too noisy to tell \\|$" <<<"$o"
check "... and why: the repetitions taken under noise" \
  grep -qE "^- fixture_blobs fixture on cpu: too noisy to tell: [0-9] of (NEW|BASE)'s 5 finished repetitions were taken under noise" <<<"$o"
o=$(k compare "$t/quiet" "$t/hog" --fail-above 5 2>&1 >/dev/null); rc=$?
check "--fail-above 5 exits 9 ($rc), naming the cell: $o" \
  test $rc -eq 9 -a -n "$(grep -F 'cannot compare fixture_blobs fixture cpu' <<<"$o")"

# --- b. A/A: two quiet sets of one build ------------------------------------------------------------------------
KHOST_FIXTURE_STEP_US=2000 k "${m[@]}" --out "$t/a1" >/dev/null 2>&1
KHOST_FIXTURE_STEP_US=2000 k "${m[@]}" --out "$t/a2" >/dev/null 2>&1
rev=$(env_of "$t/a1/fixture_blobs/fixture__cpu.rep1.json" git_rev)
aa=() head="## A/A: one build on one machine"
if [ -z "$rev" ] || [ "$rev" = unknown ]; then # a build outside git names no revision: ask for the section
  aa=(--aa) head="## A/A (asked with --aa): NOT one build on one machine"
fi
o=$(k compare "$t/a1" "$t/a2" "${aa[@]}" 2>&1); rc=$?
check "A/A: exit 0 ($rc) and the section ($head)" test $rc -eq 0 -a -n "$(grep -F "$head" <<<"$o")"
rate=$(sed -n 's/^- false-positive rate: \([0-9.e+-]*\) (.*/\1/p' <<<"$o")
check "... a false-positive rate in [0, 1] in the text: '$rate'" \
  python3 -c 'import sys; r=float(sys.argv[1]); assert 0 <= r <= 1' "$rate"
check "... a detectable change in the text: $(grep -o 'median [0-9.]* %, largest [0-9.]* %' <<<"$o")" \
  grep -qE "^- smallest change detectable on this machine: median [0-9.]+ %, largest [0-9.]+ % \\(fixture_blobs fixture cpu\\), over 1 cell" <<<"$o"
k compare "$t/a1" "$t/a2" "${aa[@]}" --json >"$t/aa.json" 2>/dev/null
check "... and in the JSON: a rate in [0, 1], a detectable change finite and above 0, per cell too" python3 - "$t/aa.json" <<'PY'
import json, math, sys
a = json.load(open(sys.argv[1]))["aa"]
r, d = a["false_positive_rate"], a["detectable_change_pct"]
assert 0 <= r <= 1 and a["cells_with_verdict"] == 1, a
assert math.isfinite(d["median"]) and d["median"] > 0 and d["largest"] >= d["median"], d
c = a["cells"][0]
assert c["detectable_change_pct"] == d["largest"] and c["detectable_change_pct"] > 0, c
PY
finish test_compare_noise
