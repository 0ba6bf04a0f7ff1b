#!/usr/bin/python3
"""A server's /metrics page as an operator scrapes it: conduit-standalone with --metrics-listen,
driven by the real `conduit` CLI, then GET and HEAD /metrics.

Checks per-method gRPC counts and latency histograms by status code (an OK call, an
ALREADY_EXISTS and a NOT_FOUND), one series for methods the server does not know, build info (the chart's appVersion), the process metrics, disk
use per store, and that HEAD answers like GET without the body.

Usage: server_metrics_test.py BIN_DIR    (exit 0 when every check passed)
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(page):
    """The samples of a text exposition: [(name, {label: value}, float)]."""
    out = []
    for line in page.splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def value(samples, name, **labels):
    """The one sample of `name` whose labels include `labels`; None when there is none."""
    found = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
    if len(found) > 1:
        raise AssertionError(f"{len(found)} samples of {name} {labels}")
    return found[0] if found else None


def main():
    bin_dir = sys.argv[1]
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as work:
        log_path = os.path.join(work, "server.log")
        port_file = os.path.join(work, "port")
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                [os.path.join(bin_dir, "conduit-standalone"), "--data-dir", work + "/data",
                 "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--port-file",
                 port_file, "--log-level", "info"], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 30
            metrics_port = None
            while time.time() < deadline and metrics_port is None:
                if server.poll() is not None:
                    raise AssertionError("conduit-standalone exited: " + open(log_path).read())
                m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", open(log_path).read())
                if m and os.path.exists(port_file):
                    metrics_port = int(m.group(1))
                time.sleep(0.05)
            if metrics_port is None:
                raise AssertionError("no metrics address in the log: " + open(log_path).read())
            addr = "127.0.0.1:" + open(port_file).read().strip()

            def cli(*args, stdin="", expect=0):
                p = subprocess.run([os.path.join(bin_dir, "conduit"), "--addr", addr, *args],
                                   input=stdin, capture_output=True, text=True, timeout=20)
                if p.returncode != expect:
                    raise AssertionError(f"conduit {args}: exit {p.returncode}: {p.stderr}")

            cli("topic", "create", "metered", "--partitions", "2")
            cli("topic", "create", "metered", expect=1)  # ALREADY_EXISTS
            cli("topic", "describe", "no-such-topic", expect=1)  # NOT_FOUND
            cli("produce", "metered", stdin="a\nb\nc\n")

            url = f"http://127.0.0.1:{metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as r:
                page = r.read().decode()
                check(r.status == 200, "GET /metrics is 200")
            s = parse(page)
            create = dict(grpc_method="CreateTopic", grpc_type="unary")
            check(value(s, "conduit_grpc_server_started_total", **create) == 2,
                  "CreateTopic started twice")
            check(value(s, "conduit_grpc_server_handled_total", grpc_code="OK", **create) == 1,
                  "CreateTopic handled once with OK")
            check(value(s, "conduit_grpc_server_handled_total", grpc_code="ALREADY_EXISTS",
                        **create) == 1, "CreateTopic handled once with ALREADY_EXISTS")
            check(value(s, "conduit_grpc_server_handling_seconds_count", grpc_code="OK",
                        **create) == 1, "CreateTopic OK latency histogram holds one call")
            check((value(s, "conduit_grpc_server_handling_seconds_bucket", grpc_code="OK",
                         le="+Inf", **create) or 0) == 1, "its +Inf bucket holds it")
            check((value(s, "conduit_grpc_server_handled_total", grpc_code="NOT_FOUND",
                         grpc_method="DescribeTopic") or 0) >= 1, "DescribeTopic NOT_FOUND counted")
            services = {l.get("grpc_service") for n, l, _ in s
                        if n == "conduit_grpc_server_started_total"}
            check(all(x and x != "unknown" for x in services), f"services named: {services}")

            # Methods the binary does not know share one series per type, however many names
            # callers make up: two different made-up unary methods, one series, started twice.
            with grpc.insecure_channel(addr) as channel:
                for name in ["/made.up.v1.Nope/First", "/made.up.v1.Nope/Second"]:
                    try:
                        channel.unary_unary(name)(b"", timeout=10)
                        check(False, f"{name} answered")
                    except grpc.RpcError as e:
                        check(e.code() == grpc.StatusCode.UNIMPLEMENTED, f"{name}: {e.code()}")
            with urllib.request.urlopen(url, timeout=10) as r:
                after = parse(r.read().decode())
            unknown = [v for n, l, v in after if n == "conduit_grpc_server_started_total"
                       and l.get("grpc_service") == "unknown"]
            check(unknown == [2], f"made-up methods: one 'unknown' series started twice: {unknown}")

            chart = open(os.path.join(ROOT, "helm/conduit/Chart.yaml")).read()
            app_version = re.search(r'^appVersion: *"?([^"\n]*)"?', chart, re.M).group(1)
            build = [l for n, l, v in s if n == "conduit_build_info" and v == 1]
            check(len(build) == 1 and build[0].get("version") == app_version
                  and build[0].get("commit") and build[0].get("compiler"),
                  f"conduit_build_info {build} (chart appVersion {app_version})")

            for name in ["process_resident_memory_bytes", "process_open_fds", "process_max_fds",
                         "process_threads", "process_start_time_seconds"]:
                check((value(s, name) or 0) > 0, f"{name} > 0")
            check(value(s, "process_cpu_seconds_total") is not None, "process_cpu_seconds_total")
            stores = {l["store"] for n, l, _ in s if n == "conduit_storage_bytes"}
            check({"broker", "coordinator", "queue"} <= stores, f"stores on the page: {stores}")
            check((value(s, "conduit_storage_bytes", store="broker", kind="wal") or 0) > 0,
                  "the broker's write-ahead log has bytes after a produce")

            head = urllib.request.Request(url, method="HEAD")
            with urllib.request.urlopen(head, timeout=10) as r:
                body = r.read()
                check(r.status == 200 and body == b"" and
                      int(r.headers.get("Content-Length", "0")) > 1000 and
                      r.headers.get("Content-Type", "").startswith("text/plain"),
                      f"HEAD /metrics: {r.status}, {len(body)} body bytes, {dict(r.headers)}")
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                rc = server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                rc = server.wait()
            check(rc == 0, f"conduit-standalone stopped with exit code {rc}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
