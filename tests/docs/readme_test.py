#!/usr/bin/python3
"""The README's shell examples, run as printed against real servers.

Usage: readme_test.py BIN_DIR

Every ```sh block of README.md carries a marker on the line before it:
  <!-- readme-test: cli -->            run line by line (bash), `conduit` on PATH; twice: against
                                       a conduit-standalone (CONDUIT_ADDR), and against
                                       scripts/run-cluster.sh (`make cluster`) with its env file
                                       loaded, as the README says to
  <!-- readme-test: grpcurl -->        each grpcurl call made as grpcurl makes it (the request's
                                       JSON through protobuf's JSON mapping, on the method the
                                       command names) against a conduit-standalone: Debian 12
                                       does not package grpcurl
  <!-- readme-test: skip, REASON -->   not run; the reason is printed
A block without a marker fails the test, so a new example is run or says why not.

What a reader fills in is filled in: the address (127.0.0.1:7070 and b1:7070,b2:7070 are the
servers started here) and TOKENn (the token `queue lease` printed for job n). Each command must
exit 0 within 30 s; the output of some is checked (the Fetch returns the produced record, the
consumer prints both records, the redrive finds the dead letter).

Plain Python 3 with Debian's python3-grpcio and python3-protobuf. Exit 0 when every check passed.
"""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
BIN = os.path.abspath(sys.argv[1])
CALL_TIMEOUT_S = 30
MARKER = re.compile(r"^<!-- readme-test: (cli|grpcurl|skip, .+) -->$")


def blocks():
    """[(marker or None, first line number, [logical command lines])] of README's sh blocks."""
    lines = open(README).read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            m = MARKER.match(lines[i - 1]) if i > 0 else None
            start = i + 1
            body = []
            i += 1
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            commands = []
            for line in "\n".join(body).replace("\\\n", " ").split("\n"):
                if line.strip():
                    commands.append(line.strip())
            out.append((m.group(1) if m else None, start, commands))
        i += 1
    return out


class Session:
    """Runs README lines in one working directory, filling in what a reader would."""

    def __init__(self, name, work, env, addresses):
        self.name, self.work, self.env, self.addresses = name, work, env, addresses
        self.tokens = {}
        self.outputs = []

    def fill(self, line):
        line = line.replace("b1:7070,b2:7070", self.addresses["bootstrap"])
        line = line.replace("127.0.0.1:7070", self.addresses["single"])

        def token(m):
            job = m.group(1)
            if job not in self.tokens:
                raise AssertionError(f"{line}: no token printed for job {job} before it")
            return self.tokens[job]
        return re.sub(r"\bTOKEN(\d+)\b", token, line)

    def run(self, line):
        filled = self.fill(line)
        p = subprocess.run(["bash", "-o", "pipefail", "-c", filled], cwd=self.work, env=self.env,
                           capture_output=True, text=True, timeout=CALL_TIMEOUT_S)
        if p.returncode != 0:
            raise AssertionError(f"[{self.name}] exit {p.returncode}: {filled}\n"
                                 f"stdout: {p.stdout}\nstderr: {p.stderr}")
        # `queue lease` prints "JOB TOKEN ATTEMPT DEADLINE PAYLOAD" rows.
        for job, tok in re.findall(r"^(\d+)\s+(\d+-\d+-[0-9a-f]+)\s+\d+\s", p.stdout, re.M):
            self.tokens[job] = tok
        self.outputs.append((line, p.stdout + p.stderr))
        print(f"ok   [{self.name}] {line}")
        return p.stdout + p.stderr


def check_cli_outputs(session):
    """What the block's comments promise, seen in the outputs."""
    out = dict(session.outputs)
    consumed = out["conduit consume orders --group billing            # as a group member; "
                   "commits what it printed"]
    assert "hello" in consumed and "world" in consumed, consumed
    described = next(o for l, o in session.outputs if l.startswith("conduit group describe"))
    assert "billing" in described and "LAG" in described, described
    redrive = next(o for l, o in session.outputs if "dlq redrive" in l)
    assert "3" in redrive and "smtp 550" in redrive, redrive
    bridged = next(o for l, o in session.outputs if l.startswith("conduit bridge describe"))
    assert "order-emails" in bridged, bridged


