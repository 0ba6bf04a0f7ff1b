#!/usr/bin/python3
"""Smoke test of scripts/run-cluster.sh (`make cluster`) with the built binaries.

Usage: run_cluster_test.py BIN_DIR

1. Starts the script in a session of its own (as a terminal runs it), waits for the printed
   `conduit --addr ... cluster describe` line, runs that command and a topic create through it:
   three brokers, one controller, partitions led by each broker. The group coordinator and the
   queue answer at the addresses .cluster/env names for the CLI (CONDUIT_COORDINATOR,
   CONDUIT_QUEUE_ADDR), and a broker asked for a group says where to go instead. A broker
   SIGKILLed is reported and the rest keep running, while `conduit consume --follow` on a
   partition it led goes on printing from the new leader; the printed command starts it again on
   its old port. Then SIGINT to the session (a terminal's Ctrl-C): the script exits 0 and every
   process it started, the one started again by hand too, is gone.
2. A start that fails (conduit-queue replaced by a program that exits 3): the script exits 1,
   names the queue, and stops etcd, the brokers and the coordinator it had started.

Plain Python 3 stdlib. Exit status 0 when every check passed.
"""

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "run-cluster.sh")
BIN = os.path.abspath(sys.argv[1])
START_TIMEOUT_S = 40
STOP_TIMEOUT_S = 30


def running(pid, cluster_dir):
    """True while pid runs a process of this cluster (its command line names cluster_dir)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().decode(errors="replace")
        with open(f"/proc/{pid}/status") as f:
            zombie = re.search(r"^State:\s+Z", f.read(), re.M) is not None
    except OSError:
        return False
    return cluster_dir in cmdline and not zombie


def leftovers(pids, cluster_dir):
    """The pids still running; SIGKILLs them so that a failing test leaves nothing behind."""
    left = [p for p in pids if running(p, cluster_dir)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    return left


def recorded_pids(cluster_dir):
    with open(os.path.join(cluster_dir, "pids")) as f:
        return [int(line) for line in f if line.strip()]


def start(bin_dir, cluster_dir):
    env = dict(os.environ, CLUSTER_DIR=cluster_dir)
    return subprocess.Popen([SCRIPT, bin_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)


def read_until(proc, pattern):
    """Lines of proc's output up to the first matching pattern (the match), or None at exit."""
    seen = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m, "".join(seen)
    return None, "".join(seen)


def conduit(*args, expect=0, env=None, stdin=None):
    p = subprocess.run([os.path.join(BIN, "conduit"), *args], capture_output=True, text=True,
                       timeout=40, env=dict(os.environ, **(env or {})), input=stdin)
    assert p.returncode == expect, \
        f"conduit {' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}"
    return p.stdout + p.stderr


def next_line(proc, timeout_s=40):
    """The next line proc prints, or None when none comes within timeout_s."""
    if not select.select([proc.stdout], [], [], timeout_s)[0]:
        return None
    return proc.stdout.readline().strip()


def cluster_env(cluster_dir):
    with open(os.path.join(cluster_dir, "env")) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)


def wait_exit(proc):
    try:
        return proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"run-cluster.sh still running {STOP_TIMEOUT_S}s after the signal")


