#!/usr/bin/env bash
# tests/sdk/test_sdk.sh BUILD_DIR SOURCE_DIR — install khost into a temporary prefix, build the example task
# out of tree twice (pkg-config and find_package), drop it into the installed task directory and run it
# through the installed khost with the real cntk backend.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-sdk-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(cd "$prefix" && ls -d lib* | head -1)
test -x "$prefix/bin/khost" || { echo "FAIL: no installed khost"; exit 1; }
test -f "$prefix/include/khost/khost.h" || { echo "FAIL: no installed headers"; exit 1; }

# 1. pkg-config
export PKG_CONFIG_PATH=$prefix/$lib/pkgconfig
cflags=$(pkg-config --cflags khost) libs=$(pkg-config --libs khost)
cc -std=c11 -shared $cflags -o "$tmp/sdk_blobs.so" "$src/examples/sdk_task/sdk_blobs.c" $libs -Wl,--no-undefined
exports=$(nm -D --defined-only "$tmp/sdk_blobs.so" | awk '$2=="T"{print $3}')
[ "$exports" = "khost_module_entry" ] || { echo "FAIL: pkg-config module exports: $exports"; exit 1; }

# 2. find_package
cmake -S "$src/examples/sdk_task" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/b" >/dev/null
test -f "$tmp/b/sdk_blobs.so" || { echo "FAIL: find_package build produced no sdk_blobs.so"; exit 1; }

# 3. drop it in, run it: discovered without being named in the registry
cp "$tmp/sdk_blobs.so" "$prefix/$lib/khost/tasks/"
unset KHOST_CONF
"$prefix/bin/khost" --list | grep -q "sdk_blobs" || { echo "FAIL: dropped-in task not discovered"; exit 1; }
KHOST_LIBCUDA=/nonexistent "$prefix/bin/khost" run --plugin cntk --task sdk_blobs --device cpu --out "$tmp/results" \
    --quiet --json > "$tmp/run.json"
tail -1 "$tmp/run.json" | grep -q '"status":"ok"' || { echo "FAIL: run: $(cat "$tmp/run.json")"; exit 1; }
echo "test_sdk: 4 passed, 0 failed"
