#!/usr/bin/env bash
# repeat_report.sh KHOST — the steady-state comparison on real data, as a user runs it: cntk and tensorflow on
# mnist_mlp and mnist_cnn, `matrix --repeat 3 --steps 20`, then `khost report`. Every time cell must carry
# its bootstrap interval, every non-fastest backend's factor must carry one too, and "≈" must stand exactly
# where the factor's interval contains 1; each cell's .stats.json must exist. Skipped (77) without the data.
set -uo pipefail
khost=$1 data=${KHOST_DATA:-}
[ -n "$data" ] && [ -d "$data/mnist" ] || { echo "SKIPPED: MNIST not installed in KHOST_DATA='$data'"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-repeat-XXXXXX"); trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
fail=0
"$khost" matrix --plugins cntk,tensorflow --tasks mnist_mlp,mnist_cnn --devices cpu --epochs 1 --steps 20 \
  --warmup-steps 3 --limit-val 256 --repeat 3 --order-seed 5 --timeout 600 --quiet --out "$tmp" >"$tmp/matrix.txt" 2>&1 ||
  { echo "FAIL: matrix: $(cat "$tmp/matrix.txt")"; exit 1; }
for t in mnist_mlp mnist_cnn; do
  for p in cntk tensorflow; do
    for k in 1 2 3; do
      grep -q '"status":[[:space:]]*"ok"' "$tmp/$t/${p}__cpu.rep$k.json" 2>/dev/null || { echo "FAIL: $t $p rep $k not ok"; fail=1; }
    done
    [ -s "$tmp/$t/${p}__cpu.stats.json" ] || { echo "FAIL: $t $p: no .stats.json"; fail=1; }
  done
done
"$khost" report "$tmp" >"$tmp/report.md" 2>&1 || { echo "FAIL: report: $(cat "$tmp/report.md")"; exit 1; }
# The rows of the two time tables (per epoch, per step): "| backend | median [lo, hi] (factor ...) |".
python3 - "$tmp/report.md" <<'PY' || fail=1
import re, sys
rows, in_time = [], False
for l in open(sys.argv[1]):
    if l.startswith('Time per epoch') or l.startswith('Time per step'): in_time = True
    elif l.strip() and not l.startswith('|'): in_time = False
    if in_time and re.match(r'^\| (cntk|tensorflow) \| ', l): rows.append(l)
bad, n_factor, n_approx = [], 0, 0
for l in rows:
    cell = l.split('|')[2]
    if not re.search(r'[0-9.]+ \[[0-9.]+, [0-9.]+\]', cell):
        bad.append('no interval: ' + l.strip()); continue
    m = re.search(r'\(([0-9.]+)x(?: \[([0-9.]+), ([0-9.]+)\])?( ≈)?\)', cell)
    if not m:
        bad.append('no factor: ' + l.strip()); continue
    if m.group(1) == '1.0' and not m.group(2): continue  # the fastest
    n_factor += 1
    lo, hi, approx = float(m.group(2)), float(m.group(3)), bool(m.group(4))
    n_approx += approx
    # the interval as printed is rounded: "≈" needs lo <= 1 <= hi; its absence needs the interval on one side
    # of 1 up to that rounding (a printed bound of exactly 1.0 may be 1.02)
    if approx and not (lo <= 1.0 <= hi): bad.append('≈ beside an interval without 1: ' + l.strip())
    if not approx and not (lo >= 1.0 or hi <= 1.0): bad.append('no ≈ beside an interval with 1: ' + l.strip())
if len(rows) != 8: bad.append('%d time rows, expected 8 (2 tasks x 2 backends x 2 tables)' % len(rows))
if n_factor != 4: bad.append('%d factors with intervals, expected 4' % n_factor)
print('\n'.join('FAIL: ' + b for b in bad) or 'time rows: %d, factors: %d, of which not significant: %d' % (len(rows), n_factor, n_approx))
sys.exit(1 if bad else 0)
PY
# the charts draw the same median with its interval: one whisker per repeated cell (4 cells) in the page's
# time charts, and in the SVG
"$khost" report "$tmp" --html "$tmp/r.html" --svg "$tmp/r.svg" >/dev/null 2>&1 || { echo "FAIL: report --html --svg"; fail=1; }
[ "$(grep -o '<line class="ci"' "$tmp/r.html" | wc -l)" -eq 4 ] || { echo "FAIL: CI whiskers in the HTML time charts: $(grep -o '<line class="ci"' "$tmp/r.html" | wc -l)"; fail=1; }
[ "$(grep -c '^<path d="M[0-9.]* [0-9.]*V' "$tmp/r.svg")" -eq 4 ] || { echo "FAIL: CI whiskers in the SVG: $(grep -c '^<path d="M' "$tmp/r.svg")"; fail=1; }
[ $fail -eq 0 ] && echo "repeat_report: passed" || { echo "repeat_report: FAILED"; cat "$tmp/report.md" | head -60; }
exit $fail
