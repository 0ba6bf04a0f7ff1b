#!/usr/bin/python3
"""Reflection test: does what grpcurl does against the server, with no compiled-in knowledge of
conduit's protos.

Usage: reflection_check.py HOST:PORT    (run_with_server.sh appends the address)

Over grpc.reflection.v1alpha.ServerReflection (the only reflection version the server offers),
on one bidirectional stream as grpcurl uses it:
  1. list_services must include conduit.log.v1.LogService and grpc.health.v1.Health;
  2. file_containing_symbol(conduit.log.v1.LogService), then file_by_filename for any dependency
     not yet returned, builds a fresh DescriptorPool from the FileDescriptorProtos;
  3. message classes come from message_factory; CreateTopic, ListTopics and DeleteTopic are called
     as generic unary calls (method path and (de)serializers from the service descriptor), and the
     created topic must show up in ListTopics.
Then grpc.health.v1.Health/Check(service="") (stubs generated from grpc-proto) must answer
SERVING, for "" and for conduit.log.v1.LogService, and reflection must serve Health's own
descriptor. Every call has a deadline. Exit status 0 on
success, 1 with a "FAIL:" message otherwise.
"""

import os
import queue
import sys
import uuid

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S, check, check_eq  # noqa: E402

# Only the reflection and health protos are compiled in; conduit's come from the server.
pc.generate_stubs(["reflection/v1alpha/reflection.proto", "health/v1/health.proto"],
                  [pc.GRPC_PROTO_DIR, pc.WKT_DIR])
from health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from reflection.v1alpha import reflection_pb2, reflection_pb2_grpc  # noqa: E402

LOG_SERVICE = "conduit.log.v1.LogService"
HEALTH_SERVICE = "grpc.health.v1.Health"


class ReflectionStream:
    """One ServerReflectionInfo stream; ask() sends a request and returns its response."""

    def __init__(self, channel):
        self._requests = queue.Queue()
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        # The whole conversation is bounded by one deadline.
        self._responses = stub.ServerReflectionInfo(iter(self._requests.get, None),
                                                    timeout=DEADLINE_S * 3)

    def ask(self, **fields):
        self._requests.put(reflection_pb2.ServerReflectionRequest(**fields))
        response = next(self._responses)
        if response.HasField("error_response"):
            raise pc.CheckFailed("reflection request %s failed: code %d, %s" % (
                fields, response.error_response.error_code, response.error_response.error_message))
        return response

    def close(self):
        self._requests.put(None)  # ends the request stream: the server then ends its side
        for _ in self._responses:
            pass


def load_pool(stream, symbol):
    """Builds a DescriptorPool holding the file that defines `symbol` and all its dependencies,
    fetching any dependency the server did not volunteer by file name."""
    files = {}  # name -> FileDescriptorProto

    def take(response):
        for raw in response.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
            files.setdefault(fd.name, fd)

    take(stream.ask(file_containing_symbol=symbol))
    check(files, "file_containing_symbol(%s) returned no file" % symbol)
    missing = [d for fd in list(files.values()) for d in fd.dependency if d not in files]
    while missing:
        name = missing.pop()
        if name in files:
            continue
        take(stream.ask(file_by_filename=name))
        check(name in files, "file_by_filename(%s) did not return it" % name)
        missing.extend(d for d in files[name].dependency if d not in files)
    print("  ok: reflection returned files %s" % sorted(files))

    # A DescriptorPool needs each file's dependencies added before the file.
    pool = descriptor_pool.DescriptorPool()
    added = set()

    def add(name):
        if name in added:
            return
        for dep in files[name].dependency:
            add(dep)
        pool.AddSerializedFile(files[name].SerializeToString())
        added.add(name)

    for name in sorted(files):
        add(name)
    return pool


def message_class(descriptor):
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.21 (python 4.x API)
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)


