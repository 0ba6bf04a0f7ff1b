#pragma once

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace conduit::grpc_util {

// A bidi stream's reactor that parses its client's messages itself. gRPC's typed reactor reports
// a message that does not parse as a failed read, exactly as it reports the client's half-close,
// so the stream would end OK with that message unanswered: bad input without a clear status.
// Here such a message is OnUnparsable, and the stream can end INVALID_ARGUMENT. It serves a
// method marked raw (ServeParsed); StartRead and StartWrite take the typed messages, as on
// grpc::ServerBidiReactor<Request, Response>, and the parsing and serialising are gRPC's own
// (grpc::SerializationTraits), on the same threads as before.
template <typename Request, typename Response>
class ParsedBidiReactor : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // A read is done: false at the client's half-close or when the stream broke; true with the
  // message parsed into the request StartRead named.
  virtual void OnRead(bool ok) = 0;
  // The message read is not a Request (INVALID_ARGUMENT naming its type). No read is in flight.
  virtual void OnUnparsable(absl::Status status) = 0;

 protected:
  void StartRead(Request* request) {
    request_ = request;
    ServerBidiReactor::StartRead(&in_);
  }
  // Serialises `response` at once: it may change as soon as this returns. One write in flight.
  void StartWrite(const Response* response) {
    bool own = false;
    out_.Clear();
    // Serialising fails only for a message over 2 GiB, which the responses' caps rule out.
    (void)grpc::SerializationTraits<Response>::Serialize(*response, &out_, &own);
    ServerBidiReactor::StartWrite(&out_);
  }

 private:
  void OnReadDone(bool ok) final {
    if (!ok) return OnRead(false);
    if (!grpc::SerializationTraits<Request>::Deserialize(&in_, request_).ok()) {
      return OnUnparsable(absl::InvalidArgumentError(absl::StrCat(
          "a message could not be parsed as ", Request::descriptor()->full_name(),
          " (malformed protobuf bytes, or a string field that is not valid UTF-8)")));
    }
    OnRead(true);
  }

  Request* request_ = nullptr;
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;  // the write in flight
};

// The index of `method` in `service`'s method table, as the generated code numbers it (the
// order of the .proto file), for grpc::Service::MarkMethodRawCallback.
inline int MethodIndex(const std::string& service, const std::string& method) {
  const google::protobuf::ServiceDescriptor* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  const google::protobuf::MethodDescriptor* m =
      s == nullptr ? nullptr : s->FindMethodByName(method);
  GPR_ASSERT(m != nullptr);
  return m->index();
}

// A handler for a service's constructor: serves a bidi method with reactors from `make`
// (grpc::CallbackServerContext* → a ParsedBidiReactor), in place of the typed one:
//   MarkMethodRawCallback(MethodIndex(...), ServeParsed([this](auto* ctx) { ... }));
template <typename Make>
grpc::internal::MethodHandler* ServeParsed(Make make) {
  return new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
      [make = std::move(make)](grpc::CallbackServerContext* ctx) { return make(ctx); });
}

}  // namespace conduit::grpc_util
