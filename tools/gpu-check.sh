#!/usr/bin/env bash
# tools/gpu-check.sh [OUTDIR] — the one prepared command for a lent GPU machine (../shared/device/README.md).
#
#   1. finds the CUDA toolkit (nvcc), cuDNN and cuBLAS (the toolkit's, else NVIDIA's pip wheels under the
#      Python's site-packages, else a file search) and says which it used;
#   2. builds khost for sm_90 (+ compute_90 PTX; KHOST_CUDA_ARCHS to change) in build-gpucheck/, against the
#      carried .devdeps/ prefix when present (inih, cJSON, libjpeg, zlib, libpng, pkgconf; see
#      tools/make-devdeps-extra.sh), and installs the carried data (.cache/gpu-data) with tools/fetch-datasets;
#   3. prints `khost --list-devices`, runs the GPU tests (ctest -L gpu, plus the CPU-side mapping/caps/layout tests
#      of both GPU paths), `khost verify --plugin cntk --device cuda:0` and
#      `khost verify --plugin tensorflow --device cuda:0 --task all`;
#   4. runs a short matrix: cntk x the six tasks x cuda:0 and cpu, then tensorflow x the six tasks x cuda:0, 2
#      epochs each on real data, training and validation sets cut to fit the time box
#      (GPU_CHECK_LIMIT_TRAIN / GPU_CHECK_LIMIT_VAL; tensorflow: GPU_CHECK_TF_LIMIT_TRAIN / GPU_CHECK_TF_LIMIT_VAL);
#   5. writes report.md, summary.txt, build.log, tests.log, verify.log, matrix.log and results.tar.gz (JSON/CSV
#      records and per-cell logs) into OUTDIR (default $OUT, else out/gpu-check) — 7 files, within what the
#      device tool brings back — and prints the compact summary last.
# Time box: well under 8 minutes on the H200 (16 cores); each step has its own timeout and steps that would
# start after GPU_CHECK_BUDGET seconds (default 420) are skipped and reported as such.
#
# Without a usable CUDA device (any CPU machine: the rehearsal) it still builds everything and runs the
# CPU-side tests; the GPU tests report "skipped", verify on cuda:0 is skipped, and the matrix runs only tiny
# cpu cells (256 samples, cntk and tensorflow) to prove the pipeline end to end. It then says "no CUDA device" and exits 0.
# Exit status with a GPU: 0 when the build, every test, verify and every matrix cell succeeded; 1 otherwise.
# Environment: CUDNN_ROOT / CUBLAS_ROOT override the search; GPU_CHECK_BUILD the build folder;
# GPU_CHECK_SYSTEM_DEPS=1 ignores .devdeps (GPU_CHECK_DEVDEPS: another prefix); KHOST_DATA the data folder (default <repo>/data).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-${OUT:-$repo/out/gpu-check}}
mkdir -p "$out" && out=$(cd "$out" && pwd) || { echo "gpu-check: cannot create $out" >&2; exit 2; }
build=${GPU_CHECK_BUILD:-$repo/build-gpucheck}
budget=${GPU_CHECK_BUDGET:-420}
t_start=$(date +%s)
report=$out/report.md
: >"$report"
for f in summary.txt build.log tests.log verify.log matrix.log results.tar.gz; do rm -f "$out/$f"; done
rm -f "$out/verify-tensorflow.log" # older runs (now appended to verify.log)
summary=()
failed=0

elapsed() { echo $(($(date +%s) - t_start)); }
say() { echo "gpu-check: $*"; }
rep() { printf '%s\n' "$*" >>"$report"; }
sum() { summary+=("$*"); }
# over_budget RESERVE — true when fewer than RESERVE seconds of the budget remain
over_budget() { (($(elapsed) + $1 > budget)); }

