#!/usr/bin/env python3
"""The lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...) checked by clang's
-Wthread-safety.

When the build's compiler is clang (the default where clang is installed: CMakeLists.txt), every
Conduit source was already compiled with -Wthread-safety -Werror=thread-safety, so a violation
failed the build; this check then only confirms, from compile_commands.json, that no Conduit
source was compiled without those flags. That costs no second compile.

Otherwise (a g++ build, CXX=g++) every Conduit source in the build (not generated code) is
compiled again, by clang -fsyntax-only with the flags CMake gave g++, in parallel; exit 1 with
clang's diagnostics when a guarded field is touched without its mutex. A clean verdict is
remembered, as ccache remembers an object: the key is clang's version, the flags (with the
source and build directories made relative) and the content of the source and of every header
ninja recorded it including. Only clean verdicts are stored, so a finding is reported on every
run. CONDUIT_TSA_CACHE=0 turns the cache off; the cache lives in
$XDG_CACHE_HOME/conduit/thread-safety (~/.cache by default) and forgets entries unused for 30 days.

Usage: check_thread_safety.py BUILD_DIR [JOBS]
       check_thread_safety.py --self-test   (a violation is caught, its fix passes, uncached)
"""
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", "-Wno-unknown-warning-option"]
# Output and dependency-file flags are the build's business: -fsyntax-only writes nothing, and
# must not overwrite ninja's .d files.
DROP_WITH_VALUE = ("-o", "-MT", "-MF", "-MQ")
DROP = ("-c", "-MD", "-MMD")
KEEP_DAYS = 30


def find_clang():
    for name in ("clang++", "clang++-14"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("clang++ not found (scripts/install-deps.sh installs it)")


def clang_command(clang, entry):
    """clang's command for one compile_commands.json entry, and the object file it names."""
    args = shlex.split(entry["command"])[1:]
    out, skip, obj = [], None, None
    for a in args:
        if skip:
            if skip == "-o":
                obj = a
            skip = None
            continue
        if a in DROP_WITH_VALUE:
            skip = a
            continue
        if a in DROP or a == entry["file"]:
            continue
        out.append(a)
    return [clang, *FLAGS, *out, entry["file"]], obj


def ninja_deps(build):
    """object -> the files ninja recorded it reading (relative to the build dir or absolute);
    objects whose record is stale are left out."""
    text = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True,
                          check=False).stdout
    deps, current = {}, None
    for line in text.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            obj, _, state = line.partition(":")
            current = obj if "(VALID)" in state else None
            if current:
                deps[current] = []
        elif current:
            deps[current].append(line.strip())
    return deps


