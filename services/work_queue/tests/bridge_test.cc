// Bridges' rules (domain/bridge.h) and their persistence, without a log: filter, the job a
// record becomes, validation, and a spec surviving a reopen of the store.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/temp_dir.h"
#include "services/work_queue/domain/bridge.h"
#include "services/work_queue/storage/codec.h"
#include "services/work_queue/storage/rocksdb_queue_store.h"

namespace conduit::work_queue {
namespace {

using ::testing::ElementsAre;

BridgeSpec Spec() {
  BridgeSpec s;
  s.name = "emails";
  s.id = 42;
  s.topic = "product-events";
  s.queue = "send-merchant-email";
  return s;
}

BridgedRecord Record(std::optional<std::string> key, std::string value,
                     std::vector<std::pair<std::string, std::string>> headers = {}) {
  BridgedRecord r;
  r.topic = "product-events";
  r.partition = 3;
  r.offset = 17;
  r.key = std::move(key);
  r.value = std::move(value);
  r.headers = std::move(headers);
  return r;
}

TEST(Bridge, ValidationNamesTheFieldAndFillsTheDefaultGroup) {
  BridgeSpec s = Spec();
  ASSERT_TRUE(ValidateBridgeSpec(&s).ok());
  EXPECT_EQ(s.group, "bridge.emails");
  for (auto bad : {+[](BridgeSpec& b) { b.name = ""; }, +[](BridgeSpec& b) { b.name = "a b"; },
                   +[](BridgeSpec& b) { b.name = std::string(129, 'x'); },
                   +[](BridgeSpec& b) { b.topic = ""; }, +[](BridgeSpec& b) { b.queue = "q/1"; },
                   +[](BridgeSpec& b) { b.header_value = "v"; }}) {
    BridgeSpec b = Spec();
    bad(b);
    EXPECT_EQ(ValidateBridgeSpec(&b).code(), absl::StatusCode::kInvalidArgument) << b.name;
  }
}

TEST(Bridge, TheFilterNeedsTheKeyPrefixAndTheHeaderValue) {
  BridgeSpec s = Spec();
  EXPECT_TRUE(BridgeAccepts(s, Record(std::nullopt, "v"))) << "no filter: everything";
  s.key_prefix = "sku-";
  EXPECT_TRUE(BridgeAccepts(s, Record("sku-1", "v")));
  EXPECT_FALSE(BridgeAccepts(s, Record("user-1", "v")));
  EXPECT_FALSE(BridgeAccepts(s, Record(std::nullopt, "v"))) << "a keyless record has no prefix";
  s.header = "type";
  s.header_value = "price-changed";
  EXPECT_TRUE(BridgeAccepts(s, Record("sku-1", "v", {{"type", "price-changed"}})));
  EXPECT_FALSE(BridgeAccepts(s, Record("sku-1", "v", {{"type", "stock-changed"}})));
  EXPECT_FALSE(BridgeAccepts(s, Record("sku-1", "v"))) << "the header is missing";
  EXPECT_FALSE(BridgeAccepts(s, Record("user-1", "v", {{"type", "price-changed"}})))
      << "both parts must pass";
}

TEST(Bridge, AJobCarriesTheValueTheHeadersAndItsSource) {
  BridgeSpec s = Spec();
  s.tenant_header = "merchant";
  s.priority_header = "urgency";
  BridgedRecord r = Record("sku-1", "price 100 -> 90", {{"merchant", "m-7"}, {"urgency", "5"}});
  r.event_id = "evt-1";
  const NewJob job = BridgeJob(s, r);
  EXPECT_EQ(job.payload, "price 100 -> 90");
  EXPECT_EQ(job.tenant, "m-7");
  EXPECT_EQ(job.priority, 5);
  EXPECT_THAT(job.headers, ElementsAre(Header{"merchant", "m-7"}, Header{"urgency", "5"},
                                       Header{"conduit-source-topic", "product-events"},
                                       Header{"conduit-source-partition", "3"},
                                       Header{"conduit-source-offset", "17"},
                                       Header{"conduit-event-id", "evt-1"}));
  ASSERT_TRUE(job.source.has_value());
  EXPECT_EQ(*job.source, (JobSource{"product-events", 3, 17}));
  EXPECT_EQ(job.idempotency_key, "bridge/42/3/17") << "one key per bridge and record";

  BridgeSpec other = s;
  other.id = 43;
  EXPECT_NE(BridgeJob(other, r).idempotency_key, job.idempotency_key)
      << "a bridge recreated under the same name does not collide with the old one's keys";
}

TEST(Bridge, UnusableTenantAndPriorityHeadersKeepTheDefaults) {
  BridgeSpec s = Spec();
  s.tenant_header = "merchant";
  s.priority_header = "urgency";
  const NewJob job =
      BridgeJob(s, Record("k", "v", {{"merchant", std::string(300, 'm')}, {"urgency", "high"}}));
  EXPECT_EQ(job.tenant, "") << "over the queue's 256-byte tenant limit";
  EXPECT_EQ(job.priority, 0) << "not an int32";
  EXPECT_EQ(BridgeJob(s, Record("k", "v")).tenant, "") << "header absent";
}

TEST(Bridge, SpecsSurviveAReopenAndDeletesStick) {
  conduit::testing::TempDir dir;
  BridgeSpec a = Spec();
  a.group = "g";
  a.key_prefix = std::string("\0x", 2);
  a.header = "h";
  a.header_value = "v";
  a.tenant_header = "t";
  a.priority_header = "p";
  a.created = absl::FromUnixMicros(123456);
  a.paused = true;
  BridgeSpec b = Spec();
  b.name = "other";
  b.group = "bridge.other";
  {
    auto store = RocksDbQueueStore::Open(dir.path() + "/q");
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutBridge(a).ok());
    ASSERT_TRUE((*store)->PutBridge(b).ok());
    ASSERT_TRUE((*store)->DeleteBridge("other").ok());
  }
  auto store = RocksDbQueueStore::Open(dir.path() + "/q");
  ASSERT_TRUE(store.ok()) << store.status();
  auto loaded = (*store)->LoadBridges();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(*loaded, ElementsAre(a));
  EXPECT_EQ(codec::DecodeBridge(codec::EncodeBridge(a)).value(), a);
  std::string truncated = codec::EncodeBridge(a);
  truncated.pop_back();
  EXPECT_EQ(codec::DecodeBridge(truncated).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace conduit::work_queue
