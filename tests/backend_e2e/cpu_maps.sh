#!/usr/bin/env bash
# cpu_maps.sh KHOST PLUGIN... — what a cpu cell's process maps: for every plugin, a few steps of mnist_mlp on
# cpu map the plugin's own module and no CUDA library (libcudnn, libcublas, libcudart, libnvrtc: those belong
# to the GPU half, loaded only for the CUDA kind), and no other backend module (the host opens only the
# modules a command names). The cell itself may fail (no BLAS or no data on the machine, as on the GPU
# machine): it is what the process mapped by its end that is checked (KHOST_MAPPED_OUT).
set -uo pipefail
khost=$1; shift
plugins="$*"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-maps-XXXXXX"); trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
fail=0
for p in $plugins; do
  maps=$tmp/$p.maps
  KHOST_MAPPED_OUT=$maps "$khost" run --plugin "$p" --task mnist_mlp --device cpu --epochs 1 --steps 2 \
    --limit-train 256 --limit-val 128 --out "$tmp/res" --quiet >"$tmp/$p.log" 2>&1
  echo "$p: cell exit $? ($(tail -n 1 "$tmp/$p.log"))"
  if [ ! -s "$maps" ]; then echo "FAIL: $p: KHOST_MAPPED_OUT was not written"; fail=1; continue; fi
  # the list is the process's: the plugin's own module must be in it, or the checks below prove nothing
  grep -q "/$p\.so$" "$maps" || { echo "FAIL: $p: the cell's process did not map $p.so"; fail=1; }
  if grep -E '/lib(cudnn|cublas|cublasLt|cudart|nvrtc)[^/]*\.so' "$maps" >"$tmp/cuda"; then
    echo "FAIL: $p: a cpu cell maps CUDA libraries:"; sed 's/^/  /' "$tmp/cuda"; fail=1
  fi
  for o in $plugins; do
    [ "$o" = "$p" ] && continue
    if grep -E "/$o(\.so|-cuda/)" "$maps" >"$tmp/other"; then
      echo "FAIL: $p: the run loaded another backend's module:"; sed 's/^/  /' "$tmp/other"; fail=1
    fi
  done
  grep -q -- "-cuda/" "$maps" && { echo "FAIL: $p: a cpu cell loaded a GPU half: $(grep -- -cuda/ "$maps")"; fail=1; }
done
[ $fail -eq 0 ] && echo "test_cpu_maps: passed ($plugins)" || echo "test_cpu_maps: FAILED"
exit $fail
