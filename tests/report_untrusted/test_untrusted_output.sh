#!/usr/bin/env bash
# tests/report_untrusted/test_untrusted_output.sh KHOST_BIN OUT_DIR — records whose every free-text field holds
# markup, quotes, Markdown structure, line breaks, control characters and bytes that are not UTF-8 (and records
# and files whose names are hostile), through every output khost writes from them: report (Markdown, SVG, HTML),
# compare (Markdown, JSON, HTML) and their stderr. The pages are opened in headless Chromium: no script of the
# payload may run and its text must show literally. Exit 77 (skipped) only when Chromium is absent and cannot be
# installed.
set -uo pipefail
khost=$1 out=$2 here=$(cd "$(dirname "$0")" && pwd)
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
rm -rf "$out" && mkdir -p "$out"
python3 "$here/make_hostile_set.py" "$out/base" && python3 "$here/make_hostile_set.py" "$out/new" ||
    { echo "FAIL: could not write the records"; exit 1; }

"$khost" report "$out/base" --svg "$out/report.svg" --html "$out/report.html" >"$out/report.md" 2>"$out/report.err"
rc=$?
# three files are refused (a plugin and a status that are not names, a file name that is not one): exit 8
[ $rc -eq 8 ] && ok || bad "report exited $rc, expected 8 (files skipped): $(head -5 "$out/report.err")"
grep -q 'evil__cpu.json: field "plugin" is not a name' "$out/report.err" && ok || bad "the hostile plugin name is not named"
grep -q 'evil2__cpu.json: field "status" is not a status word' "$out/report.err" && ok || bad "the hostile status is not named"
grep -q 'not named like a record' "$out/report.err" && ok || bad "the hostile file name is not reported"
grep -q 'future__cpu.json: record version 99 is from a newer khost' "$out/report.err" && grep -q '^| future |' "$out/report.md" &&
    ok || bad "a newer record's version is not named, or its row is missing"
grep -q '^| cntk |' "$out/report.md" && grep -q '^| theano |' "$out/report.md" && grep -q '^| tensorflow |' "$out/report.md" &&
    ok || bad "the report lost a row of a valid record"
grep -qF '\<script\>document.body.setAttribute' "$out/report.md" && ok || bad "the reason is not shown escaped in Markdown"
"$khost" compare "$out/base" "$out/new" >"$out/compare.md" 2>"$out/compare.err"
"$khost" compare "$out/base" "$out/new" --json --html "$out/compare.html" >"$out/compare.json" 2>>"$out/compare.err"
[ -s "$out/compare.json" ] && ok || bad "compare wrote no JSON: $(head -3 "$out/compare.err")"

python3 "$here/check_outputs.py" md "$out/report.md" "$out/compare.md" && ok || bad "Markdown (above)"
python3 "$here/check_outputs.py" json "$out/compare.json" && ok || bad "JSON (above)"
python3 "$here/check_outputs.py" text "$out/report.err" "$out/compare.err" "$out/report.html" "$out/report.svg" \
    "$out/compare.html" && ok || bad "stderr or a page (above)"
for page in report.html report.svg compare.html; do
    xmllint --noout "$out/$page" 2>"$out/$page.xmlerr" && ok || bad "$page is not well-formed: $(head -3 "$out/$page.xmlerr")"
done

chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ] && [ -x "${KHOST_SOURCE:-}/tools/install-deps" ] && [ -z "${KHOST_TEST_NO_INSTALL:-}" ]; then
    "$KHOST_SOURCE/tools/install-deps" >"$out/install.log" 2>&1 || true
    chromium=$(command -v chromium || command -v chromium-browser || true)
fi
if [ -z "$chromium" ]; then
    echo "SKIP: chromium is not installed and tools/install-deps could not install it; $pass checks passed, $fail failed"
    [ $fail -eq 0 ] && exit 77 || exit 1
fi
export HOME=${TMPDIR:-/tmp}/khost-chromium-$$ XDG_CONFIG_HOME= XDG_CACHE_HOME=
mkdir -p "$HOME"
for page in report.html report.svg compare.html; do
    dom=$out/$page.dom
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --disable-extensions --virtual-time-budget=3000 --dump-dom "file://$out/$page" >"$dom" 2>"$out/$page.chromium.log"
    [ -s "$dom" ] && ok || { bad "chromium gave no DOM for $page: $(tail -3 "$out/$page.chromium.log")"; continue; }
    grep -q 'data-pwned="' "$dom" && bad "$page: a record's script ran (data-pwned set)" || ok
    # the payload's elements never exist as elements, only as text
    grep -Eq '<img src=x|<svg onload|<script>document.body.setAttribute' "$dom" &&
        bad "$page: a record's markup became an element" || ok
    case $page in
    compare.html) shown='ok&lt;script&gt;' ;; # the refused status, quoted in why the cell has no verdict
    *) shown='&lt;script&gt;document.body.setAttribute' ;;
    esac
    grep -q "$shown" "$dom" && ok || bad "$page: the payload is not shown as text"
done
rm -rf "$HOME"
echo "test_untrusted_output: $pass passed, $fail failed"
[ $fail -eq 0 ]