class DynamicService:
    """Generic unary calls to a service known only from its descriptor."""

    def __init__(self, channel, pool, service_name):
        self._channel = channel
        self._service = pool.FindServiceByName(service_name)

    def call(self, method_name, **request_fields):
        method = self._service.methods_by_name.get(method_name)
        check(method is not None, "%s has no method %s" % (self._service.full_name, method_name))
        request_cls = message_class(method.input_type)
        response_cls = message_class(method.output_type)
        rpc = self._channel.unary_unary(
            "/%s/%s" % (self._service.full_name, method.name),
            request_serializer=request_cls.SerializeToString,
            response_deserializer=response_cls.FromString)
        return rpc(request_cls(**request_fields), timeout=DEADLINE_S)


def main(address):
    channel = grpc.insecure_channel(address)
    pc.wait_ready(channel, address)

    stream = ReflectionStream(channel)
    listed = stream.ask(list_services="")
    services = sorted(s.name for s in listed.list_services_response.service)
    print("  ok: list_services -> %s" % services)
    for wanted in (LOG_SERVICE, HEALTH_SERVICE):
        check(wanted in services, "list_services lacks %s: %s" % (wanted, services))

    pool = load_pool(stream, LOG_SERVICE)
    # At least the original methods (the service may grow; it must not lose any).
    methods = {m.name for m in pool.FindServiceByName(LOG_SERVICE).methods}
    wanted = {"CreateTopic", "DeleteTopic", "ListTopics", "DescribeTopic", "Produce", "Fetch",
              "Tail", "ListOffsets"}
    check(wanted <= methods, "LogService over reflection lacks methods %s (has %s)"
          % (sorted(wanted - methods), sorted(methods)))
    print("  ok: LogService methods %s" % sorted(methods))
    stream.close()

    log = DynamicService(channel, pool, LOG_SERVICE)
    topic = "polyglot-refl-" + uuid.uuid4().hex[:12]
    created = log.call("CreateTopic", name=topic, partitions=2)
    check_eq((created.topic.name, created.topic.partitions), (topic, 2),
             "dynamic CreateTopic response")
    topics = log.call("ListTopics").topics
    match = [t for t in topics if t.name == topic]
    check(match, "dynamic ListTopics does not list %s: %s" % (topic, [t.name for t in topics]))
    check_eq(match[0].partitions, 2, "ListTopics partitions of %s" % topic)
    check(match[0].HasField("created"), "ListTopics: %s has no created time" % topic)
    print("  ok: dynamic CreateTopic + ListTopics saw %s" % topic)
    log.call("DeleteTopic", name=topic)
    check(topic not in [t.name for t in log.call("ListTopics").topics],
          "dynamic DeleteTopic left %s listed" % topic)
    print("  ok: dynamic DeleteTopic")

    # Health, through stubs compiled from grpc-proto: the server as a whole must be SERVING.
    health = health_pb2_grpc.HealthStub(channel)
    status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE_S)
    check_eq(health_pb2.HealthCheckResponse.ServingStatus.Name(status.status), "SERVING",
             "Health/Check('')")
    print("  ok: Health/Check('') SERVING")
    # Per-service status, as Kubernetes-style probes ask for it.
    status = health.Check(health_pb2.HealthCheckRequest(service=LOG_SERVICE), timeout=DEADLINE_S)
    check_eq(health_pb2.HealthCheckResponse.ServingStatus.Name(status.status), "SERVING",
             "Health/Check(%r)" % LOG_SERVICE)
    print("  ok: Health/Check(%r) SERVING" % LOG_SERVICE)
    # Health's own descriptor is served too, so grpcurl can call it.
    stream = ReflectionStream(channel)
    stream.ask(file_containing_symbol=HEALTH_SERVICE)
    print("  ok: reflection serves %s's descriptor" % HEALTH_SERVICE)
    stream.close()
    channel.close()


if __name__ == "__main__":
    pc.run_main("reflection_check", main)
