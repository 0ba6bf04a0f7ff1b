#!/usr/bin/env python3
"""The layering contract, checked on the includes (README.md, "A map of the code").

- services/<svc>/domain/  the rules: Abseil, the standard library and common/ only; never gRPC,
  protobuf (generated .pb.h included), RocksDB, common/grpc, common/rocksdb, or an api/ or
  storage/ header, directly or through any header of this repo it includes.
- services/<svc>/storage/ may use RocksDB and protobuf, never gRPC or an api/ header.
- services/<svc>/{cluster,replication,convert,bridge,broker}/ (the adapters beside api/: etcd,
  broker-to-broker replication, shared protobuf conversions, the clients a service holds) never
  include an api/ header: what they share with api/ lives in convert/ or domain/.
- services/<a>/ never includes services/<b>/ (only services/standalone hosts them all), except
  that every server binary's main.cc hosts the security service (SECURITY_NODE).
- common/ never includes services/.
- domain/ and storage/ never read the time themselves (absl::Now(), std::chrono clocks): time
  comes from the injected Clock, so tests drive it.
- domain/ starts no threads of its own (std::thread, an executor): it gets a runtime::Scope on
  the process's Runtime, so there is one executor and one scheduler per process.

Usage: check_layers.py REPO_ROOT   (exit 1 and one line per violation when broken)
       check_layers.py --self-test (the checker catches each kind of violation)
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
CLOCK_READ = re.compile(r'absl::Now\(\)|(system|steady|high_resolution)_clock::now')
# Every server hosts the security service (ACLs, audit trail): its main.cc may include this.
SECURITY_NODE = '"services/security/security_node.h"'
THREAD_START = re.compile(r'std::j?thread\b|\bBoundedExecutor\b|std::async\b')

# (pattern over the include path, why) per layer; "<" or '"' is part of the matched text.
NOT_IN_DOMAIN = [
    (re.compile(r'^<grpc'), "gRPC"),
    (re.compile(r'^<google/protobuf'), "protobuf"),
    (re.compile(r'\.pb\.h.$'), "a generated protobuf header"),
    (re.compile(r'^.rocksdb/'), "RocksDB"),
    (re.compile(r'^"common/(grpc|rocksdb)/'), "a gRPC or RocksDB helper"),
    (re.compile(r'^"services/[^/]+/(api|storage)/'), "an api/ or storage/ header"),
]
NOT_IN_ADAPTERS = [
    (re.compile(r'^"services/[^/]+/api/'), "an api/ header"),
]
ADAPTERS = ("cluster", "replication", "convert", "bridge", "broker")
NOT_IN_STORAGE = [
    (re.compile(r'^<grpc'), "gRPC"),
    (re.compile(r'^"common/grpc/'), "a gRPC helper"),
    (re.compile(r'^"services/[^/]+/api/'), "an api/ header"),
]


def includes(root, path, cache):
    """The includes of `path` (relative to root) as '<x>' / '"x"' strings."""
    if path not in cache:
        try:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        cache[path] = [q + p + (">" if q == "<" else '"') for q, p in INCLUDE.findall(text)]
    return cache[path]


def closure(root, path, cache):
    """Every include reached from `path` through this repo's own headers: (include, via)."""
    seen, out, todo = {path}, [], [(path, path)]
    while todo:
        current, via = todo.pop()
        for inc in includes(root, current, cache):
            out.append((inc, via if via != path else current))
            local = inc[1:-1]
            if inc.startswith('"') and local not in seen and os.path.exists(os.path.join(root, local)):
                seen.add(local)
                todo.append((local, local if via == path else via))
    return out


