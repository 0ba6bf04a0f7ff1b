#!/usr/bin/env bash
# The lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...) checked by clang's
# -Wthread-safety: every Conduit source in the build (not generated code), compiled
# -fsyntax-only with the flags CMake gave g++, in parallel. Exit 1 with clang's diagnostics when
# a guarded field is touched without its mutex.
#
# Usage: check-thread-safety.sh BUILD_DIR [JOBS]
set -euo pipefail
build="${1:?build dir}"
jobs="${2:-$(nproc)}"
clang="$(command -v clang++ || command -v clang++-14 || true)"
if [ -z "$clang" ]; then
  echo "clang++ not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
/usr/bin/python3 - "$build" "$clang" "$jobs" <<'PY'
import json, os, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

build, clang, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
entries = json.load(open(os.path.join(build, "compile_commands.json")))
# Output and dependency-file flags are the build's business: -fsyntax-only writes nothing, and
# must not overwrite ninja's .d files.
DROP_WITH_VALUE = ("-o", "-MT", "-MF", "-MQ")
DROP = ("-c", "-MD", "-MMD")
def command(e):
    args = shlex.split(e["command"])[1:]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in DROP_WITH_VALUE:
            skip = True
            continue
        if a in DROP or a == e["file"]:
            continue
        out.append(a)
    return [clang, "-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety",
            "-Wno-unknown-warning-option", *out, e["file"]], e["directory"]

todo = [e for e in entries if "/gen/" not in e["file"]]
def run(e):
    cmd, cwd = command(e)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    # Only thread-safety findings fail the check; other clang warnings are g++'s business.
    bad = p.returncode != 0
    return e["file"], bad, p.stderr
failed = 0
with ThreadPoolExecutor(jobs) as pool:
    for path, bad, err in pool.map(run, todo):
        if bad:
            failed += 1
            print(err)
print(f"thread-safety: {len(todo) - failed} of {len(todo)} sources clean")
sys.exit(1 if failed else 0)
PY
