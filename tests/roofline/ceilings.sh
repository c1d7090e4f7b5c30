#!/usr/bin/env bash
# tests/roofline/ceilings.sh KHOST — the ceilings the roofline holds cells to are themselves plausible, so that
# no bound can be met by inflating one: `khost peak --measure --json` on this machine gives every memory level
# a bandwidth no higher than the next-faster level's, DRAM last, within what one thread per CPU can draw from
# memory (1 to 64 GB/s per thread), measured over arrays at least four times the last-level cache each;
# each cache level's buffer fits the level; the cache serves the figures again and --measure replaces them (a
# calibration taken while the machine was busy is cached marked "busy", for ten minutes).
set -u
bin=$1
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-ceilings-XXXXXX")
trap 'rm -rf "$t"' EXIT
export XDG_CACHE_HOME=$t/cache
j=$(timeout 120 "$bin" peak --measure --json); rc=$?
check "peak --measure --json exits 0 (got $rc)" test $rc -eq 0
threads=$(nproc)
check_levels() {
  printf '%s' "$1" >"$t/peak.json"
  python3 - "$threads" "$t/peak.json" <<'PY'
import json, sys
threads = int(sys.argv[1])
p = json.load(open(sys.argv[2]))
lv = p["levels"]
bad = []
if p["sgemm_gflops"] <= 0 or p["fma_gflops"] <= 0: bad.append("no sgemm or FMA figure")
if p["gflops"] != max(p["sgemm_gflops"], p["fma_gflops"]): bad.append("the compute ceiling is not the higher figure")
# FMA chains run no memory traffic: an sgemm far above them means the FMA kernel ran narrow or was cut short
if p["sgemm_gflops"] > 1.25 * p["fma_gflops"]: bad.append(f'sgemm {p["sgemm_gflops"]:.0f} far above the FMA chains {p["fma_gflops"]:.0f}')
if not lv or lv[-1]["level"] != "DRAM": bad.append("DRAM is not the last level")
for a, b in zip(lv, lv[1:]):
    if b["gbps"] > a["gbps"]: bad.append(f'{b["level"]} {b["gbps"]:.1f} GB/s above {a["level"]} {a["gbps"]:.1f}')
caches = [l for l in lv if l["level"] != "DRAM"]
for l in caches:
    if not (0 < l["buffer_bytes"] <= l["bytes"]): bad.append(f'{l["level"]} measured over {l["buffer_bytes"]} bytes, capacity {l["bytes"]}')
    if l["gbps"] > 1536 * threads: bad.append(f'{l["level"]} {l["gbps"]:.0f} GB/s: above 256 B/cycle at 6 GHz per thread')
d = lv[-1]
if not (1 <= d["gbps"] <= 64 * threads): bad.append(f'DRAM {d["gbps"]:.1f} GB/s outside 1 to {64 * threads} ({threads} threads)')
if caches and d["buffer_bytes"] / 3 < 4 * caches[-1]["bytes"]:
    bad.append(f'DRAM arrays of {d["buffer_bytes"] / 3:.0f} bytes: under 4 x the {caches[-1]["level"]} ({caches[-1]["bytes"]:.0f})')
for l in lv:
    if l["kernel"] not in ("copy", "triad", "update", "read"): bad.append(f'{l["level"]}: kernel {l["kernel"]}')
print("; ".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PY
}
out=$(check_levels "$j")
check "the ceilings are ordered and plausible: $out" test "$out" = ok
echo "$j" | python3 -c 'import json,sys; p=json.load(sys.stdin); print("ceilings:", p["gflops"], "GFLOP/s;", ", ".join("%s %.1f GB/s (%s)" % (l["level"], l["gbps"], l["kernel"]) for l in p["levels"]))'
cache=$t/cache/khost/peak-cpu-levels.txt
if has "$j" "taken beside other work"; then
  # the machine was busy through both attempts: the figures are kept for ten minutes only, marked
  check "a calibration taken beside other work is cached marked busy" test "$(tail -1 "$cache" | cut -f6)" = busy
  check "... and says how busy the machine was" has "$j" "cores busy"
else
  check "the calibration is cached" test -s "$cache"
  j2=$(timeout 60 "$bin" peak --json)
  figures() { python3 -c 'import json,sys; p=json.loads(sys.argv[1]); print(p["gflops"], p["sgemm_gflops"], p["fma_gflops"], [(l["level"], l["bytes"], l["buffer_bytes"], l["gbps"], l["kernel"]) for l in p["levels"]])' "$1"; }
  check "a second call serves the cached figures" test "$(figures "$j2")" = "$(figures "$j")"
  timeout 120 "$bin" peak --measure --json >"$t/again.json"
  has "$(cat "$t/again.json")" "taken beside other work" && want=1 || want=2
  check "--measure measures again (line $want of the cache)" test "$(wc -l <"$cache")" -eq $want
fi
# a cache line that does not parse is measured again, not believed
key=$(cut -f1 "$cache" 2>/dev/null | head -1)
mkdir -p "$(dirname "$cache")" && printf 'garbage\n%s\t1e9\t1e9\tL1:1:1:1e6:copy\t2026\n' "${key:-x}" >"$cache"
j3=$(timeout 120 "$bin" peak --json)
out=$(check_levels "$j3")
check "a cache line without DRAM is not believed: $out" test "$out" = ok
finish ceilings
