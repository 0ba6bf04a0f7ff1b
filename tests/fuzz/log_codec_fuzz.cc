// libFuzzer target: every decoder of the log broker's on-disk values (record entries, one record
// or a chunk of them; topic and partition metadata, producer state and registry entries, dedup
// entries) fed arbitrary bytes.
// A decoder must refuse bad bytes with a status, never crash or read out of bounds (ASan,
// UBSan); what it accepts must encode back to bytes that decode to the same value.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status/status_macros.h"
#include "services/log_broker/storage/codec.h"
#include "tests/fuzz/fuzz_check.h"

namespace codec = conduit::log_broker::codec;

namespace {

// What `decode` accepts, `encode` writes back in a form `decode` accepts again.
template <typename Decode, typename Encode>
void DecodesBack(std::string_view in, Decode decode, Encode encode) {
  auto value = decode(in);
  if (!value.ok()) return;
  FUZZ_CHECK(decode(encode(*value)).ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the decoder; the rest is its input.
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0: {  // a record entry: one record, or a chunk of them
      std::vector<std::pair<int64_t, std::string>> records;
      const absl::Status read = codec::ForEachRecordInEntry(
          5, in, [&](int64_t offset, std::string_view value) -> absl::StatusOr<bool> {
            absl::Time at;
            int32_t epoch = 0;
            conduit::log_broker::RecordData record;
            CONDUIT_RETURN_IF_ERROR(codec::DecodeRecord(value, &at, &epoch, &record));
            std::string again;
            codec::EncodeRecord(record, at, epoch, &again);
            absl::Time at2;
            int32_t epoch2 = 0;
            conduit::log_broker::RecordData record2;
            FUZZ_CHECK(codec::DecodeRecord(again, &at2, &epoch2, &record2).ok());
            FUZZ_CHECK(at2 == at && epoch2 == epoch && record2.key == record.key &&
                       record2.value == record.value && record2.event_id == record.event_id &&
                       record2.headers.size() == record.headers.size());
            records.emplace_back(offset, std::string(value));
            return true;
          });
      if (!read.ok() || !codec::IsChunk(in)) break;
      FUZZ_CHECK(!records.empty() || in.size() == 1);
      std::string chunk;
      codec::StartChunk(&chunk);
      for (const auto& [offset, value] : records) codec::AppendEncodedRecord(offset, value, &chunk);
      std::vector<std::pair<int64_t, std::string>> again;
      FUZZ_CHECK(codec::ForEachRecordInEntry(5, chunk, [&](int64_t offset, std::string_view value) {
                   again.emplace_back(offset, std::string(value));
                   return absl::StatusOr<bool>(true);
                 }).ok());
      FUZZ_CHECK(again == records);
      break;
    }
    case 1: {
      auto meta = codec::DecodeTopicMeta(in);
      if (!meta.ok()) break;
      auto again = codec::DecodeTopicMeta(codec::EncodeTopicMeta(*meta));
      FUZZ_CHECK(again.ok() && again->name == meta->name && again->id == meta->id &&
                 again->partitions == meta->partitions);
      break;
    }
    case 2: {
      auto meta = codec::DecodePartitionMeta(in);
      if (!meta.ok()) break;
      auto again = codec::DecodePartitionMeta(codec::EncodePartitionMeta(*meta));
      FUZZ_CHECK(again.ok() && again->next_offset == meta->next_offset &&
                 again->log_start_offset == meta->log_start_offset);
      break;
    }
    case 3:
      DecodesBack(in, codec::DecodeProducerState, codec::EncodeProducerState);
      break;
    case 4:
      DecodesBack(
          in, [](std::string_view b) { return codec::DecodeProducerInfo(conduit::log_broker::ProducerId(7), b); },
          codec::EncodeProducerInfo);
      break;
    case 5:
      DecodesBack(in, codec::DecodeDedupEntry, codec::EncodeDedupEntry);
      break;
  }
  return 0;
}
