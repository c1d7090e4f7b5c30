#!/bin/sh
# tests/cntk_gpu/half_missing.sh BUILD CAPS_TEST — cntk.so without its GPU half beside it: the CUDA kind is
# unavailable, and the note and the open error name the missing file and dlerror()'s reason.
set -u
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/plugins"
cp "$1/plugins/cntk.so" "$tmp/plugins/" || exit 1
out=$(KHOST_BUILD=$tmp "$2" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || exit 1
echo "$out" | grep -q 'note="GPU half not loadable: .*cntk-cuda/cntk_cuda.so: cannot open shared object file' ||
    { echo "FAIL: the note does not name the missing half"; exit 1; }
echo "$out" | grep -q 'cntk open on cuda:0: cannot load the GPU half: .*cntk_cuda.so' ||
    { echo "FAIL: the open error does not name the missing half"; exit 1; }
echo "half_missing: ok"
