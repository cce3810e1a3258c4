#!/usr/bin/env bash
# tests/check-docs.py on made-up repositories: a README naming a file, a flag
# or a label the tree lacks fails, naming each; one naming what exists passes.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
make_repo() { # dir readme-text
  mkdir -p "$1/lib/include/tally/lib" "$1/lib/src"
  echo '#include "x"  // --real-flag' >"$1/lib/src/a.cpp"
  echo '// header' >"$1/lib/include/tally/lib/a.hpp"
  echo 'set_tests_properties(t PROPERTIES LABELS "lib;concurrent")' >"$1/CMakeLists.txt"
  printf '%s\n' "$2" >"$1/README.md"
  git -C "$1" init -q && git -C "$1" add -A
}
make_repo "$work/good" 'See `lib/src/a.cpp`, `lib/a.hpp`, `tally/lib/a.hpp`, `--real-flag`; labels `lib`, `concurrent`.'
make_repo "$work/bad" 'See `lib/src/gone.cpp` and `--no-such-flag`; labels `lib`, `vanished`.'
"$here/check-docs.py" "$work/good" >"$work/out" 2>&1 || { echo "FAIL: a README naming what exists"; cat "$work/out"; fails=$((fails + 1)); }
if "$here/check-docs.py" "$work/bad" >"$work/out" 2>&1; then
  echo "FAIL: a README naming what does not exist passed"; fails=$((fails + 1))
fi
for needle in 'lib/src/gone.cpp' '--no-such-flag' 'label `vanished`'; do
  grep -qF -- "$needle" "$work/out" || { echo "FAIL: not named: $needle"; cat "$work/out"; fails=$((fails + 1)); }
done
# And the repository's own READMEs.
"$here/check-docs.py" "$here/.." || fails=$((fails + 1))
((fails == 0)) && echo "check-docs: all cases pass"
exit $((fails > 0))
