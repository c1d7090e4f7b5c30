#!/usr/bin/env bash
# tools/gpu-check.sh [OUTDIR] — the one prepared command for a lent GPU machine (../shared/device/README.md).
#
#   0. checks its prerequisites first (cmake, a compiler, pkg-config, inih, libjpeg, zlib, libpng, cJSON from
#      the carried .devdeps/ or the system, the data from the carried .cache/gpu-data/ or an installed data
#      folder) and stops within seconds, naming what is missing and the command that prepares it
#      (tools/gpu-check-lib.sh); OpenBLAS is optional (without it the cpu device kind is unavailable);
#   1. finds the CUDA toolkit (nvcc), cuDNN and cuBLAS (the toolkit's, else NVIDIA's pip wheels under the
#      Python's site-packages, else a file search) and NVRTC (theano's GPU path compiles its generated CUDA C with
#      it at model-compile time: the toolkit's, else a pip wheel's; passed as KHOST_NVRTC) and says which it used;
#   2. installs the carried data (tools/fetch-datasets) and builds khost for sm_90 (+ compute_90 PTX;
#      KHOST_CUDA_ARCHS to change) in build-gpucheck/, against .devdeps when present;
#   3. prints `khost --list-devices`, runs the GPU tests (ctest -L gpu) and, separately, the CPU-side tests of
#      the GPU paths (each ctest on its own: a failure in one never hides the other's results; theano's include
#      compiling every generated function of the six models with NVRTC for sm_90), then
#      `khost verify --device cuda:0` for every plugin whose GPU path was built (cntk, tensorflow, theano);
#   4. runs a short matrix of those plugins x the six tasks on cuda:0 (2 epochs, sets cut to fit:
#      GPU_CHECK_LIMIT_TRAIN / GPU_CHECK_LIMIT_VAL; tensorflow GPU_CHECK_TF_LIMIT_TRAIN / _VAL, smaller: its
#      unrolled LSTMs launch thousands of kernels per batch; theano's cells include NVRTC compiling four functions),
#      and the PyTorch reference on the same GPU for the
#      same tasks and cntk's sizes (tools/reference/pytorch --device cuda:0; skipped where PyTorch has no CUDA);
#   5. writes report.md, summary.txt, build.log, tests.log, verify.log, matrix.log, reference.log and
#      results.tar.gz (JSON/CSV records of khost and the reference, per-cell logs) into OUTDIR (default $OUT,
#      else out/gpu-check), and prints the compact summary last.
# Time box: one GPU run is killed at 600 s. Every step gets at most the time left before GPU_CHECK_LIMIT
# (default 560 s) minus a reserve for the summary, whatever its own timeout, and runs under `timeout -k`
# (gc_run). A step cut by the box, or with too little time left to start, is "NOT REACHED", not a failure:
# the verdict is then INCOMPLETE unless something failed. The steps run most valuable verdict first:
# build, verify of every GPU backend on cuda:0 (all six tasks), the GPU tests, the short matrix, the reference.
# Each step's cap (the timeout it asks for) and the estimated time on an H200 (16 cores), in s:
#   step                           cap   estimate
#   data from the carried mirror    30      5
#   configure                       40     15
#   build (sm_90, 16 jobs)         140     90
#   verify x 3 plugins            3x40   3x30
#   GPU tests (ctest -L gpu)        50     30
#   matrix x 3 plugins            3x35   3x30
#   reference (PyTorch, 6 tasks)  6x10     30
#   total                          545    350   (box 560 - reserve 15 - kill grace 5 = 540 for the steps;
#                                                 the last caps are clipped by gc_timeout)
# The estimate is a reasoned guess (nothing here has run on a GPU yet); with the machine's start (~60 s)
# the call takes ~410 s of device time, which leaves a rerun inside 15 minutes. The GPU tests' comparison side
# is the float64 reference kit on the host (the GPU machine has no BLAS, so no plugin has a cpu path there): a
# few seconds of the 30 per parity test at their small batches, as the plugin's cpu path cost before. The
# estimate is for the default fp32; GPU_CHECK_MATH=tf32 can only shorten the compute-bound matrix cells.
# CPU-only work (the CPU-side tests of the GPU paths, NVRTC compiling theano's sources) runs only without a
# GPU, in the rehearsal (tools/gpu-rehearse), never on device time. summary.txt is rewritten after every step ("in progress" until the end), so a
# run killed at any point still leaves what it found.
#
# Without a usable CUDA device (any CPU machine: the rehearsal, tools/gpu-rehearse) it still builds
# everything and runs the CPU-side tests; every GPU test (ctest -L gpu -V, the verify tests too) runs the part
# before its CUDA open — its prerequisites, ending in a "prerequisites ok" line — then reports "skipped"; one
# that fails there or skips without that line fails the rehearsal (gc_prereq_missing); verify and the GPU
# matrix are skipped, and tiny cpu cells prove the pipeline end to end (recorded "unsupported" where the build has no
# BLAS). It then says "no CUDA device" and exits 0.
# Rehearse it on a CPU machine, as the GPU machine will see it (fresh copy, no system inih/libjpeg/OpenBLAS,
# no data mirror):  tools/gpu-rehearse
# Exit status with a GPU: 0 when the build, every test, verify and every matrix cell succeeded; 1 otherwise;
# 2 when prerequisites are missing.
# Environment: CUDNN_ROOT / CUBLAS_ROOT override the search; GPU_CHECK_BUILD the build folder;
# GPU_CHECK_MATH=tf32 runs the matrix and the reference with TF32 allowed (default fp32, strict: khost
# --math, torch.backends.cuda.matmul.allow_tf32 / torch.backends.cudnn.allow_tf32; verify always fp32);
# GPU_CHECK_SYSTEM_DEPS=1 ignores .devdeps (GPU_CHECK_DEVDEPS: another prefix); KHOST_DATA the data folder
# (default <repo>/data, or .cache/khost-data when that is a dangling link); GPU_CHECK_LIMIT the time box.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-${OUT:-$repo/out/gpu-check}}
mkdir -p "$out" && out=$(cd "$out" && pwd) || { echo "gpu-check: cannot create $out" >&2; exit 2; }
build=${GPU_CHECK_BUILD:-$repo/build-gpucheck}
# shellcheck source=tools/gpu-check-lib.sh
source "$repo/tools/gpu-check-lib.sh"
report=$out/report.md
: >"$report"
for f in summary.txt build.log tests.log verify.log matrix.log reference.log results.tar.gz; do rm -f "$out/$f"; done
gc_init "$out"
failed=0
have_gpu=0