rep "# khost GPU check"
rep ""
rep "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname 2>/dev/null || echo '?'), $(nproc) cores"
rep "- revision: $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git -C "$repo" status --porcelain 2>/dev/null | grep -q . && echo ' (+ uncommitted changes)')"

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
    l=$(find / -name 'libcudnn.so*' -not -path '/proc/*' 2>/dev/null | head -1)
    [[ -n $l ]] && pick_cudnn "$(dirname "$(dirname "$l")")" "a file search"
fi
rep "- cuDNN: ${cudnn_lib:-not found}${cudnn_from:+ (from $cudnn_from; headers $cudnn_inc)}"

cublas_root="" cublas_from="the CUDA toolkit"
if [[ -n ${CUBLAS_ROOT:-} ]]; then
    cublas_root=$CUBLAS_ROOT cublas_from="CUBLAS_ROOT"
elif [[ -z $cuda_root ]] || ! ls "$cuda_root"/lib64/libcublas.so* "$cuda_root"/lib/libcublas.so* >/dev/null 2>&1; then
    l=$(find "${site:-/nonexistent}/nvidia/" -name 'libcublas.so.*' 2>/dev/null | head -1)
    if [[ -n $l ]]; then cublas_root=$(dirname "$(dirname "$l")") cublas_from="pip ($cublas_root)"; fi
fi
rep "- cuBLAS: from $cublas_from"

ldp=""
[[ -n $cudnn_lib ]] && ldp=$(dirname "$cudnn_lib")
[[ -n $cublas_root ]] && ldp=$ldp:$cublas_root/lib
[[ -n $cuda_root ]] && ldp=$ldp:$cuda_root/lib64

# --- 2. dependencies, data, build -------------------------------------------------------------------------
cm_args=(-DCMAKE_BUILD_TYPE=Release -DKHOST_WERROR=OFF "-DKHOST_CUDA_ARCHS=${KHOST_CUDA_ARCHS:-90}")
if [[ -n $nvcc && -n $cudnn_lib ]]; then
    cm_args+=(-DKHOST_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCUDAToolkit_ROOT=$cuda_root"
              "-DCUDNN_INCLUDE_DIR=$cudnn_inc" "-DCUDNN_LIBRARY=$cudnn_lib")
    [[ -n $cublas_root ]] && cm_args+=("-DCUBLAS_ROOT=$cublas_root")
else
    cm_args+=(-DKHOST_CUDA=AUTO)
fi
command -v ninja >/dev/null 2>&1 && cm_args+=(-G Ninja)
deps="the system"
dd=${GPU_CHECK_DEVDEPS:-$repo/.devdeps}
if [[ -d $dd/usr && -z ${GPU_CHECK_SYSTEM_DEPS:-} ]]; then
    dd=$(cd "$dd" && pwd)
    arch_lib=$dd/usr/lib/x86_64-linux-gnu
    deps=".devdeps (carried)"
    cm_args+=("-DCMAKE_PREFIX_PATH=$dd/usr")
    # the .pc files say prefix=/usr: let pkg-config prefix every path with the carried root
    export PKG_CONFIG_SYSROOT_DIR=$dd
    export PKG_CONFIG_LIBDIR=$arch_lib/pkgconfig:$dd/usr/share/pkgconfig:$dd/usr/lib/pkgconfig
    export PKG_CONFIG_PATH=$PKG_CONFIG_LIBDIR
    export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
    ldp=$ldp:$arch_lib:$dd/usr/lib
    if ! command -v pkg-config >/dev/null 2>&1 && ! command -v pkgconf >/dev/null 2>&1 && [[ -x $dd/usr/bin/pkgconf ]]; then
        cm_args+=("-DPKG_CONFIG_EXECUTABLE=$dd/usr/bin/pkgconf")
        deps="$deps, its pkgconf"
    fi
