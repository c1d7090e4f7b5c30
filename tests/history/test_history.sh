#!/usr/bin/env bash
# tests/history/test_history.sh KHOST E2E_DIR — khost history over a results database: 30 revisions of one cell on
# machine X with a planted +20 % step at revision 16, the same cell on machine Y (same CPU model, another ISA)
# flat, and another cell flat on X, each revision a set of 3 repetitions (records made from a fixture run's
# record). The step is found where it was planted, with a CI that excludes no change; the flat series have no
# change point; the two machines are two series; --fail-above gates on the regression's size. Then a matrix
# with --db: its remaining time uses the database's wall times of this machine, and a cell whose step time is
# outside its history on this machine is said to be. --confirm runs a change's two builds side by side: a build
# with a planted slowdown (the fixture's KHOST_FIXTURE_STEP_US) confirms the change, the same build refutes it.
set -u
bin=$1 e2e=$2
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-history-XXXXXX")
trap 'rm -rf "$t"' EXIT
export TMPDIR=$t # where --confirm keeps its side-by-side records
export KHOST_CONF=$e2e/khost-test.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
k() { timeout 120 "$bin" "$@"; }
k run --plugin fixture --task fixture_blobs --device cpu --epochs 1 --steps 4 --out "$t/seed" >/dev/null 2>&1
tpl=$t/seed/fixture_blobs/fixture__cpu.json
check "a template record" test -s "$tpl"
python3 - "$tpl" "$t/sets" <<'PY'
import json, os, random, sys
tpl = json.load(open(sys.argv[1]))
rng = random.Random(7)
def write(folder, task, rep, isa, rev, when, level):
    r = json.loads(json.dumps(tpl))
    r["task"] = task
    r["environment"].update(git_rev=rev, finished_at=when, cpu_model="Test CPU", cpu_isa=isa, device_name="Test CPU")
    r["samples"]["step_s"] = [level * (1 + rng.gauss(0, 0.01)) for _ in range(8)]
    r["repeat"] = {"index": rep, "of": 3, "round": rep, "position": 0, "order_seed": 1}
    d = os.path.join(folder, task)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "fixture__cpu.rep%d.json" % rep), "w") as f:
        json.dump(r, f, indent=1)
evil = "Evil <script>document.body.setAttribute('data-pwned', 1)</script> CPU"
for rep in (1, 2, 3):  # a machine whose name is markup: a series of its own, shown as text
    r = json.loads(json.dumps(tpl))
    r["task"] = "fixture_conv"
    r["environment"].update(git_rev="rev00", finished_at="2026-10-01T10:00:00Z", cpu_model=evil, cpu_isa="x", device_name=evil)
    r["repeat"] = {"index": rep, "of": 3, "round": rep, "position": 0, "order_seed": 1}
    os.makedirs(os.path.join(sys.argv[2], "evil", "fixture_conv"), exist_ok=True)
    json.dump(r, open(os.path.join(sys.argv[2], "evil", "fixture_conv", "fixture__cpu.rep%d.json" % rep), "w"))
for i in range(30):
    rev, when = "rev%02d" % i, "2026-11-%02dT10:00:00Z" % (i + 1)
    for rep in (1, 2, 3):
        write(os.path.join(sys.argv[2], "x-" + rev), "fixture_blobs", rep, "avx512", rev, when, 0.010 * (1.2 if i >= 15 else 1))
        write(os.path.join(sys.argv[2], "x-" + rev), "fixture_conv", rep, "avx512", rev, when, 0.030)
        write(os.path.join(sys.argv[2], "y-" + rev), "fixture_blobs", rep, "avx2", rev, when, 0.014)