say() { echo "gpu-check: $*"; }
rep() { printf '%s\n' "$*" >>"$report"; }
sum() { gc_sum "$@"; }
# skipped STEP — the line for a step the time box did not allow: "not reached", not a failure
skipped() { gc_not_reached "$1"; return 0; }

rep "# khost GPU check"
rep ""
rep "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname 2>/dev/null || echo '?'), $(nproc) cores"
rep "- revision: $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git -C "$repo" status --porcelain 2>/dev/null | grep -q . && echo ' (+ uncommitted changes)')"

# --- 0. prerequisites: seconds, before anything else ---------------------------------------------------------
dd=${GPU_CHECK_DEVDEPS:-$repo/.devdeps}
[[ -n ${GPU_CHECK_SYSTEM_DEPS:-} ]] && dd=/nonexistent/.devdeps
data=${KHOST_DATA:-$repo/data}
if [[ -L $data && ! -e $data ]]; then # a link to a folder that did not travel
    data=$repo/.cache/khost-data
fi
if ! missing=$(gc_prereqs "$repo" "$dd" "$data"); then
    sum "prerequisites MISSING — nothing was built:"
    while IFS= read -r l; do sum "  $l"; done <<<"$missing"
    gc_finish "FAILED: prerequisites missing (see above)"
    rep ""
    rep '```'
    cat "$out/summary.txt" >>"$report"
    rep '```'
    cat "$out/summary.txt"
    exit 2
fi

