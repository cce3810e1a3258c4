#!/usr/bin/env bash
# tests/check-skips.py on made-up ctest reports: a skip not on the list fails,
# one on the list passes, an empty or unreadable report fails.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
expect() { # want-rc description command...
  local want="$1" what="$2"; shift 2
  "$@" >"$work/out" 2>&1
  local got=$?
  if [[ "$got" != "$want" ]]; then echo "FAIL: $what: exit $got, want $want"; cat "$work/out"; fails=$((fails + 1)); fi
}
cat >"$work/run.xml" <<'XML'
<?xml version="1.0"?><testsuite><testcase name="a" status="run"/><testcase name="b" status="run"/></testsuite>
XML
cat >"$work/skip.xml" <<'XML'
<?xml version="1.0"?><testsuite><testcase name="a" status="run"/><testcase name="b" status="run"><skipped message="SKIP_RETURN_CODE=77"/></testcase></testsuite>
XML
cat >"$work/notrun.xml" <<'XML'
<?xml version="1.0"?><testsuite><testcase name="c" status="notrun"/></testsuite>
XML
echo '<?xml version="1.0"?><testsuite></testsuite>' >"$work/empty.xml"
: >"$work/none.txt"
echo "b: needs a GPU" >"$work/b.txt"
echo "b" >"$work/bad.txt"
expect 0 "every test ran" "$here/check-skips.py" "$work/run.xml" "$work/none.txt"
expect 1 "a skip not on the list" "$here/check-skips.py" "$work/skip.xml" "$work/none.txt"
expect 0 "a skip on the list" "$here/check-skips.py" "$work/skip.xml" "$work/b.txt"
expect 1 "a test not run" "$here/check-skips.py" "$work/notrun.xml" "$work/b.txt"
expect 1 "a report with no test" "$here/check-skips.py" "$work/empty.xml" "$work/none.txt"
expect 1 "no report" "$here/check-skips.py" "$work/missing.xml" "$work/none.txt"
expect 1 "a list entry without a reason" "$here/check-skips.py" "$work/skip.xml" "$work/bad.txt"
expect 0 "the repository's list parses" "$here/check-skips.py" "$work/run.xml" "$here/allowed-skips.txt"
((fails == 0)) && echo "check-skips: 8 cases pass"
exit $((fails > 0))
