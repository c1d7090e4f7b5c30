#!/usr/bin/env bash
# tests/gpu_check/test_gpu_check_lib.sh REPO — tools/gpu-check-lib.sh on fabricated folders (no GPU needed).
set -uo pipefail
repo=$1
source "$repo/tools/gpu-check-lib.sh"
pass=0 fail=0
ok() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# cuBLAS: each library folder on its own (a toolkit with only lib64, only lib, or targets/<arch>/lib)
mkdir -p "$tmp/tk1/lib64" "$tmp/tk1/lib" "$tmp/tk2/lib" "$tmp/tk3/targets/x86_64-linux/lib" "$tmp/tk4/lib64"
touch "$tmp/tk1/lib64/libcublas.so.13" "$tmp/tk2/lib/libcublas.so.13" "$tmp/tk3/targets/x86_64-linux/lib/libcublas.so.13"
ok '[[ $(gc_cublas_dir "$tmp/tk1") == "$tmp/tk1/lib64" ]]' "cuBLAS in lib64 while lib exists without it"
ok '[[ $(gc_cublas_dir "$tmp/tk2") == "$tmp/tk2/lib" ]]' "cuBLAS in lib only"
ok '[[ $(gc_cublas_dir "$tmp/tk3") == "$tmp/tk3/targets/x86_64-linux/lib" ]]' "cuBLAS under targets/"
ok '! gc_cublas_dir "$tmp/tk4" >/dev/null' "no cuBLAS in the toolkit: not found"

# NVRTC (theano's GPU path): the toolkit's libnvrtc.so.N, never its builtins or .alt variant; else a pip wheel's
mkdir -p "$tmp/nv1/lib64" "$tmp/nv2/lib" "$tmp/site/nvidia/cu13/lib" "$tmp/nv3/lib64"
touch "$tmp/nv1/lib64/"{libnvrtc-builtins.so.13.0,libnvrtc.alt.so.13,libnvrtc.so.13} "$tmp/site/nvidia/cu13/lib/libnvrtc.so.13"
touch "$tmp/nv3/lib64/libnvrtc-builtins.so.13.0"
ok '[[ $(gc_nvrtc_lib "$tmp/nv1" "$tmp/site") == "$tmp/nv1/lib64/libnvrtc.so.13" ]]' "NVRTC in the toolkit"
ok '[[ $(gc_nvrtc_lib "$tmp/nv2" "$tmp/site") == "$tmp/site/nvidia/cu13/lib/libnvrtc.so.13" ]]' "NVRTC from pip"
ok '! gc_nvrtc_lib "$tmp/nv3" "$tmp/nosite" >/dev/null' "only the builtins: not found"

# the time box: a step never gets more than the limit minus the reserve minus what is used
mkdir -p "$tmp/out"
GPU_CHECK_LIMIT=100 GC_RESERVE=15 gc_init "$tmp/out"
ok '[[ $(gc_timeout 300) -le 80 && $(gc_timeout 300) -ge 75 ]]' "a 300 s step is capped at what is left less the kill grace ($(gc_timeout 300))"
ok '[[ $(gc_timeout 30) == 30 ]]' "a short step keeps its own timeout"
gc_t0=$(($(date +%s) - 80)) # 80 s used: 5 left, under the minimum
ok '[[ $(gc_timeout 300) == 0 ]]' "no time left: the step does not start"

# timeout -k: a command that ignores SIGTERM is killed after the grace, and its status says it was cut
t0=$(date +%s)
GC_KILL_GRACE=1 gc_run 1 bash -c 'trap "" TERM; sleep 20'
rc=$?
ok '[[ $rc == 137 ]] && gc_cut $rc' "a TERM-ignoring command is KILLed (rc $rc)"
ok '(( $(date +%s) - t0 <= 5 ))' "and within the grace"
ok '! gc_cut 1 && ! gc_cut 0' "an ordinary failure is not a cut"
# "not reached" is not a failure: INCOMPLETE, unless something failed
gc_init "$tmp/out"
ok '[[ $(gc_verdict 0) == PASSED ]]' "nothing cut, nothing failed: PASSED"
gc_not_reached "matrix theano"
ok 'grep -q "^matrix theano: NOT REACHED" "$tmp/out/summary.txt"' "a step not reached is on the summary"
ok '[[ $(gc_verdict 0) == "INCOMPLETE: nothing failed; not reached (time box): matrix theano" ]]' "not reached: INCOMPLETE ($(gc_verdict 0))"
ok '[[ $(gc_verdict 1) == "FAILED (also not reached: matrix theano)" ]]' "a failure stays FAILED"
gc_nr=""