# --- 1. toolkit, cuDNN, cuBLAS ------------------------------------------------------------------------------
gpu_line="none"
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
    [[ -n $gpu_line ]] || gpu_line="nvidia-smi found no GPU"
fi
rep "- nvidia-smi: $gpu_line"

nvcc=$(command -v nvcc 2>/dev/null || true)
for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do
    [[ -z $nvcc && -x $c ]] && nvcc=$c
done
cuda_root=""
if [[ -n $nvcc ]]; then
    cuda_root=$(cd "$(dirname "$nvcc")/.." && pwd)
    rep "- nvcc: $nvcc ($("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
else
    rep "- nvcc: not found (the plugins build CPU-only)"
fi

site=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null || true)
cudnn_inc="" cudnn_lib="" cudnn_from=""
pick_cudnn() { # ROOT DESCRIPTION — take cuDNN from ROOT when its header and library are there
    local inc lib
    inc=$(find "$1/" -maxdepth 3 -name cudnn.h -path '*include*' 2>/dev/null | head -1) # "/": through a link
    lib=$(find "$1/" -maxdepth 3 \( -name 'libcudnn.so' -o -name 'libcudnn.so.[0-9]*' \) 2>/dev/null | sort | head -1)
    [[ -n $inc && -n $lib ]] || return 1
    cudnn_inc=$(dirname "$inc") cudnn_lib=$lib cudnn_from=$2
}
if [[ -n ${CUDNN_ROOT:-} ]]; then pick_cudnn "$CUDNN_ROOT" "CUDNN_ROOT"; fi
[[ -z $cudnn_lib && -n $cuda_root ]] && pick_cudnn "$cuda_root" "the CUDA toolkit"
[[ -z $cudnn_lib && -n $site && -d $site/nvidia/cudnn ]] && pick_cudnn "$site/nvidia/cudnn" "pip (nvidia-cudnn)"
if [[ -z $cudnn_lib && -f /usr/include/cudnn.h ]] || [[ -z $cudnn_lib && -f /usr/include/x86_64-linux-gnu/cudnn.h ]]; then
    l=$(ls /usr/lib/x86_64-linux-gnu/libcudnn.so* 2>/dev/null | head -1)
    [[ -n $l ]] && cudnn_inc=$(dirname "$(ls /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h 2>/dev/null | head -1)") \
        cudnn_lib=$l cudnn_from="the system"
fi
if [[ -z $cudnn_lib ]]; then
    l=$(timeout 20 find / -name 'libcudnn.so*' -not -path '/proc/*' 2>/dev/null | head -1)
    [[ -n $l ]] && pick_cudnn "$(dirname "$(dirname "$l")")" "a file search"
fi
rep "- cuDNN: ${cudnn_lib:-not found}${cudnn_from:+ (from $cudnn_from; headers $cudnn_inc)}"

# cuBLAS: the toolkit's when one of its library folders has it (each folder tested on its own)
cublas_root="" cublas_from="" cublas_dir=""
if [[ -n ${CUBLAS_ROOT:-} ]]; then
    cublas_root=$CUBLAS_ROOT cublas_from="CUBLAS_ROOT ($CUBLAS_ROOT)"
elif [[ -n $cuda_root ]] && cublas_dir=$(gc_cublas_dir "$cuda_root"); then
    cublas_from="the CUDA toolkit ($cublas_dir)"
else
    l=$(find "${site:-/nonexistent}/nvidia/" -name 'libcublas.so.*' 2>/dev/null | head -1)
    if [[ -n $l ]]; then cublas_root=$(dirname "$(dirname "$l")") cublas_from="pip ($cublas_root)"; fi
fi
rep "- cuBLAS: from ${cublas_from:-nowhere (not found)}"

# NVRTC: theano's GPU path loads it at run time (dlopen); the build records the path as its default
nvrtc_lib=$(gc_nvrtc_lib "${cuda_root:-/nonexistent}" "${site:-/nonexistent}" || true)
rep "- NVRTC (theano): ${nvrtc_lib:-not found, so theano reports its GPU path unavailable}"
gc_head="gpu: $gpu_line; cuDNN ${cudnn_lib:-none} (${cudnn_from:-not found}); cuBLAS from ${cublas_from:-nowhere}; NVRTC ${nvrtc_lib:-none}"
gc_write "in progress"

