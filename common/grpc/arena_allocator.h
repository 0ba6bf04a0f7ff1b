#pragma once

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

namespace conduit::grpc_util {

// A unary callback method's request and response on one protobuf arena per call, for the
// methods that carry hundreds of submessages (a Produce batch's records, a Fetch's records, a
// Lease's jobs): parsing and building them allocates from the arena's blocks, and the whole call
// is freed at once when gRPC releases it, instead of a malloc and a free per submessage and
// string object. Strings moved out of an arena message keep their heap buffers, as usual.
//
// Install with the generated `SetMessageAllocatorFor_<Method>(&allocator)` on the service
// before the server starts; the allocator must outlive the server.
template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options()) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    // A 4 KiB first block growing to 64 KiB: a batch of records (tens of KiB) takes a few
    // blocks instead of protobuf's default 256 B .. 8 KiB steps.
    static google::protobuf::ArenaOptions Options() {
      google::protobuf::ArenaOptions o;
      o.start_block_size = 4 << 10;
      o.max_block_size = 64 << 10;
      return o;
    }
    google::protobuf::Arena arena_;
  };
};

// A unary callback method's request belongs to its call: gRPC frees it (or its arena) when the
// call is released, and nothing reads it after the handler has converted it. So a handler that
// has checked its request may move strings and submessages out of it rather than copy them; this
// is the one place that drops the const gRPC hands it. What was moved must not be read again.
template <typename Request>
Request& MovableRequest(const Request* request) {
  return *const_cast<Request*>(request);
}

}  // namespace conduit::grpc_util
