# shellcheck shell=bash
# tools/gpu-check-lib.sh — sourced by tools/gpu-check.sh (not run by itself): the prerequisite check that
# runs before anything else, the time box of the whole run, and a summary that is on disk at every moment.
#
# Time box: one GPU run is killed at 600 s. gc_timeout WANT gives a step min(WANT, what is left before
# GPU_CHECK_LIMIT (default 560 s) minus GC_RESERVE for the final summary); a step that would get less than
# GC_MIN_STEP seconds does not start. So the sum of the steps can never pass the limit, whatever each wants.
# Every step runs under gc_run: `timeout -k GC_KILL_GRACE`, so a process that ignores SIGTERM inside a driver
# call is killed GC_KILL_GRACE s later, and gc_timeout keeps that grace inside the box too.
# A step the box cuts (gc_timeout 0, or its command killed by timeout: status 124/137) is "NOT REACHED",
# recorded apart from failures (gc_not_reached): the verdict then says what was not reached, not FAILED.
# Summary: gc_sum appends a line and rewrites summary.txt at once (temporary file + rename), marked "in
# progress" until gc_finish writes the verdict — a run killed at any point leaves what it had learned.

GC_RESERVE=${GC_RESERVE:-15}
GC_MIN_STEP=${GC_MIN_STEP:-10}
GC_KILL_GRACE=${GC_KILL_GRACE:-5}
# every step's cap times this (GPU_CHECK_CAP_SCALE): the rehearsal's 2 loaded cores are slower than the H200's 16
GC_CAP_SCALE=${GPU_CHECK_CAP_SCALE:-1}
gc_nr=""
gc_summary=()
gc_head=""

gc_init() { # OUTDIR
    gc_out=$1
    gc_t0=$(date +%s)
    gc_limit=${GPU_CHECK_LIMIT:-560}
    gc_summary=()
    gc_write "in progress"
}

gc_elapsed() { echo $(($(date +%s) - gc_t0)); }

# gc_timeout WANT — seconds the next step may take (0: too little time left, skip it)
gc_timeout() {
    local left=$((gc_limit - GC_RESERVE - GC_KILL_GRACE - $(gc_elapsed)))
    local t=$(($1 * GC_CAP_SCALE))
    ((left < t)) && t=$left
    ((t < GC_MIN_STEP)) && t=0
    echo "$t"
}

# gc_run TIMEOUT CMD... — CMD under timeout, SIGKILL GC_KILL_GRACE s after the SIGTERM it ignores
gc_run() {
    local to=$1
    shift
    timeout -k "$GC_KILL_GRACE" "$to" "$@"
}

# gc_cut RC — true when RC is timeout's (124: TERM honoured; 137: KILLed after the grace)
gc_cut() { (($1 == 124 || $1 == 137)); }

# gc_not_reached STEP — the time box cut STEP (or did not let it start): a summary line, not a failure
gc_not_reached() {
    gc_nr="${gc_nr:+$gc_nr, }$1"
    gc_sum "$1: NOT REACHED (time box: $(gc_elapsed) s used of $gc_limit)"
}

# gc_verdict FAILED HAVE_GPU — PASSED, FAILED, or INCOMPLETE naming the steps not reached
gc_verdict() {
    if (($1)); then
        echo "FAILED${gc_nr:+ (also not reached: $gc_nr)}"
    elif [[ -n $gc_nr ]]; then
        echo "INCOMPLETE: nothing failed; not reached (time box): $gc_nr"
    else
        echo "PASSED"
    fi
}