def check(root):
    problems, cache = [], {}
    for top in ("services", "common"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".h", ".cc")) or name.endswith("_test.cc"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                parts = path.split(os.sep)
                rules = []
                if top == "services" and len(parts) > 3 and parts[2] == "domain":
                    rules = NOT_IN_DOMAIN
                elif top == "services" and len(parts) > 3 and parts[2] == "storage":
                    rules = NOT_IN_STORAGE
                elif top == "services" and len(parts) > 3 and parts[2] in ADAPTERS:
                    rules = NOT_IN_ADAPTERS
                reached = closure(root, path, cache) if rules else []
                if rules and rules is not NOT_IN_ADAPTERS:
                    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                        for number, line in enumerate(f, 1):
                            code = line.split("//")[0]
                            if CLOCK_READ.search(code):
                                problems.append(f"{path}:{number}: {parts[2]}/ reads the time "
                                                f"without the injected Clock: {line.strip()}")
                            if parts[2] == "domain" and THREAD_START.search(code):
                                problems.append(f"{path}:{number}: domain/ owns a thread or an "
                                                f"executor (use a runtime::Scope): {line.strip()}")
                for inc, via in reached:
                    for pattern, why in rules:
                        if pattern.search(inc):
                            through = "" if via == path else f" (through {via})"
                            problems.append(f"{path}: {parts[2]}/ includes {why}: {inc}{through}")
                for inc in includes(root, path, cache):
                    m = re.match(r'^"services/([^/]+)/', inc)
                    if top == "common" and m:
                        problems.append(f"{path}: common/ includes a service: {inc}")
                    elif (top == "services" and m and m.group(1) != parts[1]
                          and parts[1] != "standalone"
                          and not (name == "main.cc" and inc == SECURITY_NODE)):
                        problems.append(f"{path}: service {parts[1]} includes service "
                                        f"{m.group(1)}'s code: {inc}")
    return problems


def self_test():
    """Each kind of violation in a small fake tree is reported; the clean file is not."""
    files = {
        "services/a/domain/clean.h": '#include <vector>\n#include "common/time/clock.h"\n',
        "common/time/clock.h": '#include "absl/time/time.h"\n',
        "services/a/domain/direct.cc": '#include <grpcpp/grpcpp.h>\n',
        "services/a/domain/through.cc": '#include "common/bad/wrapper.h"\n',
        "common/bad/wrapper.h": '#include <rocksdb/db.h>\n',
        "services/a/domain/proto.cc": '#include "conduit/log/v1/log.pb.h"\n',
        "services/a/domain/api.cc": '#include "services/a/api/service.h"\n',
        "services/a/storage/store.cc": '#include <grpcpp/grpcpp.h>\n#include <rocksdb/db.h>\n',
        "services/a/api/service.h": '#include "services/b/domain/x.h"\n',
        "services/standalone/main.cc": '#include "services/a/api/service.h"\n',
        "services/a/main.cc": '#include "services/security/security_node.h"\n',
        "services/a/api/other.cc": '#include "services/security/security_node.h"\n',
        "common/up.h": '#include "services/a/domain/clean.h"\n',
        "services/a/domain/clock.cc": 'int f() { return absl::ToUnixSeconds(absl::Now()); }\n'
                                      '// absl::Now() in a comment is fine\n',
        "services/a/domain/threads.cc": 'void f() { std::this_thread::yield(); }\n'
                                        'std::thread t_;\n',
        "services/a/cluster/codec.cc": '#include "services/a/api/service.h"\n',
        "services/a/replication/fetcher.cc": '#include "services/a/convert/c.h"\n',
        "services/a/convert/c.h": '#include "services/a/api/convert.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        problems = check(root)
    expected = ["direct.cc", "through.cc", "proto.cc", "api.cc", "store.cc",
                "service.h: service a includes service b", "other.cc: service a includes",
                "common/up.h", "clock.cc:1:",
                "threads.cc:2:", "cluster/codec.cc: cluster/ includes an api/",
                "fetcher.cc: replication/ includes an api/ header", "convert/c.h: convert/"]
    missing = [e for e in expected if not any(e in p for p in problems)]
    wrong = [p for p in problems if "clean.h:" in p or "standalone" in p or "rocksdb" in p.lower()
             and "store.cc" in p or "a/main.cc" in p]
    if missing or wrong or len(problems) != len(expected):
        print("self-test failed:\n  missing " + repr(missing) + "\n  reported " + repr(problems))
        return 1
    print(f"self-test: {len(problems)} planted violations reported, the clean files pass")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1]
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering violations")
        return 1
    print("layers hold: domain/ sees no gRPC, protobuf or RocksDB and owns no threads; "
          "cluster/, replication/, convert/, bridge/ and broker/ include no api/ header; "
          "no service includes another")
    return 0


if __name__ == "__main__":
    sys.exit(main())
