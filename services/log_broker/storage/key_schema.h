#pragma once

// Every on-disk key of the log broker. The layout is described in services/log_broker/README.md.
//
// Column families:
//   "meta"          broker metadata; keys start with a one-byte prefix (below)
//   "topic.<id>"    one per topic: record entries (a chunk of records, or one record; codec.h)
//                   keyed by RecordKey(partition, offset of the entry's first record)

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/coding/coding.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker::keys {

inline constexpr char kMetaColumnFamily[] = "meta";
inline constexpr std::string_view kTopicColumnFamilyPrefix = "topic.";

// Prefixes of keys in the "meta" column family. Each must be distinct (checked below), so one
// kind of key never shadows another.
inline constexpr char kTopicMetaPrefix = 'T';      // 'T' + BE64(topic id) → TopicMeta
inline constexpr char kPartitionMetaPrefix = 'P';  // 'P' + BE64(topic id) + BE32(partition) → PartitionMeta
inline constexpr char kProducerStatePrefix = 'S';  // 'S' + BE64(topic) + BE32(partition) + BE64(producer) → ProducerPartitionState
// 'D' + BE64(topic id) + BE32(partition) + event id → DedupEntry
inline constexpr char kDedupPrefix = 'D';
// Before dedup windows were per partition: 'E' + BE64(topic id) + event id → DedupEntry. Read
// and rewritten under kDedupPrefix by LoadDedupEntries; never written.
inline constexpr char kLegacyDedupPrefix = 'E';
inline constexpr char kProducerPrefix = 'R';       // 'R' + BE64(producer id) → ProducerInfo
// 'L' + BE64(topic id) + BE32(partition) + BE32(leader epoch) → the epoch's first offset
inline constexpr char kEpochStartPrefix = 'L';
inline constexpr std::array<char, 7> kMetaPrefixes = {
    kTopicMetaPrefix,   kPartitionMetaPrefix, kProducerStatePrefix, kDedupPrefix,
    kLegacyDedupPrefix, kProducerPrefix,      kEpochStartPrefix};
// Prefixes whose keys continue with BE64(topic id): a topic's bookkeeping is one range each.
inline constexpr std::array<char, 5> kTopicScopedPrefixes = {kPartitionMetaPrefix,
                                                             kProducerStatePrefix, kDedupPrefix,
                                                             kLegacyDedupPrefix, kEpochStartPrefix};

constexpr bool AllDistinct(const auto& prefixes) {
  for (size_t i = 0; i < prefixes.size(); ++i)
    for (size_t j = i + 1; j < prefixes.size(); ++j)
      if (prefixes[i] == prefixes[j]) return false;
  return true;
}
static_assert(AllDistinct(kMetaPrefixes), "meta key prefixes must be distinct");

inline std::string TopicColumnFamily(TopicId topic_id) {
  return std::string(kTopicColumnFamilyPrefix) + std::to_string(topic_id.value());
}

// The topic id a column family name carries, if it is a topic column family.
inline std::optional<TopicId> TopicIdOfColumnFamily(std::string_view name) {
  if (name.substr(0, kTopicColumnFamilyPrefix.size()) != kTopicColumnFamilyPrefix) return {};
  uint64_t id = 0;
  std::string_view digits = name.substr(kTopicColumnFamilyPrefix.size());
  if (!absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &id)) return {};
  return TopicId(id);
}

inline std::string TopicMetaKey(TopicId topic_id) {
  std::string key(1, kTopicMetaPrefix);
  coding::PutBigEndian64(&key, topic_id.value());
  return key;
}

// prefix + BE64(topic id): the start of one topic's keys under a topic-scoped prefix;
// TopicScopeEnd is the end.
inline std::string TopicScopeKey(char prefix, TopicId topic_id) {
  std::string key(1, prefix);
  coding::PutBigEndian64(&key, topic_id.value());
  return key;
}
inline std::string TopicScopeEnd(char prefix, TopicId topic_id) {
  return TopicScopeKey(prefix, TopicId(topic_id.value() + 1));
}

inline std::string PartitionMetaKey(TopicId topic_id, int32_t partition) {
  std::string key = TopicScopeKey(kPartitionMetaPrefix, topic_id);
  coding::PutBigEndian32(&key, static_cast<uint32_t>(partition));
  return key;
}

