// libFuzzer target: request validation fed arbitrary protobuf messages. The first byte picks a
// request type (the input of any method of the three services); the rest is parsed as that
// message, as gRPC would, and given to CheckTimeFields, the descriptor walk every RPC runs
// first. It must answer (OK or INVALID_ARGUMENT), never crash or read out of bounds, and give
// the same verdict for the message re-serialized (validation depends on the value only).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/grpc/request_checks.h"
#include "conduit/coordinator/v1/coordinator.pb.h"
#include "conduit/log/v1/log.pb.h"
#include "conduit/queue/v1/queue.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::Message;
using google::protobuf::MessageFactory;

// Every request type of the three services, in descriptor order.
const std::vector<const Message*>& RequestTypes() {
  static const std::vector<const Message*> types = [] {
    google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 is logged per parse otherwise
    std::vector<const Message*> out;
    for (const char* service : {"conduit.log.v1.LogService", "conduit.queue.v1.WorkQueue",
                                "conduit.coordinator.v1.GroupCoordinator"}) {
      const auto* s = DescriptorPool::generated_pool()->FindServiceByName(service);
      FUZZ_CHECK(s != nullptr);
      for (int i = 0; i < s->method_count(); ++i) {
        const Descriptor* input = s->method(i)->input_type();
        out.push_back(MessageFactory::generated_factory()->GetPrototype(input));
      }
    }
    return out;
  }();
  return types;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Linked in so that the generated pool has the three files.
  (void)conduit::log::v1::ProduceRequest::descriptor();
  (void)conduit::queue::v1::EnqueueRequest::descriptor();
  (void)conduit::coordinator::v1::HeartbeatRequest::descriptor();
  if (size == 0) return 0;
  const auto& types = RequestTypes();
  std::unique_ptr<Message> request(types[data[0] % types.size()]->New());
  if (!request->ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  const absl::Status verdict = conduit::grpc_util::CheckTimeFields(*request);
  FUZZ_CHECK(verdict.ok() || absl::IsInvalidArgument(verdict));
  std::unique_ptr<Message> again(request->New());
  FUZZ_CHECK(again->ParseFromString(request->SerializeAsString()));
  FUZZ_CHECK(conduit::grpc_util::CheckTimeFields(*again).code() == verdict.code());
  return 0;
}
