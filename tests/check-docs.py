#!/usr/bin/env python3
"""Fails naming each README statement about the tree that the tree does not bear out.

    check-docs.py REPO

A README names things three ways this checks:
  * a path in backticks (`controller/src/main.cpp`, `runtime/http/`, `e2e/cluster/up`):
    it must exist, relative to the README's directory or to the repository root;
  * a flag of Tally's binaries in backticks (`--usage-namespace`): some C++
    source, script or manifest of the repository must spell it;
  * a CTest label in a README's label list ("labels `common`, `model`, ..."):
    some CMake file must give it.
Names of other programs' flags and files (kube-apiserver's, kubectl's) are
told apart by docs-allowed.txt beside this script, one name per line with its reason.
"""
import os
import re
import subprocess
import sys

PATH_EXT = re.compile(r"\.(cpp|hpp|h|cc|py|sh|yaml|yml|json|cmake|txt|go|md|proto|env|in)$")
BACKTICK = re.compile(r"`([^`\n]+)`")


def tracked(repo):
    out = subprocess.run(["git", "-C", repo, "ls-files"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = tracked(repo)
    fileset = set(files)
    dirs = {os.path.dirname(f) for f in files}
    for f in files:
        parts = f.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    allowed = set()
    allow_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "docs-allowed.txt")
    with open(allow_file, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                allowed.add(line.split()[0])
    sources = [f for f in files if not f.endswith(".md") and not f.startswith("tests/docs-allowed")]
    corpus = []
    for f in sources:
        try:
            with open(os.path.join(repo, f), encoding="utf-8", errors="replace") as fh:
                corpus.append(fh.read())
        except (IsADirectoryError, FileNotFoundError):
            pass
    corpus = "\n".join(corpus)
    cmake = "\n".join(
        open(os.path.join(repo, f), encoding="utf-8").read()
        for f in files
        if f.endswith("CMakeLists.txt") or f.endswith(".cmake")
    )
    labels = set(re.findall(r"LABELS\s+\"?([a-z0-9_;-]+)", cmake))
    labels = {l for group in labels for l in group.split(";")}
    labels |= set(re.findall(r"LABEL\s+\"?([a-z0-9_-]+)", cmake))
    problems = []
    for readme in [f for f in files if f.endswith(".md")]:
        base = os.path.dirname(readme)
        with open(os.path.join(repo, readme), encoding="utf-8") as fh:
            text = fh.read()
        # Fenced blocks are examples of other programs' output: not claims about the tree.
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for lineno, line in enumerate(text.splitlines(), 1):
            for token in BACKTICK.findall(line):
                token = token.strip()
                for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", token):
                    # A Go test tool declares its flags by bare name (fs.String("cpu", ...)).
                    if flag in allowed or flag in corpus or f'"{flag[2:]}"' in corpus:
                        continue
                    problems.append(f"{readme}: flag {flag} is spelled by no source of the repository")
                if " " in token or token.startswith("-") or "://" in token or "*" in token or "$" in token:
                    continue
                if "<" in token or "{" in token or "=" in token or ":" in token or token.startswith("~"):
                    continue
                candidate = token.rstrip("/").lstrip("./")
                # `wire.hpp/.cpp`: a header and its source, named once.
                candidate = re.sub(r"^(.+)\.(\w+)/\.(\w+)$", r"\1.\2", candidate)
                looks_like_path = "/" in candidate and (PATH_EXT.search(candidate) or token.endswith("/"))
                if not looks_like_path or candidate in allowed:
                    continue
                if candidate.startswith("/") or candidate.startswith("build/") or "/build/" in candidate:
                    continue
                found = False
                for root in (base, ""):
                    p = os.path.normpath(os.path.join(root, candidate)) if root else candidate
                    if p in fileset or p in dirs:
                        found = True
                        break
                if not found:
                    # An include path (`tally/common/log.hpp`, `model/units.hpp` for
                    # model/include/tally/model/units.hpp) or a path below a
                    # directory the README's section is about: the tail of a path.
                    head, _, rest = candidate.partition("/")
                    spelled = {candidate, f"{head}/include/tally/{head}/{rest}"}
                    found = any(f == s or f.endswith("/" + s) for s in spelled for f in fileset | dirs)
                if not found:
                    problems.append(f"{readme}: `{token}` names no file or directory of the repository")
            m = re.search(r"labels? ((?:`[a-z0-9-]+`[ ,and]*)+)", line)
            if m:
                for label in re.findall(r"`([a-z0-9-]+)`", m.group(1)):
                    if label not in labels and label not in allowed:
                        problems.append(f"{readme}: label `{label}` is given to no test")
    if problems:
        print("READMEs name what the tree does not have:")
        for p in sorted(set(problems)):
            print("  " + p)
        return 1
    print("check-docs: every path, flag and label the READMEs name exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
