#!/usr/bin/python3
"""`--help` on every Conduit server: its usage line and its own flags, grouped by the file that
defines them, without Abseil's "never called" warning or "No flags matched".

Usage: server_help_test.py BIN_DIR    (exit 0 when every check passed)
"""
import os
import subprocess
import sys

# Each server, with flags that only it (among these) has besides the shared ones.
SERVERS = {
    "conduit-standalone": ["--broker_address", "--bridge_bootstrap", "--log_maintenance_interval"],
    "conduit-broker": ["--broker_id", "--log_maintenance_interval"],
    "conduit-coordinator": ["--broker_address", "--session_timeout"],
    "conduit-queue": ["--bridge_bootstrap", "--bridge_coordinator"],
}
SHARED = ["--data_dir", "--listen", "--metrics_listen", "--audit_retention",
          "Flags from common/grpc/server_main.cc"]


def main():
    bin_dir = sys.argv[1]
    failures = 0
    for name, own in SERVERS.items():
        p = subprocess.run([os.path.join(bin_dir, name), "--help"], capture_output=True,
                           text=True, timeout=30)
        out = p.stdout + p.stderr
        missing = [s for s in [f"Usage: {name}", *SHARED, *own] if s not in out]
        wrong = [s for s in ["SetProgramUsageMessage() never called", "No flags matched",
                             "absl/flags/"] if s in out]
        if missing or wrong:
            failures += 1
            print(f"FAIL: {name} --help: missing {missing}, unwanted {wrong}\n{out}")
        else:
            print(f"ok   {name} --help")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
