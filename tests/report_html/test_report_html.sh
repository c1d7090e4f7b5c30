#!/usr/bin/env bash
# tests/report_html/test_report_html.sh KHOST_BIN FIXTURE_DIR OUT_DIR — `khost report --html` of a fixture
# results folder, checked by an XML parser, libxml2's HTML parser and a real browser (Debian's headless
# chromium): the page is rendered to a screenshot and to the DOM after its script ran, and the DOM must hold
# every table and chart. Exit 77 (skipped) only when chromium is absent and cannot be installed.
set -uo pipefail
khost=$1 data=$2 out=$3
mkdir -p "$out"
page=$out/report.html dom=$out/report.dom.html png=$out/report.png log=$out/chromium.log
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# 1. the page; the registry beside the binary gives the task modules' published figures
rm -f "$page"
"$khost" report "$data" --html "$page" >/dev/null 2>"$out/report.err"
rc=$?
# the fixture holds crashed/timeout cells on purpose: report's own exit status is about files, 0 here
[ $rc -eq 0 ] && ok || bad "khost report exited $rc: $(cat "$out/report.err")"
[ -s "$page" ] && ok || { bad "no page written"; echo "test_report_html: $pass passed, $fail failed"; exit 1; }

# 2. self-contained: nothing fetched from the network or another file (the SVG namespace is a name, not a load)
if grep -Eqi '<link|src=|url\(|@import|href="(https?:|//|file:)' "$page"; then bad "page refers to external resources"; else ok; fi

# 3. validators: well-formed XML (strict), and libxml2's HTML parser with no error except that its HTML 4
# element table does not know HTML5 sectioning and SVG elements
if xmllint --noout "$page" 2>"$out/xml.err"; then ok; else bad "not well-formed: $(head -3 "$out/xml.err")"; fi
xmllint --html --noout "$page" 2>"$out/html.err"
other=$(grep -E 'error|warning' "$out/html.err" |
        grep -Ev 'Tag (svg|rect|text|line|polyline|circle|title|figure|figcaption|nav|section|details|summary) invalid' || true)
[ -z "$other" ] && ok || bad "xmllint --html: $other"

# 4. a real browser
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ] && [ -x "${KHOST_SOURCE:-}/tools/install-deps" ] && [ -z "${KHOST_TEST_NO_INSTALL:-}" ]; then
    "$KHOST_SOURCE/tools/install-deps" >"$out/install.log" 2>&1 || true
    chromium=$(command -v chromium || command -v chromium-browser || true)
fi
if [ -z "$chromium" ]; then
    echo "SKIP: chromium is not installed and tools/install-deps could not install it ($(tail -1 "$out/install.log" 2>/dev/null))"
    exit 77
fi
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --disable-extensions
       --enable-logging=stderr --v=0 --virtual-time-budget=3000)
export HOME=${TMPDIR:-/tmp}/khost-chromium-$$ XDG_CONFIG_HOME= XDG_CACHE_HOME=
mkdir -p "$HOME"
url="file://$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"
timeout 120 "$chromium" "${flags[@]}" --dump-dom "$url" >"$dom" 2>"$log"
[ -s "$dom" ] && ok || bad "chromium --dump-dom gave nothing: $(tail -5 "$log")"
timeout 120 "$chromium" "${flags[@]}" --window-size=1400,2400 --screenshot="$png" "$url" >>"$log" 2>&1
if [ -s "$png" ] && [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
   [ "$(stat -c %s "$png")" -gt 20000 ]; then ok; else bad "no screenshot (or a blank one) at $png"; fi
rm -rf "$HOME"

# 5. the DOM after the script ran: the script marks the page with its task count, so a script error fails
tasks=$(find "$data" -mindepth 1 -maxdepth 1 -type d | wc -l)
grep -q "data-ready=\"$tasks\"" "$dom" && ok || bad "the page's script did not run to its end (data-ready != $tasks)"
if grep -Eq 'Uncaught|SyntaxError|ReferenceError|TypeError' "$log"; then bad "script errors: $(grep -E 'Uncaught|Error' "$log" | head -3)"; else ok; fi
count() { grep -o "$1" "$dom" | wc -l; }
[ "$(count '<section class="task"')" -eq "$tasks" ] && ok || bad "sections: $(count '<section class="task"') of $tasks"
[ "$(count '<table class="accuracy"')" -eq "$tasks" ] && ok || bad "accuracy tables: $(count '<table class="accuracy"')"
[ "$(count '<table class="time"')" -eq "$tasks" ] && ok || bad "time tables: $(count '<table class="time"')"
[ "$(count 'class="chart time-chart"')" -eq "$tasks" ] && ok || bad "time charts: $(count 'class="chart time-chart"')"
[ "$(count 'class="chart curve-chart"')" -eq "$tasks" ] && ok || bad "learning-curve charts: $(count 'class="chart curve-chart"')"
[ "$(count '<rect class="bar"')" -ge 5 ] && ok || bad "bars: $(count '<rect class="bar"')"
[ "$(count '<polyline class="curve"')" -ge 5 ] && ok || bad "curves: $(count '<polyline class="curve"')"
grep -q '<table class="published"' "$dom" && ok || bad "no published figures (mnist_cnn has them)"
grep -q 'GFLOP/s, [0-9.]*% of roofline' "$dom" && ok || bad "no GFLOP/s with roofline fraction"
grep -q 'pytorch <span class="ref">(reference)</span>' "$dom" && ok || bad "the reference row is not marked"
grep -q 'signal 11 (Segmentation fault)' "$dom" && ok || bad "the crashed cell's reason is missing"
grep -q '&lt;script&gt;alert' "$dom" && ! grep -q '<script>alert' "$dom" && ok || bad "a reason's markup was not escaped"
grep -q '<details class="environment"' "$dom" && grep -q 'cpu_model' "$dom" && ok || bad "no environment"
# model-compile time (ABI 1.2 records in mnist_cnn's cpu column only): a column beside cpu's time per epoch and
# the explanation, in mnist_cnn alone (lstm_text_generation's records predate it: no column of dashes)
[ "$(count '<th class="compile">cpu compile cold/warm</th>')" -eq 1 ] && ok || bad "compile columns: $(count '<th class="compile">')"
[ "$(count '<th class="compile">')" -eq 1 ] && ok || bad "a compile column where no record has compile times"
[ "$(count '<p class="compile-note">compile: model-compile time before the first epoch')" -eq 1 ] && ok ||
    bad "compile explanations: $(count '<p class="compile-note">')"
grep -q '<td class="compile" title="cache miss, 12 generated units; codegen 0.81 s; C compiler / NVRTC 40.1 s; load 0.33 s">41.2 / 0.351</td>' "$dom" &&
    ok || bad "theano's cold / warm compile cell with its split"
grep -q '<td class="compile">&lt;0.001</td>' "$dom" && ok || bad "cntk's compile time (no generated code)"
[ "$(count '<td class="compile">—</td>')" -ge 2 ] && ok || bad "records without compile times must read —"
echo "test_report_html: $pass passed, $fail failed (page $page, screenshot $png)"
[ $fail -eq 0 ]