# the summary is on disk after every line, marked in progress until the verdict
gc_init "$tmp/out"
ok 'grep -q "in progress" "$tmp/out/summary.txt"' "summary written at start"
gc_sum "build: ok"
ok 'grep -q "^build: ok$" "$tmp/out/summary.txt"' "a line is on disk as soon as it is summed"
gc_finish "PASSED"
ok 'grep -q "^result: PASSED$" "$tmp/out/summary.txt" && grep -q "(finished;" "$tmp/out/summary.txt"' "final verdict"

# prerequisites: a carried prefix lacking inih and cJSON, no data: each named with its command
mkdir -p "$tmp/dd/usr/include" "$tmp/dd/usr/lib/x86_64-linux-gnu" "$tmp/repo" "$tmp/data"
touch "$tmp/dd/usr/include/jpeglib.h" "$tmp/dd/usr/include/zlib.h" "$tmp/dd/usr/include/png.h"
touch "$tmp/dd/usr/lib/x86_64-linux-gnu/"{libjpeg.a,libz.a,libpng.a}
t0=$(date +%s)
msg=$(gc_prereqs "$tmp/repo" "$tmp/dd" "$tmp/data")
rc=$?
ok '[[ $rc == 1 ]]' "missing prerequisites: status 1"
ok '(( $(date +%s) - t0 <= 5 ))' "the check takes seconds"
ok 'grep -q "^inih: .*make-devdeps.sh" <<<"$msg"' "inih named with make-devdeps.sh"
ok 'grep -q "^cJSON: .*make-devdeps-extra.sh" <<<"$msg"' "cJSON named with make-devdeps-extra.sh"
ok 'grep -q "^libmd: .*make-devdeps-extra.sh" <<<"$msg"' "libmd named with make-devdeps-extra.sh"
ok 'grep -q "^data: .*make-devdeps-extra.sh" <<<"$msg"' "the data named with make-devdeps-extra.sh"
ok '! grep -q "^libjpeg\|^zlib\|^libpng" <<<"$msg"' "present pieces are not reported"
# the carried mirror with a file missing
mkdir -p "$tmp/repo/.cache/gpu-data"
echo "0000  nietzsche.txt" >"$tmp/repo/.cache/gpu-data/SHA256SUMS"
msg=$(gc_prereqs "$tmp/repo" "$tmp/dd" "$tmp/data")
ok 'grep -q "nietzsche.txt listed in SHA256SUMS but missing" <<<"$msg"' "a mirror file that did not travel"

# the rehearsal's GPU tests: every one must print "prerequisites ok" before its CUDA open (ctest -V output)
cat >"$tmp/tests.log" <<'LOG'
== ctest -L gpu -V (GPU tests up to the CUDA open)
test 3
    Start 3: test_backend_ref_tensorflow_cuda
3: seed 1
3: prerequisites ok: tensorflow loaded, the reference kit builds all 14 models
3: SKIP: no CUDA device usable by tensorflow: no CUDA driver
1/3 Test #3: test_backend_ref_tensorflow_cuda ***Skipped   0.05 sec
test 7
    Start 7: test_backend_ref_cntk_cuda
7: SKIP: cannot load plugins/cntk.so
2/3 Test #7: test_backend_ref_cntk_cuda .......***Skipped   0.01 sec
test 12
    Start 12: test_backend_ref_theano_cuda
12: FAIL: open the comparison side, theano on the cpu
3/3 Test #12: test_backend_ref_theano_cuda .....***Failed    0.02 sec
LOG
ok '[[ $(gc_prereq_missing "$tmp/tests.log") == "test_backend_ref_cntk_cuda test_backend_ref_theano_cuda" ]]' \
    "GPU tests short of their CUDA open are named ($(gc_prereq_missing "$tmp/tests.log"))"
sed -i '/^7: SKIP/i 7: prerequisites ok: cntk loaded' "$tmp/tests.log"
sed -i '/^12: FAIL/i 12: prerequisites ok: theano loaded' "$tmp/tests.log"
ok '[[ -z $(gc_prereq_missing "$tmp/tests.log") ]]' "every GPU test reached its CUDA open: none named"

echo "test_gpu_check_lib: $pass passed, $fail failed"
((fail == 0))
