// How an outbox row becomes a record (README: "Record mapping").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tools/outbox_relay/producer_publisher.h"

namespace conduit::outbox {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(RecordMappingTest, KeyValueEventIdTimeAndHeadersComeFromTheRow) {
  OutboxRow row;
  row.sequence = 7;
  row.event_id = "order-42-created";
  row.event_type = "OrderCreated";
  row.aggregate_id = "order-42";
  row.aggregate_version = 3;
  row.occurred_at = absl::FromUnixMicros(1'700'000'000'123'456);
  row.payload = std::string("{\"total\":10}\0x", 14);
  row.headers = {{"tenant", "acme"}, {"trace", "abc"}};

  const client::ProducerRecord r = ToRecord(row);
  EXPECT_EQ(r.key, "order-42");
  EXPECT_EQ(r.value, row.payload);
  EXPECT_EQ(r.event_id, "order-42-created");
  EXPECT_EQ(r.event_time, row.occurred_at);
  EXPECT_FALSE(r.partition.has_value()) << "placed by key, like the aggregate's other events";
  EXPECT_THAT(r.headers,
              ElementsAre(Pair("event-type", "OrderCreated"), Pair("aggregate-version", "3"),
                          Pair("tenant", "acme"), Pair("trace", "abc")));
}

TEST(RecordMappingTest, ANullPayloadIsARecordWithoutAValue) {
  OutboxRow row;
  row.event_id = "e";
  row.aggregate_id = "a";
  EXPECT_FALSE(ToRecord(row).value.has_value());
}

}  // namespace
}  // namespace conduit::outbox