PY
o=$(k db import "$t/h.db" "$t"/sets/* 2>&1); rc=$?
check "61 sets imported ($rc)" test $rc -eq 0 -a "$(k db list "$t/h.db" | wc -l)" -eq 61
o=$(k history "$t/h.db" --html "$t/history.html" 2>&1); rc=$?
echo "$o" | grep -E '^(## |machine|levels|change|no change)'
check "history: exit 0 without --fail-above ($rc)" test $rc -eq 0
check "four series: one cell on two machines never mixed, another cell, a machine with markup in its name" \
  has "$o" "4 series from 273 repetition record(s)"
x=$(awk '/^## fixture_blobs/{s=""} {s=s $0 "\n"} /^(no change point|change after)/{if (s ~ /avx512/) print s}' <<<"$o")
y=$(awk '/^## fixture_blobs/{s=""} {s=s $0 "\n"} /^(no change point|change after)/{if (s ~ /avx2/) print s}' <<<"$o")
check "machine X: the planted step found after revision 15 (rev14 → rev15), slower, a regression" \
  has "$x" "change after revision 15 (rev14 → rev15): +"
check "... named a regression" has "$x" "slower: a regression"
pct=$(grep -o 'change after revision 15 (rev14 → rev15): +[0-9.]*' <<<"$x" | grep -o "[0-9.]*$" | head -n 1)
check "... its size near +20 % ($pct)" python3 -c "import sys; assert 18 <= float(sys.argv[1]) <= 22" "$pct"
check "... two levels" has "$x" "levels: revisions 1–15"
check "machine Y (same CPU model, another ISA): its own series, no change point" has "$y" "no change point"
check "the flat cell: no change point" has "$(awk '/^## fixture_conv/,0' <<<"$o")" "no change point"

# --- the page ----------------------------------------------------------------------------------------------------
p=$t/history.html
check "--html wrote the page" test -s "$p"
check "... a section per series" test "$(grep -c '<section class="series"' "$p")" -eq 4
check "... the planted series has its change, marked" grep -q 'data-changes="1"' "$p"
check "... a point links to its revision's row, which names the revision's records" \
  grep -q 'href="#s[0-9]-r16"' "$p"
check "... the markup in a machine's name is text" grep -q 'Evil &lt;script&gt;' "$p"
k report "$t/h.db" --html "$t/report.html" >/dev/null 2>&1
check "report of the database: its page ends with the history, a chart per series" \
  test "$(grep -c '<section class="series"' "$t/report.html")" -eq 4 -a -n "$(grep -F '<h2>History</h2>' "$t/report.html")"
k report "$t/sets/x-rev00" --html "$t/report-folder.html" >/dev/null 2>&1
check "report of a folder: no history section" test -s "$t/report-folder.html" -a -z "$(grep -F '<h2>History</h2>' "$t/report-folder.html")"
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$chromium" ]; then
  HOME=$t/chromium-home timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --disable-extensions --virtual-time-budget=3000 --dump-dom "file://$t/report.html" \
    >"$t/report.dom" 2>"$t/chromium-report.log"
  check "chromium opens the report's page with its history: $(tail -n 2 "$t/chromium-report.log")" \
    test "$(grep -o '<svg class="history"' "$t/report.dom" | wc -l)" -eq 4
  check "... no script from a record ran there either" test -z "$(grep -o 'data-pwned="' "$t/report.dom")"
  dom=$t/history.dom
  HOME=$t/chromium-home timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --disable-extensions --virtual-time-budget=3000 --dump-dom "file://$p" >"$dom" 2>"$t/chromium.log"
  check "chromium opens the page: $(tail -n 2 "$t/chromium.log")" test -s "$dom"
  check "... four charts" test "$(grep -o '<svg' "$dom" | wc -l)" -eq 4
  check "... 30 points in the planted series' chart" \
    test "$(awk '/data-changes="1"/,/<\/svg>/' "$dom" | grep -o '<circle' | wc -l)" -eq 30
  check "... the row a point links to exists" grep -q "id=\"$(grep -o 's[0-9]-r16' "$p" | head -n 1)\"" "$dom"
  check "... no script from a record ran" test -z "$(grep -o 'data-pwned="' "$dom")"
else
  echo "test_history: chromium not installed: the page was checked as text only"
fi
o=$(k history "$t/h.db" --fail-above 10 2>&1); rc=$?
check "--fail-above 10: exit 1 ($rc)" test $rc -eq 1 -a -n "$(grep -F '1 regression(s) above 10 %' <<<"$o")"
o=$(k history "$t/h.db" --fail-above 30 2>&1); rc=$?
check "--fail-above 30: exit 0 ($rc)" test $rc -eq 0
o=$(k history "$t/h.db:machine=avx2" 2>&1)
check "a machine filter: one series" has "$o" "1 series from 90 repetition record(s)"
o=$(k history "$t/sets" 2>&1); rc=$?
check "a folder is not a database: exit 8 ($rc)" test $rc -eq 8

# --- --git: revisions in commit order, not in the order they were measured ---------------------------------------
git init -q "$t/repo" && for i in 1 2 3; do
  git -C "$t/repo" -c user.name=t -c user.email=t commit -q --allow-empty -m "c$i"
done
revs=($(git -C "$t/repo" rev-list --reverse HEAD))
python3 - "$tpl" "$t/gitsets" "${revs[2]}" "${revs[0]}" "${revs[1]}" <<'PY'
import json, os, sys
tpl = json.load(open(sys.argv[1]))
for day, rev in enumerate(sys.argv[3:]):  # measured newest commit first
    r = json.loads(json.dumps(tpl))
    r["environment"].update(git_rev=rev[:12], finished_at="2026-09-0%dT10:00:00Z" % (day + 1))
    d = os.path.join(sys.argv[2], rev[:7], "fixture_blobs")
    os.makedirs(d, exist_ok=True)
    json.dump(r, open(os.path.join(d, "fixture__cpu.json"), "w"))
PY
k db import "$t/git.db" "$t"/gitsets/* >/dev/null 2>&1
order() { grep -E '^\| [0-9]+ \|' <<<"$1" | cut -d'|' -f3 | tr -d ' ' | tr '\n' ' '; }
o=$(k history "$t/git.db" 2>&1)
check "without --git: the order measured" test "$(order "$o")" = "${revs[2]:0:7} ${revs[0]:0:7} ${revs[1]:0:7} "
o=$(k history "$t/git.db" --git "$t/repo" 2>&1)
check "with --git: commit order" test "$(order "$o")" = "${revs[0]:0:7} ${revs[1]:0:7} ${revs[2]:0:7} "
check "... and it says so" has "$o" "revisions in commit order (--git)"
o=$(k history "$t/git.db" --git "$t/nowhere" 2>&1); rc=$?
check "--git on a folder that is no repository: exit 8 ($rc)" test $rc -eq 8

# --- --confirm: the two builds of a change run side by side ----------------------------------------------------
# builds are khosts: here the same binary, one with a planted slowdown (the fixture spins 50 % longer per step)
for b in base:300 same:300 slow:450; do
  mkdir -p "$t/build-${b%%:*}"
  printf '#!/bin/sh\nKHOST_FIXTURE_STEP_US=%s exec "%s" "$@"\n' "${b#*:}" "$bin" >"$t/build-${b%%:*}/khost"
  chmod +x "$t/build-${b%%:*}/khost"
done
python3 - "$tpl" "$t/cf" <<'PY'
import json, os, random, sys
tpl = json.load(open(sys.argv[1]))  # this machine's record, so its history is this machine's
rng = random.Random(3)
for i in range(10):
    rev = "a0000%02d" % (i + 1)
    for rep in (1, 2, 3):
        r = json.loads(json.dumps(tpl))
        r["environment"].update(git_rev=rev, finished_at="2026-11-%02dT10:00:00Z" % (i + 1))
        r["samples"]["step_s"] = [(0.0010 if i < 5 else 0.0015) * (1 + rng.gauss(0, 0.01)) for _ in range(8)]
        r["repeat"] = {"index": rep, "of": 3, "round": rep, "position": 0, "order_seed": 1}
        d = os.path.join(sys.argv[2], rev, "fixture_blobs")
        os.makedirs(d, exist_ok=True)
        json.dump(r, open(os.path.join(d, "fixture__cpu.rep%d.json" % rep), "w"))
PY
k db import "$t/cf.db" "$t"/cf/* >/dev/null 2>&1
# the same build: "unchanged" within the ±2 % band when the machine is quiet enough to tell, else too noisy
# for the band but with an interval far short of the +50 % step: refuted either way, never confirmed
for w in "slow:confirmed: a000006 against a000005 side by side, 7 rounds: +" "same:refuted ("; do
  o=$(k history "$t/cf.db" --confirm --build a000005="$t/build-base/khost" --build a000006="$t/build-${w%%:*}/khost" \
    --confirm-rounds 7 --confirm-steps 20 2>&1); rc=$?
  echo "$o" | grep -E '^change|confirm:'
  check "--confirm against the ${w%%:*} build ($rc): ${w#*:}" has "$o" "confirm: ${w#*:}"
done
o=$(k history "$t/cf.db" --confirm --build a000005="$t/build-base/khost" 2>&1)
check "--confirm without the other revision's build says so" has "$o" "not confirmed: no --build for a000006"

# --- the matrix with a database: its remaining time from this machine's history, and a cell outside it ---------
python3 - "$tpl" "$t/past" <<'PY'
import json, os, sys
tpl = json.load(open(sys.argv[1]))  # a record of this machine: its CPU model, ISA and device
for i in range(4):
    r = json.loads(json.dumps(tpl))
    r["environment"].update(git_rev="past%d" % i, started_at="2026-11-0%dT10:00:00Z" % (i + 1),
                            finished_at="2026-11-0%dT10:10:00Z" % (i + 1))
    r["samples"]["step_s"] = [1.0 + 0.01 * i] * 8  # a second per step: far above what the fixture takes
    d = os.path.join(sys.argv[2] + str(i), "fixture_blobs")
    os.makedirs(d, exist_ok=True)
    json.dump(r, open(os.path.join(d, "fixture__cpu.json"), "w"), indent=1)
PY
k db import "$t/m.db" "$t"/past? >/dev/null 2>&1
o=$(k matrix --plugins fixture --tasks fixture_blobs,fixture_conv --devices cpu --epochs 1 --steps 4 --out "$t/now" \
  --db "$t/m.db" --order-seed 1 --repeat 2 2>&1); rc=$?
echo "$o" | grep '^matrix: about\|outside'
check "matrix --db ran ($rc)" test $rc -eq 0
check "its remaining time counts the database's 10 minutes for each run of the cell not yet run here" \
  grep -qE '^matrix: about (10|20) min left \(. cell\(s\): [0-9] timed earlier in this run, [12] from the database' <<<"$o"
check "a cell far from its history on this machine is said to be outside it" \
  has "$o" "fixture x fixture_blobs x cpu: "
check "... with the range it left" grep -qE "is outside this machine's last 4 runs of it \(1000 to 1030 ms\)" <<<"$o"
finish test_history