def test_start_describe_ctrl_c(tmp):
    cluster_dir = os.path.join(tmp, "up")
    proc = start(BIN, cluster_dir)
    try:
        m, out = read_until(proc, r"conduit --addr (\S+) cluster describe")
        assert m, f"no describe line printed:\n{out}"
        addrs = m.group(1)
        assert len(addrs.split(",")) == 3, addrs
        for name in ["etcd", "broker-1", "broker-2", "broker-3", "coordinator", "queue"]:
            assert re.search(rf"^  {name} +127\.0\.0\.1:\d+", out, re.M), f"{name} not printed:\n{out}"
        conduit("--addr", addrs, "topic", "create", "smoke", "--partitions", "3")
        described = conduit("--addr", addrs, "cluster", "describe")
        assert re.search(r"3 brokers, controller broker [123]", described), described
        leaders = set(re.findall(r"^smoke\s+\d+\s+(\d+)", described, re.M))
        assert leaders == {"1", "2", "3"}, f"leaders {leaders}:\n{described}"

        # Groups and queues at their own servers, the CLI pointed there by .cluster/env.
        env = cluster_env(cluster_dir)
        assert env["CONDUIT_ADDR"] == addrs, env
        conduit("consume", "smoke", "--group", "smoke-group", env=env)
        assert "smoke-group" in conduit("group", "list", env=env)
        conduit("queue", "create", "smoke-jobs", env=env)
        assert "smoke-jobs" in conduit("queue", "list", env=env)
        # A broker asked for a group answers UNIMPLEMENTED; the CLI says where groups are.
        out = conduit("--addr", addrs, "group", "list", expect=1)
        assert "UNIMPLEMENTED" in out and "--coordinator" in out and ".cluster/env" in out, out

        # consume --follow on a partition broker-3 leads, through broker-3's death.
        part = re.search(r"^smoke\s+(\d+)\s+3\s", described, re.M).group(1)
        follower = subprocess.Popen(
            [os.path.join(BIN, "conduit"), "--addr", addrs, "consume", "smoke", "--partition",
             part, "--follow", "--format", "%v"], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            conduit("--addr", addrs, "produce", "smoke", "--partition", part, stdin="before\n")
            line = next_line(follower)
            assert line == "before", f"the follower printed {line!r}"

            pids = recorded_pids(cluster_dir)
            assert len(pids) == 6 and all(running(p, cluster_dir) for p in pids), pids
            os.kill(pids[3], signal.SIGKILL)  # etcd, broker-1, broker-2, broker-3, ...
            # Acknowledged once a new leader has it (the producer follows, within its timeout).
            conduit("--addr", addrs, "--timeout", "30", "produce", "smoke", "--partition", part,
                    stdin="after\n")
            after = next_line(follower)
        finally:
            follower.kill()
            _, err = follower.communicate(timeout=10)
        assert after == "after", f"the follower printed {after!r} after the leader died:\n{err}"
        assert "following on" in err, err
        m, out = read_until(proc, r"^  (\(setsid .*\))$")
        assert m and re.search(rf"broker-3 \(pid {pids[3]}\) exited .* the rest keep running",
                               out), f"broker-3's exit not reported:\n{out}"
        others = [p for p in pids if p != pids[3]]
        assert all(running(p, cluster_dir) for p in others), f"not all of {others} run on"
        broker3 = addrs.split(",")[2]
        assert f"--listen {broker3} " in m.group(1), m.group(1)
        subprocess.run(["bash", "-c", m.group(1)], check=True, timeout=10)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            p = subprocess.run([os.path.join(BIN, "conduit"), "--addr", broker3, "--timeout", "2",
                                "cluster", "describe"], capture_output=True, text=True)
            if p.returncode == 0 and re.search(rf"^3\s+{re.escape(broker3)}", p.stdout, re.M):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"broker-3 not back at {broker3}: {p.stdout}{p.stderr}")
        pids = recorded_pids(cluster_dir)
        assert len(pids) == 7 and running(pids[6], cluster_dir), pids
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        rc = wait_exit(proc)
    rest = proc.stdout.read()
    assert rc == 0, f"exit {rc} after SIGINT:\n{rest}"
    assert "stopped" in rest, rest
    left = leftovers(pids, cluster_dir)
    assert not left, f"still running after Ctrl-C: {left}"


def test_failed_start_stops_the_rest(tmp):
    bin_dir = os.path.join(tmp, "bin")
    os.mkdir(bin_dir)
    for b in ["conduit", "conduit-broker", "conduit-coordinator"]:
        os.symlink(os.path.join(BIN, b), os.path.join(bin_dir, b))
    with open(os.path.join(bin_dir, "conduit-queue"), "w") as f:
        f.write("#!/bin/sh\necho 'cannot start: a broken queue' >&2\nexit 3\n")
    os.chmod(os.path.join(bin_dir, "conduit-queue"), 0o755)
    cluster_dir = os.path.join(tmp, "failing")
    proc = start(bin_dir, cluster_dir)
    rc = wait_exit(proc)
    out = proc.stdout.read()
    assert rc == 1, f"exit {rc}:\n{out}"
    assert "queue did not start" in out and "a broken queue" in out, out
    pids = recorded_pids(cluster_dir)
    assert len(pids) == 6, pids  # etcd, 3 brokers, the coordinator, the queue
    left = leftovers(pids, cluster_dir)
    assert not left, f"still running after the failed start: {left}\n{out}"


def main():
    failures = 0
    tmp = tempfile.mkdtemp(prefix="conduit-run-cluster.")
    try:
        for test in [test_start_describe_ctrl_c, test_failed_start_stops_the_rest]:
            t0 = time.monotonic()
            try:
                test(tmp)
                print(f"ok   {test.__name__} ({time.monotonic() - t0:.1f} s)")
            except AssertionError as e:
                failures += 1
                print(f"FAIL: {test.__name__}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
