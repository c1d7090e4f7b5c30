#!/usr/bin/env bash
# tests/seeds/test_seeds_report.sh KHOST E2E_DIR SOURCE_DIR — `khost report`'s section on accuracy across seeds:
#   1. a planted set (planted.py: eight rows, seeds 7-9, known metrics per epoch): every figure of the section
#      exactly — mean, sd, Student t-interval, min–max, seeds (one that crashed), median and range of epochs and
#      time to target, "k of N seeds never reached the target", a record from before epochs to target, records
#      without a seed left out — and the convergence check marking a row faster and two rows slower than all the
#      others, in markdown and HTML (the page well-formed XML);
#   2. one seed per cell (and three repetitions of one seed) gets no section: the planted set's one-seed report
#      equals expected-one-seed.md, written by khost before the section existed (0f50ac4), byte for byte;
#   3. a real `matrix --seeds 3` on the fixture: the section's figures are those the records give (recomputed
#      here from their metric_value and epochs_to_target), and two backends computing the same thing agree.
set -u
bin=$1 e2e=$2 src=$3
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-seeds-report-XXXXXX")
trap 'rm -rf "$t"' EXIT
export KHOST_CONF=$e2e/khost-test.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
py=/usr/bin/python3
here=$src/tests/seeds

# --- 1. the planted set ---------------------------------------------------------------------------------------
"$py" "$here/planted.py" "$t/p"
md=$("$bin" report "$t/p" --html "$t/p.html" 2>&1); rc=$?
check "report of the planted set exits 0 ($rc): $md" test $rc -eq 0
while IFS= read -r line; do
  check "line: $line" has "$md" "$line"
