// libFuzzer target: the work queue's on-disk decoders (jobs, job index entries, leases, queue
// metadata, idempotency entries, counters) and key parsers fed arbitrary bytes. Bad bytes get a
// status (or nullopt), never a crash or an out-of-bounds read; what decodes encodes back to an
// equal value.
#include <cstdint>
#include <string_view>

#include "services/work_queue/storage/codec.h"
#include "services/work_queue/storage/key_schema.h"
#include "tests/fuzz/fuzz_check.h"

namespace codec = conduit::work_queue::codec;
namespace keys = conduit::work_queue::keys;

// The fixed-width values and the key parsers, on every input.
static void CheckSmallDecoders(std::string_view in) {
  if (auto entry = codec::DecodeIdempotency(in); entry.ok()) {
    auto again = codec::DecodeIdempotency(codec::EncodeIdempotency(entry->first, entry->second));
    FUZZ_CHECK(again.ok() && *again == *entry);
  }
  if (auto counter = codec::DecodeCounter(in); counter.ok()) {
    FUZZ_CHECK(codec::EncodeCounter(*counter) == in);
  }
  if (auto entry = codec::DecodeIndexEntry(7, in); entry.ok()) {
    auto again = codec::DecodeIndexEntry(7, codec::EncodeIndexEntry(*entry));
    FUZZ_CHECK(again.ok() && *again == *entry);
  }
  if (auto lease = codec::DecodeLease(7, in); lease.ok()) {
    auto again = codec::DecodeLease(7, codec::EncodeLease(*lease));
    FUZZ_CHECK(again.ok() && *again == *lease);
  }
  if (auto job = keys::JobIdOfKey(in))
    FUZZ_CHECK(keys::JobKey(conduit::work_queue::QueueId(0), *job).substr(8) == in.substr(8));
  if (auto name = keys::IdempotencyKeyName(in)) FUZZ_CHECK(name->size() + 8 == in.size());
  (void)keys::IsQueueKey(in);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  CheckSmallDecoders(in);
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