inline std::string ProducerStateKey(TopicId topic_id, int32_t partition, ProducerId producer_id) {
  std::string key = TopicScopeKey(kProducerStatePrefix, topic_id);
  coding::PutBigEndian32(&key, static_cast<uint32_t>(partition));
  coding::PutBigEndian64(&key, static_cast<uint64_t>(producer_id.value()));
  return key;
}
inline constexpr size_t kProducerStateKeySize = 1 + 8 + 4 + 8;
struct ProducerStateKeyParts {
  int32_t partition = 0;
  ProducerId producer_id;
};
// The partition and producer of a ProducerStateKey, or nullopt for a key of another shape.
inline std::optional<ProducerStateKeyParts> ParseProducerStateKey(std::string_view key) {
  if (key.size() != kProducerStateKeySize || key[0] != kProducerStatePrefix) return std::nullopt;
  return ProducerStateKeyParts{static_cast<int32_t>(coding::ReadBigEndian32(key.data() + 9)),
                               ProducerId(static_cast<int64_t>(coding::ReadBigEndian64(key.data() + 13)))};
}

inline std::string DedupKey(TopicId topic_id, int32_t partition, std::string_view event_id) {
  std::string key = TopicScopeKey(kDedupPrefix, topic_id);
  coding::PutBigEndian32(&key, static_cast<uint32_t>(partition));
  key.append(event_id);
  return key;
}
inline constexpr size_t kDedupKeyPrefixSize = 1 + 8 + 4;
inline constexpr size_t kLegacyDedupKeyPrefixSize = 1 + 8;
// The event id of a DedupKey (or of a legacy one), or nullopt for a key of another shape.
inline std::optional<std::string_view> EventIdOfDedupKey(std::string_view key) {
  if (key.size() >= kDedupKeyPrefixSize && key[0] == kDedupPrefix) {
    return key.substr(kDedupKeyPrefixSize);
  }
  if (key.size() >= kLegacyDedupKeyPrefixSize && key[0] == kLegacyDedupPrefix) {
    return key.substr(kLegacyDedupKeyPrefixSize);
  }
  return std::nullopt;
}

inline std::string EpochStartKey(TopicId topic_id, int32_t partition, int32_t epoch) {
  std::string key = TopicScopeKey(kEpochStartPrefix, topic_id);
  coding::PutBigEndian32(&key, static_cast<uint32_t>(partition));
  coding::PutBigEndian32(&key, static_cast<uint32_t>(epoch));
  return key;
}
inline constexpr size_t kEpochStartKeySize = 1 + 8 + 4 + 4;

inline std::string ProducerKey(ProducerId producer_id) {
  std::string key(1, kProducerPrefix);
  coding::PutBigEndian64(&key, static_cast<uint64_t>(producer_id.value()));
  return key;
}
// The producer id of a ProducerKey, or nullopt for a key of another shape.
inline std::optional<ProducerId> ProducerIdOfKey(std::string_view key) {
  if (key.size() != 1 + 8 || key[0] != kProducerPrefix) return std::nullopt;
  return ProducerId(static_cast<int64_t>(coding::ReadBigEndian64(key.data() + 1)));
}

// Record key: BE32(partition) + BE64(offset), 12 bytes, so a partition's record entries are one
// contiguous, offset-ordered key range.
inline constexpr size_t kRecordKeySize = 12;

inline std::string RecordKey(int32_t partition, int64_t offset) {
  std::string key;
  key.reserve(kRecordKeySize);
  coding::PutBigEndian32(&key, static_cast<uint32_t>(partition));
  coding::PutBigEndian64(&key, static_cast<uint64_t>(offset));
  return key;
}

// The first key after every record of `partition`.
inline std::string PartitionEndKey(int32_t partition) {
  std::string key;
  coding::PutBigEndian32(&key, static_cast<uint32_t>(partition) + 1);
  return key;
}

// The offset of a RecordKey (a topic column family holds only record keys; kRecordKeySize bytes).
inline int64_t OffsetOfRecordKey(std::string_view key) {
  return static_cast<int64_t>(coding::ReadBigEndian64(key.data() + 4));
}

}  // namespace conduit::log_broker::keys