def start_standalone(work):
    port_file = os.path.join(work, "port")
    log = open(os.path.join(work, "standalone.log"), "w")
    proc = subprocess.Popen([os.path.join(BIN, "conduit-standalone"), "--data-dir",
                             os.path.join(work, "data"), "--listen", "127.0.0.1:0",
                             "--metrics-listen", "", "--port-file", port_file],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(port_file):
            return proc, "127.0.0.1:" + open(port_file).read().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("conduit-standalone did not start: " +
                         open(os.path.join(work, "standalone.log")).read())


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def grpcurl(command, address, descriptors):
    """Makes the call `command` (a grpcurl command line) names; returns the answer as JSON."""
    import grpc
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
    args = shlex.split(command.replace("127.0.0.1:7070", address))
    assert args[0] == "grpcurl" and "-plaintext" in args, command
    data = args[args.index("-d") + 1] if "-d" in args else "{}"
    target, method = [a for a in args[1:] if not a.startswith("-") and a != data][-2:]
    pool = descriptor_pool.DescriptorPool()
    fds = descriptor_pb2.FileDescriptorSet.FromString(open(descriptors, "rb").read())
    for f in fds.file:
        pool.Add(f)
    service, name = method.rsplit("/", 1)
    m = pool.FindServiceByName(service).FindMethodByName(name)

    def cls(d):
        if hasattr(message_factory, "GetMessageClass"):
            return message_factory.GetMessageClass(d)
        return message_factory.MessageFactory(pool).GetPrototype(d)
    req_cls, resp_cls = cls(m.input_type), cls(m.output_type)
    request = json_format.Parse(data, req_cls())
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(f"/{service}/{name}", request_serializer=req_cls.SerializeToString,
                                   response_deserializer=resp_cls.FromString)
        answer = call(request, timeout=CALL_TIMEOUT_S)
    return json.loads(json_format.MessageToJson(answer))


def main():
    failures = []
    found = blocks()
    unmarked = [start for marker, start, _ in found if marker is None]
    if unmarked:
        failures.append(f"README.md sh blocks without a readme-test marker at lines {unmarked}")
    for marker, start, _ in found:
        if marker and marker.startswith("skip"):
            print(f"skip README.md:{start}: {marker[len('skip, '):]}")
    cli = [c for marker, _, cmds in found if marker == "cli" for c in cmds]
    calls = [c for marker, _, cmds in found if marker == "grpcurl" for c in cmds]
    if not cli or not calls:
        failures.append("no cli or grpcurl block found in README.md")

    with tempfile.TemporaryDirectory() as tmp:
        descriptors = os.path.join(tmp, "conduit.pb")
        protos = [os.path.relpath(os.path.join(d, f), os.path.join(ROOT, "proto"))
                  for d, _, fs in os.walk(os.path.join(ROOT, "proto", "conduit"))
                  for f in fs if f.endswith(".proto")]
        subprocess.run(["protoc", "-I", os.path.join(ROOT, "proto"), "-I", "/usr/include",
                        "--include_imports", "--descriptor_set_out", descriptors, *protos],
                       check=True)
        path = BIN + os.pathsep + os.environ.get("PATH", "")

        # 1. A single node: the grpcurl calls, then the CLI block.
        single_dir = os.path.join(tmp, "single")
        os.mkdir(single_dir)
        proc, address = start_standalone(single_dir)
        try:
            answers = []
            for call in calls:
                try:
                    answers.append(grpcurl(call, address, descriptors))
                    print(f"ok   [grpcurl] {call.split()[-1]}")
                except Exception as e:  # noqa: BLE001 — reported as a failure
                    failures.append(f"[grpcurl] {call}: {e}")
            if answers and not any(r.get("value") == "aGVsbG8=" for r in
                                   answers[-1].get("records", [])):
                failures.append(f"[grpcurl] the Fetch did not return the produced record: "
                                f"{answers[-1]}")
            # Another topic name space: the grpcurl block made `orders` already.
            reset = subprocess.run([os.path.join(BIN, "conduit"), "--addr", address, "topic",
                                    "delete", "orders"], capture_output=True, text=True)
            if reset.returncode != 0:
                failures.append(f"cannot delete the grpcurl block's topic: {reset.stderr}")
            session = Session("single node", single_dir, dict(os.environ, PATH=path,
                              CONDUIT_ADDR=address), {"single": address, "bootstrap": address})
            for line in cli:
                session.run(line)
            check_cli_outputs(session)
        except AssertionError as e:
            failures.append(str(e))
        finally:
            rc = stop(proc)
            if rc != 0:
                failures.append(f"conduit-standalone exited {rc} on SIGTERM")

        # 2. `make cluster`, the CLI pointed at it by its env file.
        cluster_dir = os.path.join(tmp, "cluster")
        script = os.path.join(ROOT, "scripts", "run-cluster.sh")
        cluster = subprocess.Popen([script, BIN], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env=dict(os.environ, CLUSTER_DIR=cluster_dir),
                                   start_new_session=True)
        try:
            seen = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = cluster.stdout.readline()
                if not line:
                    break
                seen.append(line)
                if "Or load them all" in line:
                    break
            else:
                raise AssertionError("make cluster did not come up:\n" + "".join(seen))
            env = dict(os.environ, PATH=path)
            with open(os.path.join(cluster_dir, "env")) as f:
                env.update(dict(l.strip().split("=", 1) for l in f if "=" in l))
            brokers = env["CONDUIT_ADDR"].split(",")
            work = os.path.join(tmp, "cluster-work")
            os.mkdir(work)
            session = Session("make cluster", work, env,
                              {"single": brokers[0], "bootstrap": ",".join(brokers[:2])})
            for line in cli:
                session.run(line)
            check_cli_outputs(session)
            described = dict(session.outputs)[cli[-1]]
            if not re.search(r"3 brokers, controller broker [123]", described):
                failures.append(f"[make cluster] cluster describe: {described}")
        except AssertionError as e:
            failures.append(str(e))
        finally:
            os.killpg(cluster.pid, signal.SIGINT)
            try:
                rc = cluster.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(cluster.pid, signal.SIGKILL)
                rc = "killed"
            if rc != 0:
                failures.append(f"make cluster exited {rc} on Ctrl-C")

    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
