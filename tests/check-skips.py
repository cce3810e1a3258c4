#!/usr/bin/env python3
"""Fails when ctest skipped a test that the allowed list does not name.

    tests/check-skips.py JUNIT.xml tests/allowed-skips.txt

JUNIT.xml is ctest's --output-junit report. A test counts as skipped when its
testcase carries <skipped> or has status notrun/disabled (a SKIP_RETURN_CODE
exit, a DISABLED property, a missing fixture). The allowed list holds lines
"TEST-NAME: reason"; '#' starts a comment. A test can thus only skip in the
test command when someone wrote down why.
"""
import sys
import xml.etree.ElementTree as ET


def allowed_skips(path):
    allowed = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, reason = line.partition(":")
            if not sep or not reason.strip():
                sys.exit(f"{path}:{number}: want 'TEST-NAME: reason', got {line!r}")
            allowed[name.strip()] = reason.strip()
    return allowed


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    report, listing = sys.argv[1], sys.argv[2]
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"check-skips: cannot read the ctest report {report}: {e}")
    allowed = allowed_skips(listing)
    cases = root.iter("testcase")
    total, skipped, unexplained = 0, [], []
    for case in cases:
        total += 1
        name = case.get("name", "?")
        if case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            skipped.append(name)
            if name not in allowed:
                unexplained.append(name)
    if total == 0:
        sys.exit(f"check-skips: {report} lists no test at all")
    for name in skipped:
        note = allowed.get(name)
        print(f"check-skips: {name} skipped" + (f" (allowed: {note})" if note else " (NOT on the allowed list)"))
    if unexplained:
        sys.exit(f"check-skips: {len(unexplained)} of {total} tests skipped without a reason in {listing}: "
                 + ", ".join(unexplained))
    print(f"check-skips: {total} tests, {len(skipped)} skipped, all on the allowed list" if skipped
          else f"check-skips: {total} tests ran, none skipped")


if __name__ == "__main__":
    main()
