#pragma once

#include <cstddef>

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
  // The arena's first block; later blocks grow as protobuf's arena grows them.
  explicit ArenaMessageAllocator(size_t first_block_bytes = 4096)
      : first_block_bytes_(first_block_bytes) {}

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder(first_block_bytes_);
  }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    explicit Holder(size_t first_block_bytes) : arena_(Options(first_block_bytes)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options(size_t first_block_bytes) {
      google::protobuf::ArenaOptions o;
      o.start_block_size = first_block_bytes;
      o.max_block_size = 64 << 10;  // a batch of records needs tens of KiB: a few blocks
      return o;
    }
    google::protobuf::Arena arena_;
  };

  const size_t first_block_bytes_;
};

}  // namespace conduit::grpc_util