gc_write() { # STATE — rewrite summary.txt atomically
    local tmp=$gc_out/.summary.txt.tmp
    {
        echo "== gpu-check summary ($1; $(gc_elapsed) s of a $gc_limit s limit; files in $gc_out) =="
        if [[ -n $gc_head ]]; then echo "$gc_head"; fi
        if ((${#gc_summary[@]})); then printf '%s\n' "${gc_summary[@]}"; fi
    } >"$tmp" && mv -f "$tmp" "$gc_out/summary.txt"
}

gc_sum() { # LINE... — one summary line each, written to disk at once
    local l
    for l in "$@"; do gc_summary+=("$l"); done
    gc_write "in progress"
}

gc_finish() { # VERDICT
    gc_summary+=("result: $1")
    gc_write "finished"
}

# gc_prereqs REPO DEVDEPS DATA — what the build and the data need, checked in seconds before anything runs.
# Prints one line per missing piece with the command that prepares it; returns 1 when something is missing.
# Uses the carried prefix DEVDEPS (.devdeps) when present, else the system (pkg-config); the data must be
# either the carried mirror (.cache/gpu-data with its checksums) or already installed in DATA.
gc_prereqs() {
    local repo=$1 dd=$2 data=$3 miss=() have_pc=0 f
    command -v cmake >/dev/null 2>&1 || miss+=("cmake: not found (the GPU machine has it; here: apt-get install cmake)")
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 ||
        miss+=("a C compiler (cc/gcc): not found (apt-get install gcc)")
    command -v pkg-config >/dev/null 2>&1 || command -v pkgconf >/dev/null 2>&1 ||
        [[ -x $dd/usr/bin/pkgconf ]] && have_pc=1
    ((have_pc)) || miss+=("pkg-config: neither on PATH nor $dd/usr/bin/pkgconf (tools/make-devdeps-extra.sh)")
    local need=("inih:usr/include/ini.h:usr/lib/x86_64-linux-gnu/libinih.a:../shared/device/make-devdeps.sh"
                "libjpeg:usr/include/jpeglib.h:usr/lib/x86_64-linux-gnu/libjpeg.a:../shared/device/make-devdeps.sh"
                "zlib:usr/include/zlib.h:usr/lib/x86_64-linux-gnu/libz.a:../shared/device/make-devdeps.sh"
                "libpng:usr/include/png.h:usr/lib/x86_64-linux-gnu/libpng.a:../shared/device/make-devdeps.sh"
                "cJSON:usr/include/cjson/cJSON.h:usr/lib/x86_64-linux-gnu/libcjson.so:tools/make-devdeps-extra.sh"
                "libmd:usr/include/sha2.h:usr/lib/x86_64-linux-gnu/libmd.so:tools/make-devdeps-extra.sh")
    local item name hdr lib how
    for item in "${need[@]}"; do
        IFS=: read -r name hdr lib how <<<"$item"
        if [[ -d $dd/usr ]]; then
            [[ -f $dd/$hdr && -e $dd/$lib ]] && continue
            miss+=("$name: not in $dd (missing $hdr or $lib); prepare it with $how .devdeps on a networked machine and carry .devdeps")
        else
            [[ -f /$hdr || -f /usr/include/x86_64-linux-gnu/${hdr##*/} ]] && continue
            miss+=("$name: no $dd and not installed (/$hdr); prepare .devdeps with $how on a networked machine and carry it")
        fi
    done
    local mirror=$repo/.cache/gpu-data ds ok_data=1
    if [[ -f $mirror/SHA256SUMS ]]; then
        while read -r _ f; do
            [[ -n $f ]] || continue
            f=${f#\*}
            [[ -f $mirror/$f ]] || { miss+=("data: $mirror/$f listed in SHA256SUMS but missing (rerun tools/make-devdeps-extra.sh)"); ok_data=0; }
        done < <(grep -E 'mnist/|cifar-10-jpg|aclImdb-labeled|nietzsche' "$mirror/SHA256SUMS")
    else
        for ds in mnist cifar10 imdb nietzsche; do
            [[ -f $data/$ds/.khost-installed ]] || ok_data=0
        done
        ((ok_data)) || miss+=("data: no carried mirror ($mirror/SHA256SUMS) and $data lacks some of mnist cifar10 imdb nietzsche; run tools/make-devdeps-extra.sh and carry .cache/gpu-data")
    fi
    if ((${#miss[@]})); then
        printf '%s\n' "${miss[@]}"
        return 1
    fi
    return 0
}

# gc_cublas_dir CUDA_ROOT — the directory of the toolkit's cuBLAS (lib64 or lib, or targets/*/lib), empty
# when the toolkit has none. Each candidate is tested on its own: a glob over two directories fails as a
# whole when either lacks the file.
gc_cublas_dir() {
    local root=$1 d
    for d in "$root/lib64" "$root/lib" "$root"/targets/*/lib; do
        compgen -G "$d/libcublas.so*" >/dev/null && { echo "$d"; return 0; }
    done
    return 1
}

# gc_nvrtc_lib CUDA_ROOT SITE — the NVRTC library theano's GPU path loads (libnvrtc.so.<major>): the toolkit's
# (lib64, lib, targets/*/lib, each on its own), else one of NVIDIA's pip wheels under SITE (nvidia/*/lib);
# empty with status 1 when neither has one. Never libnvrtc-builtins or the .alt variant.
gc_nvrtc_lib() {
    local root=$1 site=$2 d f
    for d in "$root/lib64" "$root/lib" "$root"/targets/*/lib "$site"/nvidia/*/lib; do
        [[ -d $d ]] || continue
        f=$(compgen -G "$d/libnvrtc.so.[0-9]*" | sort | head -1)
        [[ -n $f ]] && { echo "$f"; return 0; }
    done
    return 1
}

# gc_prereq_missing LOG — the tests of a verbose ctest log (ctest -V: each output line prefixed "N: ") whose
# output has no "prerequisites ok" line: GPU tests that failed or skipped before their CUDA open. Empty when
# every test reached it.
gc_prereq_missing() {
    awk '
        /^[0-9]+: / { n = $1; sub(/:$/, "", n); if ($0 ~ /prerequisites ok/) ok[n] = 1 }
        match($0, /Test +#[0-9]+: [A-Za-z0-9_]+/) {
            t = substr($0, RSTART, RLENGTH); sub(/^Test +#/, "", t)
            split(t, p, ": "); name[p[1]] = p[2]
        }
        END { for (n in name) if (!(n in ok)) print name[n] }
    ' "$1" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