done <<'LINES'
| alpha | cpu | 3 (7–9) | 0.9300 | 0.0361 | [0.8404, 1.0196] | 0.9000–0.9700 |
| beta | cpu | 3 (7–9) | 0.9300 | 0.0200 | [0.8803, 0.9797] | 0.9100–0.9500 |
| fast | cpu | 3 (7–9) | 0.9600 | 0.0100 | [0.9352, 0.9848] | 0.9500–0.9700 |
| flaky | cpu | 2 of 3 (7–9; 1 did not finish) | 0.9050 | 0.0354 | [0.5873, 1.2227] | 0.8800–0.9300 |
| oldie | cpu | 3 (7–9) | 0.9000 | 0.0000 | [0.9000, 0.9000] | 0.9000–0.9000 |
| refnet (reference) | cpu | 3 (7–9) | 0.9433 | 0.0058 | [0.9290, 0.9577] | 0.9400–0.9500 |
| slow | cpu | 3 (7–9) | 0.9133 | 0.0208 | [0.8616, 0.9650] | 0.8900–0.9300 |
Epochs and time to target (val_acc ≥ 0.9; median over the seeds
| alpha | cpu | 4 (3–5) | 8.0 (6.0–10.0) |  |
| beta | cpu | 4 (3–4) | 8.0 (6.0–8.0) |  |
| fast | cpu | 2 (1–2) ⚠ faster than all others | 4.0 (2.0–4.0) |  |
| flaky | cpu | never (3) ⚠ slower than all others | never (6.0) | 1 of 2 seeds never reached the target (val_acc ≥ 0.9) |
| oldie | cpu | — | — | 3 seeds without epochs to target (no target, or a record from before them) |
| refnet (reference) | cpu | 4 (4–5) | 8.0 (8.0–10.0) |  |
| slow | cpu | 10 (9–10) ⚠ slower than all others | 20.0 (18.0–20.0) | 1 of 3 seeds never reached the target (val_acc ≥ 0.9) |
- ⚠ fast on cpu reached the target in a median of 2 epochs on seeds 7–9, below 3–10, the epochs every other backend and reference row on cpu took on those seeds where they reached it: it converges faster than all of them.
- ⚠ flaky on cpu did not reach the target on at least half of seeds 7–8 (its median is never), above 1–10,
- ⚠ slow on cpu reached the target in a median of 10 epochs on seeds 7–9, above 1–5,
A run outside the range of the others (MLPerf's convergence check) trains something else
LINES
check "exactly three rows marked" test "$(grep -c '⚠ [sf][a-z]* than all others' <<<"$md")" -eq 3
check "records without a seed: a row of the tables, none of the section" \
  test "$(grep -c '^| unseeded |' <<<"$md")" -eq 2 -a "$(grep -c '^| unseeded | cpu |' <<<"$md")" -eq 0
check "the interval is named as a t-interval over seeds" has "$md" "95 % CI = Student t-interval over the seeds, mean ± t(0.975, n − 1) sd / √n"
html=$(cat "$t/p.html" 2>/dev/null)
check "the page is well-formed XML" "$py" -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$t/p.html"
check "page: alpha's spread" has "$html" "<td>3 (7–9)</td><td>0.9300</td><td>0.0361</td><td>[0.8404, 1.0196]</td><td>0.9000–0.9700</td>"
check "page: fast marked" has "$html" '<td class="conv">2 (1–2) ⚠ faster than all others</td>'
check "page: slow marked" has "$html" '<td class="conv">10 (9–10) ⚠ slower than all others</td>'
check "page: never reached" has "$html" '<td class="l">1 of 3 seeds never reached the target (val_acc ≥ 0.9)</td>'
check "page: three sentences" test "$(grep -o '<p class="conv">⚠' <<<"$html" | wc -l)" -eq 3

# --- 2. one seed per cell: as before --------------------------------------------------------------------------
"$py" "$here/planted.py" "$t/one" --one-seed
"$bin" report "$t/one" >"$t/one.md" 2>&1
check "one seed per cell: the report is expected-one-seed.md byte for byte" cmp "$t/one.md" "$here/expected-one-seed.md"
"$py" "$here/planted.py" "$t/same" --same-seed
o=$("$bin" report "$t/same" 2>&1)
check "three repetitions of one seed: no section" test -n "$o" -a -z "$(grep 'across seeds\|to target' <<<"$o")"

# --- 3. a real matrix --seeds 3 -------------------------------------------------------------------------------
o=$(KHOST_FIXTURE_TARGET=0.5 timeout 120 "$bin" matrix --plugins fixture,fixture_codegen --tasks fixture_blobs \
    --devices cpu --epochs 5 --limit-train 256 --steps 2 --seeds 3 --seed 11 --out "$t/r" 2>&1); rc=$?
check "matrix --seeds 3 ($rc): $o" test $rc -eq 0
md=$("$bin" report "$t/r" 2>&1)
want=$("$py" - "$t/r" <<'PY'
import json, math, sys
T = 4.302652729749464  # Student t, 0.975, 2 degrees of freedom
for p in ("fixture", "fixture_codegen"):
    rs = [json.load(open("%s/fixture_blobs/%s__cpu.rep%d.json" % (sys.argv[1], p, k))) for k in (1, 2, 3)]
    m = [r["metric_value"] for r in rs]
    mean = sum(m) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in m) / 2)
    h = T * sd / math.sqrt(3)
    print("| %s | cpu | 3 (11–13) | %.4f | %.4f | [%.4f, %.4f] | %.4f–%.4f |" % (p, mean, sd, mean - h, mean + h, min(m), max(m)))
    e = sorted(r["epochs_to_target"] or math.inf for r in rs)
    reached = [v for v in e if v != math.inf]
    med = "never" if e[1] == math.inf else "%g" % e[1]
    rng = "" if not reached else " (%g)" % reached[0] if reached[0] == reached[-1] else " (%g–%g)" % (reached[0], reached[-1])
    never = len(e) - len(reached)
    tail = "%d of 3 seeds never reached the target (val_acc ≥ 0.5) |" % never if never else " |"
    print("| %s | cpu | %s%s | " % (p, med, rng) + "@" + tail)
PY
)
while IFS= read -r line; do
  if [[ $line == *"@"* ]]; then
    head=${line%%@*} tail=${line#*@}
    got=$(grep -F -- "$head" <<<"$md" | head -1)
    ends() { [[ -n $1 && $1 == *"$2" ]]; }
    check "epochs to target as the records say: '$head ... $tail', got '$got'" ends "$got" "$tail"
  else
    check "spread as the records say: $line" has "$md" "$line"
  fi
done <<<"$want"
check "the fixture twins agree: nothing marked" test -z "$(grep '⚠ [sf][a-z]* than all others' <<<"$md")"
finish test_seeds_report
