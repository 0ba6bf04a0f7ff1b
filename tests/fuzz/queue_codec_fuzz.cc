// libFuzzer target: the work queue's on-disk decoders (jobs, queue metadata) fed arbitrary
// bytes. Bad bytes get a status, never a crash or an out-of-bounds read; what decodes encodes
// back to an equal value.
#include <cstdint>
#include <string_view>

#include "services/work_queue/storage/codec.h"
#include "tests/fuzz/fuzz_check.h"

namespace codec = conduit::work_queue::codec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto job = codec::DecodeJob(42, in);
    if (!job.ok()) return 0;
    auto again = codec::DecodeJob(42, codec::EncodeJob(*job));
    FUZZ_CHECK(again.ok() && *again == *job);
  } else {
    auto queue = codec::DecodeQueue(in);
    if (!queue.ok()) return 0;
    auto again = codec::DecodeQueue(codec::EncodeQueue(*queue));
    FUZZ_CHECK(again.ok() && again->name == queue->name && again->id == queue->id);
  }
  return 0;
}
