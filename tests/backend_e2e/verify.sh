#!/usr/bin/env bash
# verify.sh KHOST PLUGIN [ENV] — khost verify --plugin PLUGIN --device cpu: every layer and one training step
# of every task's model (real data) against the float64 reference kit. With ENV, the backend's environment
# line must contain it (which of its paths ran; the registry may be another build's: KHOST_CONF). Skipped
# (77) when the data sets are not installed.
set -uo pipefail
khost=$1 plugin=$2 want=${3:-} data=${KHOST_DATA:-}
if [ -z "$data" ] || [ ! -d "$data/mnist" ] || [ ! -d "$data/imdb" ] || [ ! -d "$data/nietzsche" ] || [ ! -d "$data/cifar10" ]; then
  echo "SKIPPED: data sets not installed in KHOST_DATA='$data' (tools/fetch-datasets)"; exit 77
fi
cache=$(mktemp -d "${TMPDIR:-/tmp}/khost-verify-XXXXXX"); trap 'rm -rf "$cache"' EXIT
export XDG_CACHE_HOME="$cache" # generated code (theano) compiles cold into a cache of this run's own
out=$("$khost" verify --plugin "$plugin" --device cpu --task all 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: verify exit $rc"; exit 1; }
if [ -n "$want" ]; then
  grep -q "^environment: .*$want" <<<"$out" || { echo "FAIL: the environment line does not name '$want'"; exit 1; }
fi
summary=$(echo "$out" | grep '^summary:')
# every task must have been checked (none skipped), and nothing may fail
grep -q ' 0 failed' <<<"$summary" || { echo "FAIL: $summary"; exit 1; }
grep -q ' 0 skipped' <<<"$summary" || { echo "FAIL: tasks skipped: $summary"; exit 1; }
for t in mnist_mlp mnist_cnn cifar10_cnn imdb_bidirectional_lstm imdb_fasttext lstm_text_generation; do
  grep -q "^$t: batch" <<<"$out" || { echo "FAIL: task $t not verified"; exit 1; }
done
echo "test_${plugin}_verify: 1 passed, 0 failed"