class Keys:
    """Cache keys, hashing each header once."""

    def __init__(self, clang, source_dir, build_dir):
        self.roots = sorted({os.path.realpath(source_dir), os.path.realpath(build_dir)},
                            key=len, reverse=True)
        version = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout
        self.base = hashlib.sha256(version.encode()).hexdigest()
        self.content = {}

    def relative(self, text):
        for i, root in enumerate(self.roots):
            text = text.replace(root, f"<root{i}>")
        return text

    def file_hash(self, path):
        if path not in self.content:
            try:
                with open(path, "rb") as f:
                    self.content[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                self.content[path] = None
        return self.content[path]

    def key(self, cmd, directory, files):
        h = hashlib.sha256(self.base.encode())
        h.update(self.relative(" ".join(cmd[1:])).encode())
        for f in files:
            path = f if os.path.isabs(f) else os.path.join(directory, f)
            digest = self.file_hash(path)
            if digest is None:
                return None
            h.update(f"\0{self.relative(os.path.realpath(path))}\0{digest}".encode())
        return h.hexdigest()


def cache_dir():
    if os.environ.get("CONDUIT_TSA_CACHE", "1") == "0":
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    path = os.path.join(base, "conduit", "thread-safety")
    os.makedirs(path, exist_ok=True)
    return path


def forget_old(cache):
    cutoff = time.time() - KEEP_DAYS * 86400
    for name in os.listdir(cache):
        path = os.path.join(cache, name)
        if os.path.getmtime(path) < cutoff:
            os.unlink(path)


def is_clang(compiler):
    name = os.path.basename(compiler)
    return name.startswith("clang") or "clang" in os.path.basename(os.path.realpath(compiler))


def compiler_of(entry):
    """The compiler of one compile_commands.json entry, past a launcher (ccache, cmake -E env)."""
    args = shlex.split(entry["command"])
    for a in args:
        base = os.path.basename(a)
        if base.startswith(("clang", "g++", "c++", "gcc")) or base.endswith(("g++", "clang++")):
            return a
    return args[0]


def escaped_build_check(todo):
    """None when clang compiled none of the sources (a g++ build); otherwise the sources clang
    did not compile with -Werror=thread-safety (empty: the build was the check)."""
    if not any(is_clang(compiler_of(e)) for e in todo):
        return None
    return [e["file"] for e in todo
            if not is_clang(compiler_of(e)) or "-Werror=thread-safety" not in e["command"]]


def check_build(build, jobs):
    entries = json.load(open(os.path.join(build, "compile_commands.json")))
    todo = [e for e in entries if "/gen/" not in e["file"]]
    escaped = escaped_build_check(todo)
    if escaped:
        print("thread-safety: compiled without clang's -Werror=thread-safety:")
        print("\n".join(escaped))
        return 1
    if escaped is not None:
        print(f"thread-safety: all {len(todo)} sources compiled by clang with -Wthread-safety "
              "-Werror=thread-safety (the build is the check)")
        return 0
    clang = find_clang()
    source_dir = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    deps = ninja_deps(build)
    keys = Keys(clang, source_dir, build)
    cache = cache_dir()

    def run(entry):
        cmd, obj = clang_command(clang, entry)
        key = None
        if cache and obj in deps:
            key = keys.key(cmd, entry["directory"], deps[obj])
        marker = os.path.join(cache, key) if key else None
        if marker and os.path.exists(marker):
            os.utime(marker)
            return entry["file"], False, "", True
        p = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
        # Only thread-safety findings fail the check; other clang warnings are g++'s business.
        bad = p.returncode != 0
        if marker and not bad:
            open(marker, "w").close()
        return entry["file"], bad, p.stderr, False

    failed = cached = 0
    with ThreadPoolExecutor(jobs) as pool:
        for _, bad, err, hit in pool.map(run, todo):
            cached += hit
            if bad:
                failed += 1
                print(err)
    if cache:
        forget_old(cache)
    print(f"thread-safety: {len(todo) - failed} of {len(todo)} sources clean "
          f"({cached} unchanged since a clean check)")
    return 1 if failed else 0


SELF_TEST = """
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
class Counter {
 public:
  void Add() {
    %s
    ++n_;
  }
 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};
"""


def self_test():
    """The check catches an unguarded write and passes its fix: the same flags the build check
    uses, without the cache."""
    clang = find_clang()
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for name, lock in (("violation", ""), ("fixed", "absl::MutexLock lock(&mu_);")):
            path = os.path.join(tmp, f"{name}.cc")
            with open(path, "w") as f:
                f.write(SELF_TEST % lock)
            p = subprocess.run([clang, *FLAGS, "-std=c++20", path], capture_output=True, text=True)
            results[name] = (p.returncode, p.stderr)
    code, err = results["violation"]
    if code == 0 or "requires holding mutex" not in err:
        print(f"self-test: the unguarded write was not reported (exit {code})\n{err}")
        return 1
    code, err = results["fixed"]
    if code != 0:
        print(f"self-test: the guarded write was reported (exit {code})\n{err}")
        return 1
    # A clang build: a source compiled without the flags is named; g++ builds go to clang.
    flagged = {"file": "a.cc", "command": f"ccache {clang} -Werror=thread-safety -c a.cc"}
    plain = {"file": "b.cc", "command": f"{clang} -O2 -c b.cc"}
    gxx = {"file": "c.cc", "command": "/usr/bin/g++ -O2 -c c.cc"}
    cases = (([flagged], []), ([flagged, plain], ["b.cc"]), ([flagged, gxx], ["c.cc"]),
             ([gxx], None))
    for todo, want in cases:
        got = escaped_build_check(todo)
        if got != want:
            print(f"self-test: compile commands {[e['command'] for e in todo]}: {got}, "
                  f"expected {want}")
            return 1
    print("self-test: the unguarded write is reported, the guarded one passes; a source "
          "compiled without the flags is named")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    sys.exit(check_build(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else os.cpu_count()))
