#!/bin/bash
# tools/bench-compare end to end with stand-in builds: each "build" is a script that answers `matrix` by
# writing repetition records (khost_record 2, samples) with a known time per step and hands every other
# command (report, compare) to the real khost. One build against itself must come out all "unchanged"; a
# build 30 % slower on one cell must be found, and --fail-above 10 must make the exit status 1.
# Usage: test_bench_compare.sh KHOST SOURCE_DIR
khost=$1 src=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# stub SLOWDOWN_OF_CNTK: a khost whose matrix writes 5 repetitions of cntk and theano on mnist_mlp
stub() {
    cat >"$tmp/$1" <<STUB
#!/bin/bash
if [ "\$1" != matrix ]; then exec "$khost" "\$@"; fi
out= repeat=
while [ \$# -gt 0 ]; do case "\$1" in --out) out=\$2; shift 2 ;; --repeat) repeat=\$2; shift 2 ;; *) shift ;; esac; done
mkdir -p "\$out/mnist_mlp"
for p in cntk theano; do
  for k in \$(seq 1 \$repeat); do
    base=0.010; [ \$p = theano ] && base=0.020
    f=1; [ \$p = cntk ] && f=$2
    # a per-repetition wobble of about 1 %, different in each build (its seed): the same true time
    w=\$(awk -v k=\$k -v s=$3 'BEGIN{srand(k*7+s); print 1+0.02*(rand()-0.5)}')
    st=\$(awk -v b=\$base -v f=\$f -v w=\$w 'BEGIN{printf "%.6g", b*f*w}')
    printf '{"khost_record":2,"plugin":"%s","task":"mnist_mlp","device":"cpu","status":"ok","mean_epoch_s":%s,"samples":{"step_s":[%s,%s,%s],"step_sync":"device"},"repeat":{"index":%d,"of":%d,"round":%d}}\n' \
      \$p \$st \$st \$st \$st \$k \$repeat \$k >"\$out/mnist_mlp/\${p}__cpu.rep\$k.json"
  done
done
STUB
    chmod +x "$tmp/$1"
}
stub same 1 1
stub same2 1 2
stub slower 1.3 3
"$src/tools/bench-compare" --base "$tmp/same" --new "$tmp/same2" --tasks mnist_mlp --repeat 5 --out "$tmp/self" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && ok || bad "self-check exit $rc: $(cat "$tmp/err")"
grep -q "faster 0, slower 0, unchanged 2, too noisy to tell 0, inconclusive 0, missing 0." "$tmp/self/compare.md" && ok ||
    bad "self-check not all unchanged: $(cat "$tmp/self/compare.md" 2>/dev/null)"
[ -s "$tmp/self/compare.json" ] && [ -s "$tmp/self/compare.html" ] && [ -s "$tmp/self/base.md" ] && [ -s "$tmp/self/new.html" ] && ok ||
    bad "outputs missing: $(ls "$tmp/self")"
grep -q "Time per step" "$tmp/self/base.md" && ok || bad "report of BASE has no step table"
"$src/tools/bench-compare" --base "$tmp/same" --new "$tmp/slower" --tasks mnist_mlp --fail-above 10 --out "$tmp/slow" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && ok || bad "a 30 % slowdown with --fail-above 10: exit $rc: $(cat "$tmp/err")"
grep -q "^| mnist_mlp | cntk | cpu | step | .* | \*\*slower\*\* |" "$tmp/slow/compare.md" && grep -q "^| mnist_mlp | theano | cpu | step | .* | unchanged |" "$tmp/slow/compare.md" && ok ||
    bad "verdicts: $(cat "$tmp/slow/compare.md")"
"$src/tools/bench-compare" --tasks mnist_mlp >/dev/null 2>&1
[ $? -eq 2 ] && ok || bad "no --out: usage"
echo "bench_compare: $pass passed, $fail failed"
[ $fail -eq 0 ]
