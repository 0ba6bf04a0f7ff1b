#include "services/log_broker/replication/replica_convert.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace conduit::log_broker::replication {
namespace {

StoredRecord Record(int64_t offset, bool idempotent) {
  StoredRecord r;
  r.partition = 2;
  r.offset = offset;
  r.append_time = absl::FromUnixMicros(1'700'000'000'000'000 + offset);
  r.leader_epoch = LeaderEpoch(4);
  r.data.key = "k" + std::to_string(offset);
  r.data.value = std::string("v\0w", 3);
  r.data.headers = {Header{"trace", "t1"}, Header{"empty", ""}};
  r.data.event_time = absl::FromUnixMicros(1'600'000'000'000'000);
  r.data.event_id = "event-" + std::to_string(offset);
  if (idempotent) r.producer = ProducerTag{77, 3, 10, 2, static_cast<int32_t>(offset % 2)};
  return r;
}

// A follower reads records from the `records` field as well as from `stored_records`: an older
// leader (before stored bytes were shipped) answers with `records` only, and a store without an
// encoding of its own is answered that way too. Every field a follower writes crosses the wire
// in both.
TEST(ReplicaConvert, RecordsAndStoredBytesCrossTheWireWithEveryField) {
  std::vector<ReplicaFetchData> sent(2);
  sent[0].topic = "orders";
  sent[0].topic_id = TopicId(9);
  sent[0].partition = 2;
  sent[0].high_watermark = 11;
  sent[0].log_start_offset = 1;
  sent[0].log_end_offset = 13;
  sent[0].records = {Record(11, true), Record(12, false)};
  sent[0].records[1].data.key.reset();  // a record without a key stays without one
  sent[0].records[1].data.event_time.reset();
  sent[1].topic = "orders";
  sent[1].topic_id = TopicId(9);
  sent[1].partition = 3;
  sent[1].status = absl::OutOfRangeError("diverged");
  sent[1].truncate_to = 5;
  sent[1].encoded.bytes = std::string(
      "\x05\x03"
      "abc",
      5);
  const std::vector<ReplicaFetchData> expected = sent;

  pb::ReplicaFetchResponse wire;
  ToProto(std::move(sent), &wire);
  pb::ReplicaFetchResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  ASSERT_EQ(parsed.partitions_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const ReplicaFetchData& want = expected[i];
    ReplicaFetchData got = FromProto(std::move(*parsed.mutable_partitions(i)));
    EXPECT_EQ(got.topic, want.topic);
    EXPECT_EQ(got.topic_id, want.topic_id);
    EXPECT_EQ(got.partition, want.partition);
    EXPECT_EQ(got.status, want.status);
    EXPECT_EQ(got.truncate_to, want.truncate_to);
    EXPECT_EQ(got.high_watermark, want.high_watermark);
    EXPECT_EQ(got.log_start_offset, want.log_start_offset);
    EXPECT_EQ(got.log_end_offset, want.log_end_offset);
    EXPECT_EQ(got.encoded.bytes, want.encoded.bytes);
    ASSERT_EQ(got.records.size(), want.records.size());
    for (size_t k = 0; k < want.records.size(); ++k) {
      const StoredRecord& g = got.records[k];
      const StoredRecord& w = want.records[k];
      EXPECT_EQ(g.partition, w.partition);
      EXPECT_EQ(g.offset, w.offset);
      EXPECT_EQ(g.append_time, w.append_time);
      EXPECT_EQ(g.leader_epoch, w.leader_epoch);
      EXPECT_EQ(g.data, w.data) << "record " << w.offset;
      EXPECT_EQ(g.producer, w.producer) << "record " << w.offset;
    }
  }
}

}  // namespace
}  // namespace conduit::log_broker::replication