fi
export LD_LIBRARY_PATH=${ldp#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rep "- build dependencies: $deps"

data=${KHOST_DATA:-$repo/data}
mirror=""
for m in "$repo/.cache/gpu-data" "$repo/../shared/datasets"; do
    [[ -z $mirror && -f $m/SHA256SUMS ]] && mirror=$m
done
data_state="not installed"
if [[ -n $mirror ]]; then
    say "installing data from $mirror into $data"
    if KHOST_FETCH_OFFLINE=1 "$repo/tools/fetch-datasets" --mirror "$mirror" --data "$data" mnist cifar10 imdb nietzsche \
        >>"$out/build.log" 2>&1; then
        data_state="from $mirror"
    else
        data_state="fetch-datasets FAILED (see build.log)"
    fi
elif [[ -d $data ]]; then
    data_state="already in $data"
fi
export KHOST_DATA=$data
rep "- data: $data ($data_state)"

t0=$(date +%s)
say "configuring and building in $build ($(nproc) jobs)"
{
    echo "cmake ${cm_args[*]}"
    timeout 180 cmake -S "$repo" -B "$build" "${cm_args[@]}" && timeout 300 cmake --build "$build" -j "$(nproc)"
} >>"$out/build.log" 2>&1
build_rc=$?
build_s=$(($(date +%s) - t0))
cuda_built=$(grep -o 'cntk: GPU path with[^,]*' "$out/build.log" | head -1)
tf_built=$(grep -q 'tensorflow: GPU path with' "$out/build.log" && echo "tensorflow GPU path built" || echo "tensorflow GPU path NOT built")
khost=$build/khost
if ((build_rc != 0)) || [[ ! -x $khost ]]; then
    sum "build: FAILED after ${build_s} s (rc $build_rc) — see build.log:"
    while IFS= read -r l; do sum "  $l"; done < <(grep -E 'error|Error|FATAL' "$out/build.log" | head -8)
    failed=1
else
    sum "build: ok in ${build_s} s, sm_${KHOST_CUDA_ARCHS:-90}; ${cuda_built:-GPU path NOT built (no CUDA toolkit/cuDNN)}; $tf_built"
fi
rep "- build: rc $build_rc in ${build_s} s; ${cuda_built:-GPU path not built}; $tf_built"

# --- 3. devices, tests, verify ----------------------------------------------------------------------------
have_gpu=0
devices="(khost not built)"
if [[ -x $khost ]]; then
    devices=$("$khost" --list-devices 2>&1)
    grep -q '^cuda:0' <<<"$devices" && have_gpu=1
    # the plugin must agree: its caps line for cuda
    caps=$("$khost" --list 2>&1 | sed -n '/^  cntk /,/^  [a-z]/p' | grep -E '^ +cuda ' | head -1 | sed 's/^ *//')
    tf_caps=$("$khost" --list 2>&1 | sed -n '/^  tensorflow /,/^  [a-z]/p' | grep -E '^ +cuda ' | head -1 | sed 's/^ *//')
    rep ""
    rep "## Devices"
    rep '```'
    rep "$devices"
    rep "cntk: $caps"
    rep "tensorflow: $tf_caps"
    rep '```'
    echo "$devices"
fi
if ((have_gpu)); then
    sum "device: $(grep '^cuda:0' <<<"$devices" | head -1 | sed 's/  */ /g')"
else
    sum "device: no CUDA device — $(grep -o '(no CUDA device[^)]*)' <<<"$devices" | head -1)"
fi

tests_line="tests: skipped (no build)"
if [[ -x $khost ]] && ! over_budget 60; then
    cpu_side='test_cntk_rnnmap|test_cntk_gpu_caps|test_tf_cuda_plan|test_tf_cuda_geom|test_tf_gpu_caps'
    say "ctest -L gpu (but verify); ctest -R '$cpu_side'"
    # test_cntk_gpu_verify and test_tf_gpu_verify are khost verify, which step 3b runs itself (with its own log)
    (cd "$build" && timeout 300 ctest -L gpu -E 'test_cntk_gpu_verify|test_tf_gpu_verify' --output-on-failure \
        --timeout 240 && timeout 60 ctest -R "$cpu_side" --output-on-failure) >"$out/tests.log" 2>&1
    trc=$?
    names() { grep -E "Test +#[0-9]+: .*$1" "$out/tests.log" | sed -E 's/.*: ([A-Za-z0-9_]+) .*/\1/' | tr '\n' ' '; }
    t_pass=$(names ' Passed') t_fail=$(names 'Failed|Timeout|Exception') t_skip=$(names 'Skipped|Not Run')
    gpu_ok=$(grep -oE 'test_(cntk|tf)_gpu_ref' <<<"$t_pass" | tr '\n' ' ')
    tests_line="tests (ctest -L gpu; rnnmap, gpu caps, tensorflow layout/geometry): passed: ${t_pass:-none}; failed: ${t_fail:-none}; skipped: ${t_skip:-none}"
    ((trc != 0)) && failed=1
    ((have_gpu)) && { [[ $gpu_ok != *test_cntk_gpu_ref* ]] || [[ $gpu_ok != *test_tf_gpu_ref* ]]; } && failed=1
    grep -E '^FAIL|Failed|out-of-memory message|seed ' "$out/tests.log" | head -12 >>"$out/tests.excerpt" || true
fi
sum "$tests_line"
if [[ -f $out/tests.excerpt ]]; then
    while IFS= read -r l; do sum "  $l"; done <"$out/tests.excerpt"
    rm -f "$out/tests.excerpt"
fi
rep ""
rep "## Tests"
rep "$tests_line"

# verify_on PLUGIN TIMEOUT ARGS... — khost verify on cuda:0, appended to verify.log; sets verify_line
verify_on() {
    local plugin=$1 to=$2 vrc fails tmp=$out/verify.part
    shift 2
    say "khost verify --plugin $plugin --device cuda:0 $*"
    timeout "$to" "$khost" verify --plugin "$plugin" --device cuda:0 "$@" >"$tmp" 2>&1
    vrc=$?
    { echo "== khost verify --plugin $plugin --device cuda:0 $*"; cat "$tmp"; } >>"$out/verify.log"
    verify_line="verify $plugin cuda:0: $(grep -E '^summary:' "$tmp" | tail -1) (rc $vrc)"
    ((vrc != 0)) && failed=1
    fails=$(grep -E ' FAIL$' "$tmp" | head -6)
    [[ -n $fails ]] && verify_line="$verify_line"$'\n'"$(sed 's/^/  /' <<<"$fails")"
    rm -f "$tmp"
}
verify_lines=()
for v in cntk tensorflow; do
    verify_line="verify $v cuda:0: skipped (no CUDA device)"
    if ((have_gpu)) && ! over_budget 150; then
        if [[ $v == cntk ]]; then verify_on cntk 200; else verify_on tensorflow 200 --task all; fi
    elif ((have_gpu)); then
        verify_line="verify $v cuda:0: SKIPPED (time budget)"
        failed=1
    fi
    sum "$verify_line"
    verify_lines+=("$verify_line")
done
rep ""
rep "## khost verify --device cuda:0 (cntk; tensorflow --task all)"
rep '```'
for l in "${verify_lines[@]}"; do rep "$l"; done
rep '```'

# --- 4. the short matrix ----------------------------------------------------------------------------------
results=$build/gpu-check-results
rm -rf "$results"
if ((have_gpu)); then
    mx_devices="cuda:0,cpu" lt=${GPU_CHECK_LIMIT_TRAIN:-10000} lv=${GPU_CHECK_LIMIT_VAL:-2000} cell_to=75
else
    mx_devices="cpu" lt=256 lv=128 cell_to=60 # rehearsal: prove the pipeline, quickly
fi
# tensorflow's cells: cuda:0 only on a GPU (its CPU path is verified elsewhere and would not fit the box);
# the rehearsal's tiny cpu cells for both plugins
# (smaller sets: an unrolled LSTM is thousands of launches per batch)
tf_devices=$( ((have_gpu)) && echo "cuda:0" || echo "cpu")
tlt=$( ((have_gpu)) && echo "${GPU_CHECK_TF_LIMIT_TRAIN:-2000}" || echo "$lt")
tlv=$( ((have_gpu)) && echo "${GPU_CHECK_TF_LIMIT_VAL:-500}" || echo "$lv")
matrix_line="matrix: skipped"
if [[ -x $khost ]] && ! over_budget 120; then
    : >"$out/matrix.log"
    say "khost matrix --plugins cntk --tasks all --devices $mx_devices --epochs 2 --limit-train $lt --limit-val $lv"
    timeout 330 "$khost" matrix --plugins cntk --tasks all --devices "$mx_devices" --epochs 2 --limit-train "$lt" \
        --limit-val "$lv" --timeout "$cell_to" --out "$results" >>"$out/matrix.log" 2>&1
    mrc=$?
    matrix_line="matrix (cntk x 6 tasks x $mx_devices, 2 epochs, <= $lt train / $lv val samples): rc $mrc"
    ((have_gpu && mrc != 0)) && failed=1
    if ! over_budget 60; then
        say "khost matrix --plugins tensorflow --tasks all --devices $tf_devices --epochs 2 --limit-train $tlt --limit-val $tlv"
        timeout 240 "$khost" matrix --plugins tensorflow --tasks all --devices "$tf_devices" --epochs 2 \
            --limit-train "$tlt" --limit-val "$tlv" --timeout "$cell_to" --out "$results" >>"$out/matrix.log" 2>&1
        trc=$?
        matrix_line="$matrix_line; tensorflow x 6 tasks x $tf_devices (<= $tlt train / $tlv val): rc $trc"
        ((have_gpu && trc != 0)) && failed=1
    else
        matrix_line="$matrix_line; tensorflow: SKIPPED (time budget: $(elapsed) s used of $budget)"
        ((have_gpu)) && failed=1
    fi
    "$khost" report "$results" >"$out/report.tables" 2>&1 || true
elif [[ -x $khost ]]; then
    matrix_line="matrix: SKIPPED (time budget: $(elapsed) s used of $budget)"
    ((have_gpu)) && failed=1
fi
sum "$matrix_line"
if [[ -f $out/matrix.log ]]; then
    while IFS= read -r l; do sum "  $l"; done < <(grep -E '^\[[0-9]+/[0-9]+\]|^matrix: [0-9]+ of' "$out/matrix.log" |
        grep -v ' \.\.\.$' | sed -E 's/^\[[0-9]+\/[0-9]+\] //; s/ log: .*//')
fi
rep ""
rep "## Matrix"
rep '```'
[[ -f $out/matrix.log ]] && cat "$out/matrix.log" >>"$report"
rep '```'
if [[ -f $out/report.tables ]]; then
    rep ""
    rep "## khost report"
    rep '```'
    cat "$out/report.tables" >>"$report"
    rep '```'
    rm -f "$out/report.tables"
fi
[[ -d $results ]] && tar -czf "$out/results.tar.gz" -C "$(dirname "$results")" "$(basename "$results")" 2>/dev/null

# --- 5. summary -------------------------------------------------------------------------------------------
total=$(elapsed)
if ((have_gpu)); then
    verdict=$( ((failed)) && echo "FAILED" || echo "PASSED")
else
    verdict="no CUDA device: GPU tests skipped, CPU parts built and run (rehearsal)"
    ((failed)) && verdict="FAILED before reaching the GPU steps (no CUDA device)"
fi
{
    echo "== gpu-check summary ($total s; files in $out) =="
    echo "gpu: $gpu_line; cuDNN ${cudnn_lib:-none} (${cudnn_from:-not found}); cuBLAS from $cublas_from"
    printf '%s\n' "${summary[@]}"
    echo "result: $verdict"
} >"$out/summary.txt"
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
((failed)) && exit 1
exit 0
