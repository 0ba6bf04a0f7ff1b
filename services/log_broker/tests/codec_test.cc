#include "services/log_broker/storage/codec.h"

#include <gtest/gtest.h>

#include "services/log_broker/storage/key_schema.h"

namespace conduit::log_broker {
namespace {

TEST(Codec, RecordRoundTripKeepsAbsentVersusEmpty) {
  RecordData data;
  data.key = std::string("");  // empty, not absent
  data.value = std::string("v\0x", 3);
  data.headers = {Header{"h1", "1"}, Header{"h2", std::string(300, 'z')}};
  data.event_time = absl::FromUnixMicros(1'700'000'000'123'456);
  data.event_id = "evt-1";
  std::string bytes;
  const absl::Time append = absl::FromUnixMicros(1'700'000'001'000'000);
  codec::EncodeRecord(data, append, /*leader_epoch=*/7, &bytes);
  RecordData back;
  absl::Time append_back;
  int32_t epoch = 0;
  ASSERT_TRUE(codec::DecodeRecord(bytes, &append_back, &epoch, &back).ok());
  EXPECT_EQ(back, data);
  EXPECT_EQ(append_back, append);
  EXPECT_EQ(epoch, 7);

  RecordData bare;  // no key, no value, no event time
  codec::EncodeRecord(bare, append, 0, &bytes);
  RecordData bare_back;
  ASSERT_TRUE(codec::DecodeRecord(bytes, &append_back, &epoch, &bare_back).ok());
  EXPECT_FALSE(bare_back.key.has_value());
  EXPECT_FALSE(bare_back.value.has_value());
  EXPECT_FALSE(bare_back.event_time.has_value());

  // Record v3: an idempotent producer's batch travels with each record (followers rebuild it).
  const ProducerTag tag{.producer_id = 42, .epoch = 3, .base_sequence = 100, .count = 5, .index = 4};
  codec::EncodeRecord(data, append, 7, &bytes, &tag);
  std::optional<ProducerTag> tag_back;
  RecordData tagged_back;
  ASSERT_TRUE(codec::DecodeRecord(bytes, &append_back, &epoch, &tagged_back, &tag_back).ok());
  EXPECT_EQ(tagged_back, data);
  ASSERT_TRUE(tag_back.has_value());
  EXPECT_EQ(*tag_back, tag);
  // Version, flags, append time, epoch, producer id, epoch, base sequence: then the count.
  ASSERT_EQ(bytes[30], '\x05');
  bytes[30] = '\x04';  // count 4 makes index 4 impossible
  EXPECT_EQ(codec::DecodeRecord(bytes, &append_back, &epoch, &tagged_back, &tag_back).code(),
            absl::StatusCode::kDataLoss);
}

TEST(Codec, TruncatedRecordIsDataLoss) {
  RecordData data;
  data.value = std::string(50, 'x');
  std::string bytes;
  codec::EncodeRecord(data, absl::UnixEpoch(), 3, &bytes);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    RecordData out;
    absl::Time t;
    int32_t epoch = 0;
    EXPECT_EQ(codec::DecodeRecord(std::string_view(bytes).substr(0, cut), &t, &epoch, &out).code(),
              absl::StatusCode::kDataLoss)
        << cut;
  }
}

// Data directories written before records carried a leader epoch still read: as epoch 0.
TEST(Codec, RecordVersion1ReadsAsEpochZero) {
  // v1: version, flags (value), BE64 append time µs, len + value, len + event id, 0 headers.
  const std::string v1("\x01\x02\x00\x00\x00\x00\x00\x00\x00\x05\x02hi\x00\x00", 15);
  RecordData data;
  absl::Time at;
  int32_t epoch = -1;
  ASSERT_TRUE(codec::DecodeRecord(v1, &at, &epoch, &data).ok());
  EXPECT_EQ(epoch, 0);
  EXPECT_EQ(at, absl::FromUnixMicros(5));
  EXPECT_EQ(data.value, "hi");
}

TEST(Codec, PartitionMetaKeepsLeaderEpochAndReadsVersion1) {
  PartitionMeta meta{.log_start_offset = 2,
                     .next_offset = 9,
                     .record_count = 7,
                     .bytes = 70,
                     .leader_epoch = LeaderEpoch(4)};
  auto back = codec::DecodePartitionMeta(codec::EncodePartitionMeta(meta));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, meta);
  std::string v1 = codec::EncodePartitionMeta(PartitionMeta{.next_offset = 9});
  v1[0] = '\x01';
  v1.pop_back();  // v1 ends after the max event time
  auto old = codec::DecodePartitionMeta(v1);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->next_offset, 9);
  EXPECT_EQ(old->leader_epoch, LeaderEpoch(0));
}

TEST(Codec, TopicMetaRoundTrip) {
  TopicConfig config;
  config.durability = Durability::kInterval;
  config.flush_interval = absl::Milliseconds(250);
  config.max_record_bytes = 4096;
  config.retention_bytes = 1 << 30;
  config.cleanup_policy = CleanupPolicy::kCompactDelete;
  config.tombstone_retention = absl::Minutes(5);
  config.dedup_window = absl::Hours(1);
  TopicMeta meta{TopicId(42), "orders.v2", 12, config, absl::FromUnixSeconds(1'700'000'000)};
  auto back = codec::DecodeTopicMeta(codec::EncodeTopicMeta(meta));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, meta);
  meta.config.retention_time = absl::InfiniteDuration();
  EXPECT_EQ(*codec::DecodeTopicMeta(codec::EncodeTopicMeta(meta)), meta);
  EXPECT_FALSE(codec::DecodeTopicMeta("\x01short").ok());
}

TEST(Codec, BookkeepingRoundTrips) {
  PartitionMeta pm{5, 99, 90, 12345, absl::InfinitePast()};
  EXPECT_EQ(*codec::DecodePartitionMeta(codec::EncodePartitionMeta(pm)), pm);
  pm.max_event_time = absl::FromUnixMicros(1'700'000'000'000'001);
  EXPECT_EQ(*codec::DecodePartitionMeta(codec::EncodePartitionMeta(pm)), pm);
  ProducerPartitionState fresh;  // epoch -1, last sequence -1
  EXPECT_EQ(*codec::DecodeProducerState(codec::EncodeProducerState(fresh)), fresh);
  ProducerInfo info{ProducerId(12), 4, "outbox-relay"};
  EXPECT_EQ(*codec::DecodeProducerInfo(ProducerId(12), codec::EncodeProducerInfo(info)), info);
  DedupEntry entry{RecordPosition{3, 77}, absl::FromUnixSeconds(9)};
  auto back = codec::DecodeDedupEntry(codec::EncodeDedupEntry(entry));
  EXPECT_EQ(back->position, entry.position);
  EXPECT_EQ(back->append_time, entry.append_time);
  EXPECT_FALSE(codec::DecodePartitionMeta("\x02").ok());
}

TEST(KeySchema, RecordKeysSortByPartitionThenOffset) {
  EXPECT_LT(keys::RecordKey(0, 255), keys::RecordKey(0, 256));
  EXPECT_LT(keys::RecordKey(0, int64_t{1} << 40), keys::RecordKey(1, 0));
  EXPECT_LT(keys::RecordKey(0, INT64_MAX), keys::PartitionEndKey(0));
  EXPECT_LE(keys::PartitionEndKey(0), keys::RecordKey(1, 0));
  EXPECT_EQ(keys::OffsetOfRecordKey(keys::RecordKey(7, 123456789)), 123456789);
  EXPECT_EQ(keys::RecordKey(3, 9).size(), keys::kRecordKeySize);
}

TEST(KeySchema, MetaKeysParseWhatTheyBuildAndRefuseOtherShapes) {
  const auto parts = keys::ParseProducerStateKey(keys::ProducerStateKey(TopicId(5), 3, ProducerId(-9)));
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->partition, 3);
  EXPECT_EQ(parts->producer_id, ProducerId(-9));
  EXPECT_FALSE(keys::ParseProducerStateKey(keys::ProducerKey(ProducerId(1))).has_value());
  EXPECT_EQ(keys::EventIdOfDedupKey(keys::DedupKey(TopicId(5), 2, "evt-1")), "evt-1");
  EXPECT_EQ(keys::EventIdOfDedupKey(keys::ProducerKey(ProducerId(1))), std::nullopt);
  EXPECT_EQ(keys::ProducerIdOfKey(keys::ProducerKey(ProducerId(77))), ProducerId(77));
  EXPECT_EQ(keys::ProducerIdOfKey(keys::TopicMetaKey(TopicId(77))), std::nullopt);
}

TEST(KeySchema, TopicColumnFamilyNames) {
  EXPECT_EQ(keys::TopicIdOfColumnFamily(keys::TopicColumnFamily(TopicId(17))), TopicId(17));
  EXPECT_FALSE(keys::TopicIdOfColumnFamily("meta").has_value());
  EXPECT_FALSE(keys::TopicIdOfColumnFamily("topic.x").has_value());
  EXPECT_FALSE(keys::TopicIdOfColumnFamily("default").has_value());
}

}  // namespace
}  // namespace conduit::log_broker
