#!/usr/bin/env bash
# tests/repeat_auto/test_repeat_auto.sh KHOST E2E_DIR — matrix --repeat auto[:PCT%[:BUDGET]]:
#   1. a quiet cell (the fixture spinning a fixed 2 ms per step) stops on precision (after the 3 rounds it must
#      take, or a few more when other work disturbs a repetition), long before its budget, and says so;
#   2. a noisy cell (each repetition draws its spin from 2 to 3.2 ms: KHOST_FIXTURE_STEP_JITTER_PCT) asked for
#      1 % within 1 s stops on the budget, before the 30 rounds at most, and says so;
#   3. malformed values are refused (exit 2).
set -u
bin=$1 e2e=$2
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-auto-XXXXXX")
trap 'rm -rf "$t"' EXIT
export KHOST_CONF=$e2e/khost-test.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
k() { timeout 200 "$bin" "$@"; }
m=(matrix --plugins fixture --tasks fixture_blobs --devices cpu --epochs 1 --steps 10)
reps() { ls "$1"/fixture_blobs/fixture__cpu.rep*.json 2>/dev/null | wc -l; }

# (usually 3 rounds; on a machine busy with other tests a disturbed repetition can take it a few more)
o=$(KHOST_FIXTURE_STEP_US=2000 k "${m[@]}" --repeat auto:10%:120s --out "$t/quiet" 2>&1); rc=$?
n=$(reps "$t/quiet")
check "quiet: exit 0 ($rc)" test $rc -eq 0
check "... stopped on precision after $n round(s), at least the 3 it must take: $(grep precise <<<"$o" | head -n 1)" \
  grep -qE "fixture x fixture_blobs x cpu: precise after $n round\\(s\\): median [0-9.]+ ms, 95 % CI within ±[0-9.]+ % \\(target 10 %\\)" <<<"$o"
check "... the run says every cell is known, before its budget and the most rounds" \
  test -n "$(grep -F "every cell precise after $n round(s)" <<<"$o")" -a "$n" -ge 3 -a "$n" -lt 30

o=$(KHOST_FIXTURE_STEP_US=2000 KHOST_FIXTURE_STEP_JITTER_PCT=60 k "${m[@]}" --repeat auto:1%:1s --out "$t/noisy" 2>&1); rc=$?
n=$(reps "$t/noisy")
check "noisy: exit 0 ($rc)" test $rc -eq 0
check "... stopped on the budget: $(grep 'budget' <<<"$o")" \
  grep -qE "fixture x fixture_blobs x cpu: the time budget is spent after $n round\\(s\\): its median is not yet known to 1 %" <<<"$o"
check "... after at least 3 and fewer than 30 rounds ($n)" test "$n" -ge 3 -a "$n" -lt 30

for bad in auto:0% auto:3%:x auto:abc auto:3%:20m:5 autox; do
  o=$(k "${m[@]}" --repeat "$bad" --out "$t/bad" 2>&1); rc=$?
  check "--repeat $bad refused with exit 2 ($rc)" test $rc -eq 2
done
check "... having run nothing" test ! -e "$t/bad/fixture_blobs"
finish test_repeat_auto
