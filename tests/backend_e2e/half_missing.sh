#!/bin/sh
# tests/backend_e2e/half_missing.sh BUILD PLUGIN CAPS_TEST — PLUGIN.so without its GPU half beside it: the CUDA kind
# is unavailable, and the note and the open error name the missing file and dlerror()'s reason (khost/kit/half.h).
# CAPS_TEST is the plugin's caps test, run against a build folder holding PLUGIN.so alone.
set -u
build=$1 plugin=$2 caps=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/plugins"
cp "$build/plugins/$plugin.so" "$tmp/plugins/" || exit 1
out=$(KHOST_BUILD=$tmp "$caps" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || exit 1
echo "$out" | grep -q "note=\"GPU half not loadable: .*$plugin-cuda/${plugin}_cuda.so: cannot open shared object file" ||
    { echo "FAIL: the note does not name the missing half"; exit 1; }
echo "$out" | grep -q "$plugin open on cuda:0: GPU half not loadable: .*${plugin}_cuda.so" ||
    { echo "FAIL: the open error does not name the missing half"; exit 1; }
echo "half_missing $plugin: ok"
