#!/usr/bin/env bash
# tests/roofline/bound.sh KHOST — no bundled task beats its roofline on the machine that runs it: every backend
# on every task (a short matrix on real data, the ceilings measured here in a fresh cache) records a
# roofline_fraction at most 1.0, names the memory level its training step's working set lives in and the
# ceiling it was held to. A fraction above 1 means the compulsory bytes or FLOPs overstate the work, or a
# ceiling understates the machine. Skipped (77) when the data sets are not installed.
set -u
bin=$1 data=${KHOST_DATA:-}
. "$(dirname "$0")/../checks.sh"
if [ -z "$data" ] || [ ! -d "$data/mnist" ] || [ ! -d "$data/imdb" ] || [ ! -d "$data/nietzsche" ] || [ ! -d "$data/cifar10" ]; then
  echo "SKIPPED: data sets not installed in KHOST_DATA='$data' (tools/fetch-datasets)"; exit 77
fi
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-bound-XXXXXX")
trap 'rm -rf "$t"' EXIT
export XDG_CACHE_HOME=$t/cache
timeout 1500 "$bin" matrix --plugins cntk,tensorflow,theano --tasks all --devices cpu --steps 10 --warmup-steps 2 \
  --limit-train 4096 --limit-val 512 --timeout 600 --out "$t/set" --quiet >"$t/log" 2>&1; rc=$?
check "matrix exits 0 (got $rc; $(tail -1 "$t/log"))" test $rc -eq 0
res=$(python3 - "$t/set" <<'PY'
import glob, json, sys
rows, bad = [], []
for f in sorted(glob.glob(sys.argv[1] + "/*/*__cpu.json")):
    r = json.load(open(f))
    frac, rl = r.get("roofline_fraction"), r.get("roofline") or {}
    rows.append("%s %s %s %s %.1f GB/s" % (r["task"], r["plugin"], "%.3f" % frac if frac is not None else "none",
                                          rl.get("level"), rl.get("gbps") or 0))
    if r["status"] != "ok": bad.append("%s %s: %s" % (r["task"], r["plugin"], r["status"]))
    elif frac is None or not rl.get("level") or not rl.get("gbps"): bad.append("%s %s: no fraction or level" % (r["task"], r["plugin"]))
    elif frac > 1.0: bad.append("%s %s at %.3f of its %s roofline" % (r["task"], r["plugin"], frac, rl["level"]))
print("\n".join(rows), file=sys.stderr)
print("%d %s" % (len(rows), "; ".join(bad) if bad else "ok"))
PY
)
n=${res%% *} verdict=${res#* }
check "every backend x task record was written (got $n of 18)" test "$n" -eq 18
check "no fraction above 1.0, each names its level and ceiling: $verdict" test "$verdict" = ok
finish roofline_bound
