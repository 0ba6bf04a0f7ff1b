#!/usr/bin/env python3
"""Copies etcd's protos with their gogoproto and google.api options removed.

etcd's rpc.proto, kv.proto and auth.proto import gogoproto/gogo.proto and
google/api/annotations.proto only for options that steer Go code generation and the HTTP
gateway: file-level `option (gogoproto.x) = ...;`, method-level `option (google.api.http) = {...};`
blocks and field-level `[(gogoproto.x) = ...]`. None of them changes the wire format, so the C++
stubs are generated from copies without them (and without the two imports), keeping package
names, field numbers and import paths.

Two more changes only shrink the generated C++, which was the slowest code of a cold build:
the services Conduit never calls (Cluster, Maintenance, Auth; it uses KV, Watch and Lease) are
left out, their messages kept, and the copies ask for `optimize_for = CODE_SIZE` (etcd carries
cluster metadata, a few calls a second, so its parsing need not be the fastest).

Usage: strip_etcd_proto.py SRC_ROOT DST_ROOT PROTO...   (PROTO relative to both roots)
Exit 1 with a message when a proto is missing or an option survives the stripping.
"""
import os
import re
import sys

DROPPED_IMPORTS = ("gogoproto/gogo.proto", "google/api/annotations.proto")
OPTION_START = re.compile(r"^\s*option\s*\(\s*(gogoproto|google\.api)\.[\w.]+\s*\)\s*=")
FIELD_OPTIONS = re.compile(r"\s*\[([^\]]*)\]")
FOREIGN = re.compile(r"\(\s*(gogoproto|google\.api)\.")
UNUSED_SERVICE = re.compile(r"^\s*service\s+(Cluster|Maintenance|Auth)\s*\{")
PACKAGE = re.compile(r"^\s*package\s+[\w.]+\s*;")


def braces(line):
    """Net `{` minus `}` on a line, ignoring string literals and // comments."""
    code = re.sub(r'"(\\.|[^"\\])*"', '""', line).split("//")[0]
    return code.count("{") - code.count("}")


def strip_field_options(line):
    """Drops (gogoproto.*) entries from a field's [...] options; drops [] when none remain."""
    def keep(match):
        entries = [e.strip() for e in match.group(1).split(",")]
        rest = [e for e in entries if not FOREIGN.match(e)]
        return " [" + ", ".join(rest) + "]" if rest else ""
    code, sep, comment = line.partition("//")
    return FIELD_OPTIONS.sub(keep, code) + sep + comment


def strip(text):
    out, depth = [], 0
    for line in text.splitlines(keepends=True):
        if depth > 0:  # inside a multi-line option block: skip until its braces balance
            depth += braces(line)
            continue
        stripped = line.strip()
        if stripped.startswith("import") and any(f'"{i}"' in stripped for i in DROPPED_IMPORTS):
            continue
        if OPTION_START.match(line) or UNUSED_SERVICE.match(line):
            depth = braces(line)
            continue
        out.append(strip_field_options(line) if "[" in line else line)
        if PACKAGE.match(line):
            out.append("option optimize_for = CODE_SIZE;\n")
    return "".join(out)


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    src_root, dst_root, protos = sys.argv[1], sys.argv[2], sys.argv[3:]
    for proto in protos:
        src = os.path.join(src_root, proto)
        try:
            with open(src, encoding="utf-8") as f:
                text = strip(f.read())
        except OSError as e:
            print(f"strip_etcd_proto: cannot read {src}: {e.strerror} "
                  "(etcd's protos come with the package golang-etcd-server-dev)", file=sys.stderr)
            return 1
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("//")[0]
            if FOREIGN.search(code) or any(i in code for i in DROPPED_IMPORTS):
                print(f"strip_etcd_proto: {proto}, line {number} of the copy: option left "
                      f"after stripping: {line.strip()}", file=sys.stderr)
                return 1
        dst = os.path.join(dst_root, proto)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(dst + ".tmp", dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
