#!/usr/bin/env bash
# tests/noise/test_noise.sh KHOST E2E_DIR — the machine's load on each repetition's record, and the report's mark.
#   1. a repetition measured while two CPU hogs run (shell busy loops started here) records other processes at
#      half a core or more, over a window of a second or more; the report marks it "taken under noise";
#   2. the report's rule on planted records: others 0.9 cores or steal 5 % marks a repetition, 0.1 cores does
#      not, and a window under a second is not judged (/proc counts in 10 ms ticks).
set -u
bin=$1 e2e=$2
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-noise-XXXXXX")
hogs=()
trap 'for p in "${hogs[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf "$t"' EXIT
export KHOST_CONF=$e2e/khost-test.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
k() { timeout 120 "$bin" "$@"; }
env_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["environment"].get(sys.argv[2], ""))' "$1" "$2"; }

# --- 1. a planted hog ----------------------------------------------------------------------------------------
for _ in 1 2; do sh -c 'while :; do :; done' & hogs+=($!); done
KHOST_FIXTURE_STEP_US=60000 k run --plugin fixture --task fixture_blobs --device cpu --epochs 1 --steps 20 \
  --out "$t/hog" --repetition 1/2/1/0/1 >/dev/null 2>&1
for p in "${hogs[@]}"; do kill -9 $p 2>/dev/null; done; hogs=()
KHOST_FIXTURE_STEP_US=60000 k run --plugin fixture --task fixture_blobs --device cpu --epochs 1 --steps 20 \
  --out "$t/hog" --repetition 2/2/2/0/1 >/dev/null 2>&1
f=$t/hog/fixture_blobs/fixture__cpu.rep1.json
others=$(env_of "$f" noise_other_cores) window=$(env_of "$f" noise_window_s)
check "the hogged repetition records others at half a core or more ($others over $window s)" \
  python3 -c 'import sys; assert float(sys.argv[1]) >= 0.5 and float(sys.argv[2]) >= 1.0' "$others" "$window"
check "... the steal and the load before are on the record" \
  test -n "$(env_of "$f" noise_steal_pct)" -a -n "$(env_of "$f" noise_load1_before)"
o=$(k report "$t/hog" 2>&1)
check "the report marks it taken under noise" grep -qE "taken under noise .*#1 \\(others [0-9.]+ cores" <<<"$o"

# --- 2. the rule, on planted records --------------------------------------------------------------------------
python3 - "$f" "$t/planted/fixture_blobs" <<'PY'
import json, os, sys
tpl = json.load(open(sys.argv[1]))
os.makedirs(sys.argv[2], exist_ok=True)
for k, (others, steal, window) in enumerate([("0.10", "0.0", "2.0"), ("0.90", "0.0", "2.0"), ("0.10", "5.0", "2.0"),
                                               ("1.50", "0.0", "0.2")], start=1):
    r = json.loads(json.dumps(tpl))
    r["environment"].update(noise_other_cores=others, noise_steal_pct=steal, noise_window_s=window)
    r["repeat"] = {"index": k, "of": 4, "round": k, "position": 0, "order_seed": 1}
    json.dump(r, open(os.path.join(sys.argv[2], "fixture__cpu.rep%d.json" % k), "w"))
PY
o=$(k report "$t/planted" 2>&1)
line=$(grep "taken under noise" <<<"$o")
check "two of four marked: others 0.9 cores and steal 5 %: $line" has "$line" "2 taken under noise"
check "... #2 and #3" grep -qE "#2 \\(others 0.90 cores, steal 0.0 %\\) #3 \\(others 0.10 cores, steal 5.0 %\\)" <<<"$line"
check "... a quiet one and a window under a second are not" test -z "$(grep -E '#1 \\(others|#4 \\(others' <<<"$line")"
finish test_noise