ldp=""
[[ -n $cudnn_lib ]] && ldp=$(dirname "$cudnn_lib")
[[ -n $cublas_root ]] && ldp=$ldp:$cublas_root/lib
[[ -n $cublas_dir ]] && ldp=$ldp:$cublas_dir
[[ -n $cuda_root ]] && ldp=$ldp:$cuda_root/lib64
if [[ -n $nvrtc_lib ]]; then # libnvrtc loads libnvrtc-builtins from the loader's path
    ldp=$ldp:$(dirname "$nvrtc_lib")
    export KHOST_NVRTC=$nvrtc_lib
fi

# --- 2. dependencies, data, build -------------------------------------------------------------------------
cm_args=(-DCMAKE_BUILD_TYPE=Release -DKHOST_WERROR=OFF "-DKHOST_CUDA_ARCHS=${KHOST_CUDA_ARCHS:-90}")
if [[ -n $nvcc && -n $cudnn_lib ]]; then
    cm_args+=(-DKHOST_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCUDAToolkit_ROOT=$cuda_root"
              "-DCUDNN_INCLUDE_DIR=$cudnn_inc" "-DCUDNN_LIBRARY=$cudnn_lib")
    [[ -n $cublas_root ]] && cm_args+=("-DCUBLAS_ROOT=$cublas_root")
    [[ -n $nvrtc_lib ]] && cm_args+=("-DTH_NVRTC_LIBRARY=$nvrtc_lib")
else
    cm_args+=(-DKHOST_CUDA=AUTO)
fi
command -v ninja >/dev/null 2>&1 && cm_args+=(-G Ninja)
deps="the system"
if [[ -d $dd/usr ]]; then
    dd=$(cd "$dd" && pwd)
    arch_lib=$dd/usr/lib/x86_64-linux-gnu
    deps=".devdeps (carried)"
    cm_args+=("-DCMAKE_PREFIX_PATH=$dd/usr")
    # the .pc files say prefix=/usr: let pkg-config prefix every path with the carried root
    export PKG_CONFIG_SYSROOT_DIR=$dd
    export PKG_CONFIG_LIBDIR=$arch_lib/pkgconfig:$dd/usr/share/pkgconfig:$dd/usr/lib/pkgconfig
    export PKG_CONFIG_PATH=$PKG_CONFIG_LIBDIR
    export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
    # Debian's multiarch headers (jconfig.h beside jpeglib.h, ...) are found by the compiler only under /usr
    export CPATH=$dd/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}
    ldp=$ldp:$arch_lib:$dd/usr/lib
    if ! command -v pkg-config >/dev/null 2>&1 && ! command -v pkgconf >/dev/null 2>&1 && [[ -x $dd/usr/bin/pkgconf ]]; then
        cm_args+=("-DPKG_CONFIG_EXECUTABLE=$dd/usr/bin/pkgconf")
        deps="$deps, its pkgconf"
    fi
