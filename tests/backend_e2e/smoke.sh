#!/usr/bin/env bash
# smoke.sh KHOST PLUGIN — end-to-end smoke run of all six tasks on PLUGIN/cpu on a small slice of real data,
# through khost matrix (child process per cell), then the report. Skipped (77) when the data sets are not
# installed.
set -uo pipefail
khost=$1 plugin=$2 data=${KHOST_DATA:-}
if [ -z "$data" ] || [ ! -d "$data/mnist" ] || [ ! -d "$data/imdb" ] || [ ! -d "$data/nietzsche" ] || [ ! -d "$data/cifar10" ]; then
  echo "SKIPPED: data sets not installed in KHOST_DATA='$data' (tools/fetch-datasets)"; exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-smoke-XXXXXX"); trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache" # generated code (theano) compiles cold into a cache of this run's own
"$khost" matrix --plugins "$plugin" --tasks all --devices cpu --epochs 1 --limit-train 256 --limit-val 128 \
  --timeout 600 --out "$tmp" 2>&1; rc=$?
[ $rc -eq 0 ] || { echo "FAIL: matrix exit $rc"; exit 1; }
fail=0
for t in mnist_mlp mnist_cnn cifar10_cnn imdb_bidirectional_lstm imdb_fasttext lstm_text_generation; do
  f="$tmp/$t/${plugin}__cpu.json"
  grep -q '"status":[[:space:]]*"ok"' "$f" 2>/dev/null || { echo "FAIL: $t: $(grep -o '"reason":[^,]*' "$f" 2>/dev/null)"; fail=1; }
  # a real epoch happened: a finite loss was recorded
  grep -q '"loss":[[:space:]]*[0-9]' "$f" 2>/dev/null || { echo "FAIL: $t: no loss recorded"; fail=1; }
  # the model-compile time, measured by the host for every backend
  grep -q '"compile_s":[[:space:]]*[0-9]' "$f" 2>/dev/null || { echo "FAIL: $t: no compile_s recorded"; fail=1; }
  # generated code (theano, run with a cache of its own): the first compile misses, the second hits
  if [ "$plugin" = theano ]; then
    grep -q '"compile_cache":[[:space:]]*"miss"' "$f" || { echo "FAIL: $t: the cold compile was not a cache miss"; fail=1; }
    grep -q '"compile_warm_s":[[:space:]]*[0-9]' "$f" || { echo "FAIL: $t: no warm compile time"; fail=1; }
  fi
done
"$khost" report "$tmp" > "$tmp/report.md" || { echo "FAIL: report"; fail=1; }
grep -q "lstm_text_generation" "$tmp/report.md" || { echo "FAIL: report misses a task"; fail=1; }
grep -q "| cpu compile cold/warm |" "$tmp/report.md" || { echo "FAIL: report has no compile column"; fail=1; }
cat "$tmp/report.md"
[ $fail -eq 0 ] && echo "test_${plugin}_smoke: 1 passed, 0 failed" || echo "test_${plugin}_smoke: 0 passed, 1 failed"
exit $fail