fi
orig_ldp=${LD_LIBRARY_PATH-}
export LD_LIBRARY_PATH=${ldp#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rep "- build dependencies: $deps"
sum "prerequisites: ok (build dependencies from $deps)"

mirror=""
for m in "$repo/.cache/gpu-data" "$repo/../shared/datasets"; do
    [[ -z $mirror && -f $m/SHA256SUMS ]] && mirror=$m
done
data_state="not installed"
to=$(gc_timeout 30)
if [[ -n $mirror ]] && ((to > 0)); then
    say "installing data from $mirror into $data"
    mkdir -p "$data"
    if gc_run "$to" env KHOST_FETCH_OFFLINE=1 "$repo/tools/fetch-datasets" --mirror "$mirror" --data "$data" mnist cifar10 \
        imdb nietzsche >>"$out/build.log" 2>&1; then
        data_state="from $mirror"
    else
        data_state="fetch-datasets FAILED (see build.log)"
        failed=1
    fi
elif [[ -d $data ]]; then
    data_state="already in $data"
fi
export KHOST_DATA=$data
rep "- data: $data ($data_state)"
sum "data: $data ($data_state, $(gc_elapsed) s)"

t0=$(date +%s)
khost=$build/khost
to_cfg=$(gc_timeout 40)
build_rc=124
if ((to_cfg > 0)); then
    say "configuring and building in $build ($(nproc) jobs)"
    {
        echo "cmake ${cm_args[*]}"
        gc_run "$to_cfg" cmake -S "$repo" -B "$build" "${cm_args[@]}"
    } >>"$out/build.log" 2>&1
    build_rc=$?
    to_bld=$(gc_timeout 140)
    if ((build_rc == 0 && to_bld > 0)); then
        gc_run "$to_bld" cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1
        build_rc=$?
    elif ((build_rc == 0)); then
        build_rc=124
    fi
fi
build_s=$(($(date +%s) - t0))
# plugins whose GPU path was built ("<plugin>: GPU path with ..." at configure time)
gpu_plugins=$(grep -oE '^-- [a-z_]+: GPU path with' "$out/build.log" | awk '{print $2}' | tr -d ':' | sort -u | tr '\n' ' ')
gpu_plugins=${gpu_plugins% }
if gc_cut $build_rc; then
    gc_not_reached "build (cut after ${build_s} s, rc $build_rc; see build.log)"
elif ((build_rc != 0)) || [[ ! -x $khost ]]; then
    sum "build: FAILED after ${build_s} s (rc $build_rc$( ((build_rc == 124)) && echo ', time box')) — see build.log:"
    while IFS= read -r l; do sum "  $l"; done < <(grep -E 'error|Error|FATAL' "$out/build.log" | head -8)
    failed=1
else
    sum "build: ok in ${build_s} s, sm_${KHOST_CUDA_ARCHS:-90}; GPU paths built: ${gpu_plugins:-none (no CUDA toolkit/cuDNN)}"
fi
rep "- build: rc $build_rc in ${build_s} s; GPU paths: ${gpu_plugins:-none}"

# --- 3. devices, tests, verify ----------------------------------------------------------------------------
devices="(khost not built)"
if [[ -x $khost ]]; then
    devices=$("$khost" --list-devices 2>&1)
    grep -q '^cuda:0' <<<"$devices" && have_gpu=1
    rep ""
    rep "## Devices"
    rep '```'
    rep "$devices"
    for p in $gpu_plugins; do # each plugin must agree: its caps line for cuda
        rep "$p: $("$khost" --list 2>&1 | sed -n "/^  $p /,/^  [a-z]/p" | grep -E '^ +cuda ' | head -1 | sed 's/^ *//')"
    done
    rep '```'
    echo "$devices"
fi
if ((have_gpu)); then
    sum "device: $(grep '^cuda:0' <<<"$devices" | head -1 | sed 's/  */ /g')"
    [[ -n $gpu_plugins ]] || { sum "no plugin's GPU path was built (see build.log): nothing to test on the GPU"; failed=1; }
else
    sum "device: no CUDA device — $(grep -o '(no CUDA device[^)]*)' <<<"$devices" | head -1)"
fi

# verify first: the most valuable verdict of the call
rep ""
rep "## khost verify --device cuda:0"
rep '```'
for p in $gpu_plugins; do
    verify_line="verify $p cuda:0: skipped (no CUDA device)"
    if ((have_gpu)); then
        to=$(gc_timeout 40)
        if ((to > 0)); then
            args=(verify --plugin "$p" --device cuda:0)
            [[ $p == tensorflow || $p == theano ]] && args+=(--task all)
            say "khost ${args[*]}"
            tmp=$out/verify.part
            gc_run "$to" "$khost" "${args[@]}" >"$tmp" 2>&1
            vrc=$?
            { echo "== khost ${args[*]} (rc $vrc)"; cat "$tmp"; } >>"$out/verify.log"
            vsum=$(grep -E '^summary:' "$tmp" | tail -1)
            [[ -n $vsum ]] || vsum=$(grep -v '^ *$' "$tmp" | tail -1) # refused before comparing: its reason
            verify_line="verify $p cuda:0: $vsum (rc $vrc)"
            if gc_cut $vrc; then
                gc_nr="${gc_nr:+$gc_nr, }verify $p (cut)"
                verify_line="verify $p cuda:0: NOT REACHED to the end (time box, rc $vrc); $vsum"
            elif ((vrc != 0)); then
                failed=1
            fi
            fails=$(grep -E ' FAIL$' "$tmp" | head -6)
            [[ -n $fails ]] && verify_line="$verify_line"$'\n'"$(sed 's/^/  /' <<<"$fails")"
            rm -f "$tmp"
        else
            verify_line="verify $p cuda:0: NOT REACHED (time box)"
            gc_nr="${gc_nr:+$gc_nr, }verify $p"
        fi
    fi
    while IFS= read -r l; do sum "$l"; done <<<"$verify_line"
    rep "$verify_line"
done
rep '```'

# run_ctest NAME TIMEOUT ARGS... — one ctest invocation, appended to tests.log; its status alone
run_ctest() {
    local name=$1 to=$2 rc
    shift 2
    {
        echo "== ctest $* ($name)"
        (cd "$build" && gc_run "$to" ctest "$@" --output-on-failure --timeout "$to")
    } >>"$out/tests.log" 2>&1
    rc=$?
    echo "== rc $rc" >>"$out/tests.log"
    return $rc
}
names() { grep -E "Test +#[0-9]+: .*$1" "$out/tests.log" | sed -E 's/.*: ([A-Za-z0-9_]+) .*/\1/' | sort -u | tr '\n' ' '; }
tests_line="tests: skipped (no build)"
if [[ -x $khost ]]; then
    : >"$out/tests.log"
    # the khost verify tests are step 3b (with their own log)
    to=$(gc_timeout 50)
    if ((to > 0 && have_gpu)); then
        # the conformance harness in the math GPU_CHECK_MATH asks for (each math is a test of its own)
        if [[ ${GPU_CHECK_MATH:-fp32} == tf32 ]]; then other='_cuda$'; else other='_cuda_tf32$'; fi
        say "ctest -L gpu (but the verify tests and the other math)"
        run_ctest "GPU tests" "$to" -L gpu -E "^test_backend_verify_|$other"
        trc=$?
        if gc_cut $trc; then gc_not_reached "GPU tests (ctest -L gpu): cut"; elif ((trc != 0)); then failed=1; fi
    elif ((to > 0)); then
        # no device: every GPU test (the verify tests too) runs the part before its CUDA open — the
        # prerequisites, which must print "prerequisites ok" — and then skips; one that fails there, or skips
        # before it, would fail on the GPU machine too
        say "ctest -L gpu -V (each GPU test up to its CUDA open)"
        run_ctest "GPU tests up to the CUDA open" "$to" -L gpu -V
        trc=$?
        if gc_cut $trc; then gc_not_reached "GPU tests (ctest -L gpu): cut"; elif ((trc != 0)); then failed=1; fi
        short=$(gc_prereq_missing "$out/tests.log")
        if [[ -n $short ]]; then
            failed=1
            sum "GPU tests that did not reach their CUDA open (no \"prerequisites ok\"): $short"
        fi
    else
        skipped "GPU tests (ctest -L gpu)"
    fi
    # the CPU-side tests of the GPU paths: weight mapping, caps without a device, the lazy GPU halves (missing
    # half named; a cpu cell of every plugin maps no CUDA library and no other backend), layouts, theano's launch
    # plans and its generated CUDA C compiled by NVRTC for sm_90 (the slowest: run in parallel)
    cpu_side='test_cntk_rnnmap|test_backend_caps_|test_cpu_maps|test_backend_half_missing_|test_tf_cuda_plan|test_tf_cuda_geom|test_theano_cuda_plan|test_theano_cuda_nvrtc'
    to=$(gc_timeout 90)
    if ((have_gpu)); then
        : # CPU-only: the rehearsal runs them, not device time
    elif ((to > 0)); then
        say "ctest -R '$cpu_side'"
        run_ctest "CPU-side tests of the GPU paths" "$to" -j "$(nproc)" -R "$cpu_side" || failed=1
    else
        skipped "CPU-side tests"
    fi
    t_pass=$(names ' Passed') t_fail=$(names 'Failed|Timeout|Exception') t_skip=$(names 'Skipped|Not Run')
    tests_line="tests (ctest -L gpu; CPU-side of the GPU paths): passed: ${t_pass:-none}; failed: ${t_fail:-none}; skipped: ${t_skip:-none}"
    if ((have_gpu)); then # with a device, every built GPU path's reference test must have run and passed
        for p in $gpu_plugins; do
            t=test_backend_ref_${p}_cuda
            [[ ${GPU_CHECK_MATH:-fp32} == tf32 ]] && t=${t}_tf32
            [[ " $t_pass " == *" $t "* ]] || { failed=1; tests_line="$tests_line; $t did NOT pass"; }
        done
    fi
fi
sum "$tests_line"
while IFS= read -r l; do sum "  $l"; done < <(grep -E '^FAIL|Failed|out-of-memory message|seed ' "$out/tests.log" 2>/dev/null | head -12)
rep ""
rep "## Tests"
rep "$tests_line"

# --- 4. the short matrix and the reference on the same GPU -------------------------------------------------
results=$build/gpu-check-results
rm -rf "$results"
# per plugin: the train/val samples of its cells (tensorflow smaller: an unrolled LSTM is thousands of
# launches per batch) and the share of the time box it may take
lt=${GPU_CHECK_LIMIT_TRAIN:-4000} lv=${GPU_CHECK_LIMIT_VAL:-1000} cell_to=60
# the FP32 math of the matrix and the reference (khost --math, torch's allow_tf32 flags); verify stays fp32,
# the math its tolerances are for
math=${GPU_CHECK_MATH:-fp32}
if ((have_gpu)); then
    mx_plugins=$gpu_plugins mx_devices="cuda:0"
else # rehearsal: prove the pipeline, quickly, on the cpu (cells "unsupported" where the build has no BLAS)
    mx_plugins="cntk tensorflow theano" mx_devices="cpu" lt=256 lv=128
fi
: >"$out/matrix.log"
for p in $mx_plugins; do
    plt=$lt plv=$lv
    if [[ $p == tensorflow ]] && ((have_gpu)); then plt=${GPU_CHECK_TF_LIMIT_TRAIN:-2000} plv=${GPU_CHECK_TF_LIMIT_VAL:-500}; fi
    [[ -x $khost ]] || break
    to=$(gc_timeout 35)
    if ((to <= 0)); then
        skipped "matrix $p"
        continue
    fi
    pct=$((cell_to < to ? cell_to : to))
    sum "matrix $p: running since $(gc_elapsed) s (each cell is in matrix.log as soon as it ends)"
    say "khost matrix --plugins $p --tasks all --devices $mx_devices --epochs 2 --limit-train $plt --limit-val $plv"
    # each finished cell is a record and a line in matrix.log at once; --timeout bounds a hung cell
    gc_run "$to" "$khost" matrix --plugins "$p" --tasks all --devices "$mx_devices" --epochs 2 --math "$math" \
        --limit-train "$plt" --limit-val "$plv" --timeout "$pct" --out "$results" >>"$out/matrix.log" 2>&1
    mrc=$?
    if gc_cut $mrc; then
        gc_nr="${gc_nr:+$gc_nr, }matrix $p (cut)"
    elif ((have_gpu && mrc != 0)); then
        failed=1
    fi
    # on the GPU every cell must train: "unsupported" there means the GPU path is not usable
    if ((have_gpu)) && ! gc_cut $mrc && ! tail -1 "$out/matrix.log" | grep -qE '^matrix: ([0-9]+) of \1 cell\(s\) done: \1 ok'; then
        failed=1
    fi
    sum "matrix $p (6 tasks x $mx_devices, 2 epochs, <= $plt train / $plv val samples, math $math): rc $mrc$( ((mrc == 124)) && echo ' (time box)')"
    while IFS= read -r l; do sum "  $l"; done < <(grep -E "^\[[0-9]+/[0-9]+\] $p x |^matrix: [0-9]+ of" "$out/matrix.log" |
        grep -v ' \.\.\.$' | sed -E 's/^\[[0-9]+\/[0-9]+\] //; s/ log: .*//' | tail -7)
done

# the PyTorch reference: same tasks, same sizes, same GPU, the same math (torch's TF32 flags from --math)
ref_line="reference (PyTorch cuda:0): skipped (no CUDA device)"
if ((have_gpu)); then
    py=${GPU_CHECK_PYTHON:-python3}
    if ! env LD_LIBRARY_PATH="$orig_ldp" "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
        ref_line="reference (PyTorch cuda:0): skipped ($py has no PyTorch with CUDA)"
    else
        ref_ok=0 ref_n=0
        for t in mnist_mlp mnist_cnn cifar10_cnn imdb_fasttext imdb_bidirectional_lstm lstm_text_generation; do
            to=$(gc_timeout 10)
            ((to > 0)) || { ref_line_tail=" (NOT REACHED from $t on: time box)"; gc_nr="${gc_nr:+$gc_nr, }reference from $t"; break; }
            ref_n=$((ref_n + 1))
            say "reference pytorch $t on cuda:0"
            {
                echo "== pytorch $t --device cuda:0"
                # torch with the loader path khost had before this script put its cuDNN/cuBLAS first
                gc_run "$to" env LD_LIBRARY_PATH="$orig_ldp" "$py" "$repo/tools/reference/pytorch/$t.py" --device cuda:0 --math "$math" --epochs 2 --limit-train "$lt" \
                    --limit-val "$lv" --data "$data" --out "$results" --quiet
                echo "== rc $?"
            } >>"$out/reference.log" 2>&1
            grep -q '^== rc 0$' <(tail -1 "$out/reference.log") && ref_ok=$((ref_ok + 1))
        done
        ref_line="reference (PyTorch cuda:0, 2 epochs, same sizes, math $math): $ref_ok of $ref_n tasks ok${ref_line_tail:-}"
    fi
fi
sum "$ref_line"
if [[ -d $results ]]; then
    "$khost" report "$results" >"$out/report.tables" 2>&1 || true
fi
rep ""
rep "## Matrix"
rep '```'
cat "$out/matrix.log" >>"$report"
rep '```'
rep ""
rep "## Reference"
rep "$ref_line"
if [[ -f $out/report.tables ]]; then
    rep ""
    rep "## khost report (khost plugins and the PyTorch reference)"
    rep '```'
    cat "$out/report.tables" >>"$report"
    rep '```'
    rm -f "$out/report.tables"
fi
[[ -d $results ]] && tar -czf "$out/results.tar.gz" -C "$(dirname "$results")" "$(basename "$results")" 2>/dev/null

# --- 5. summary -------------------------------------------------------------------------------------------
if ((have_gpu)); then
    verdict=$(gc_verdict "$failed")
else
    verdict="no CUDA device: GPU tests skipped, CPU parts built and run (rehearsal)"
    [[ -n $gc_nr ]] && verdict="INCOMPLETE (no CUDA device): not reached (time box): $gc_nr"
    ((failed)) && verdict="FAILED before reaching the GPU steps (no CUDA device)${gc_nr:+; not reached: $gc_nr}"
fi
gc_finish "$verdict"
{
    echo ""
    echo "## Summary"
    echo '```'
    cat "$out/summary.txt"
    echo '```'
} >>"$report"
echo
cat "$out/summary.txt"
if ((have_gpu)); then exit $failed; fi
# the rehearsal must reach every step it can run here
((failed)) || [[ -n $gc_nr ]] && exit 1
exit 0
