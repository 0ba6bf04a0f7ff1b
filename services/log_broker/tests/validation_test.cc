#include "services/log_broker/domain/validation.h"

#include <gtest/gtest.h>

#include "services/log_broker/domain/limits.h"

namespace conduit::log_broker {
namespace {

TEST(Validation, TopicNamesFollowKafkasRule) {
  EXPECT_TRUE(ValidateTopicName("orders").ok());
  EXPECT_TRUE(ValidateTopicName("a.b_c-D9").ok());
  EXPECT_TRUE(ValidateTopicName(std::string(249, 'x')).ok());
  for (const std::string bad : {"", ".", "..", "has space", "slash/name", "ünï", "tab\t"}) {
    EXPECT_EQ(ValidateTopicName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ValidateTopicName(std::string(250, 'x')).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Validation, PartitionCounts) {
  EXPECT_TRUE(ValidatePartitionCount(1).ok());
  EXPECT_TRUE(ValidatePartitionCount(kMaxPartitions).ok());
  EXPECT_FALSE(ValidatePartitionCount(0).ok());
  EXPECT_FALSE(ValidatePartitionCount(-3).ok());
  EXPECT_FALSE(ValidatePartitionCount(kMaxPartitions + 1).ok());
}

TEST(Validation, ConfigRanges) {
  EXPECT_TRUE(ValidateConfig(TopicConfig{}).ok()) << "the defaults are valid";
  auto with = [](auto change) {
    TopicConfig c;
    change(c);
    return ValidateConfig(c).code();
  };
  using absl::StatusCode;
  EXPECT_EQ(with([](TopicConfig& c) { c.flush_interval = absl::Minutes(5); }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](TopicConfig& c) { c.flush_interval = absl::Microseconds(10); }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](TopicConfig& c) { c.max_record_bytes = kMaxRecordBytesLimit + 1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](TopicConfig& c) { c.max_record_bytes = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](TopicConfig& c) { c.retention_time = absl::ZeroDuration(); }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](TopicConfig& c) { c.retention_time = absl::InfiniteDuration(); }), StatusCode::kOk);
  EXPECT_EQ(with([](TopicConfig& c) { c.retention_bytes = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](TopicConfig& c) { c.retention_bytes = -2; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](TopicConfig& c) { c.retention_bytes = 1; }), StatusCode::kOk);
  EXPECT_EQ(with([](TopicConfig& c) { c.tombstone_retention = -absl::Seconds(1); }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](TopicConfig& c) { c.dedup_window = absl::Hours(24 * 8); }), StatusCode::kInvalidArgument);
}

TEST(Validation, PatchChangesOnlyWhatIsSet) {
  TopicConfig base;
  base.retention_bytes = 1000;
  TopicConfigPatch patch;
  patch.cleanup_policy = CleanupPolicy::kCompact;
  TopicConfig out = patch.ApplyTo(base);
  EXPECT_EQ(out.cleanup_policy, CleanupPolicy::kCompact);
  EXPECT_EQ(out.retention_bytes, 1000);
  EXPECT_TRUE(out.compacts());
  EXPECT_FALSE(out.deletes());
}

TEST(Validation, RecordSizeAndPartition) {
  TopicConfig config;
  config.max_record_bytes = 10;
  TopicMeta topic{TopicId(1), "t", 4, config, {}};
  RecordData small{std::string("k"), std::string("v"), {}, {}, ""};
  EXPECT_TRUE(ValidateRecord(topic, small, std::nullopt, 0).ok());
  EXPECT_TRUE(ValidateRecord(topic, small, 3, 0).ok());
  EXPECT_EQ(ValidateRecord(topic, small, 4, 0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ValidateRecord(topic, small, -1, 0).code(), absl::StatusCode::kNotFound);
  RecordData big{std::string("key"), std::string(8, 'v'), {}, {}, ""};  // 11 bytes > 10
  auto status = ValidateRecord(topic, big, std::nullopt, 5);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("record 5"), std::string::npos) << status;
  RecordData bad_header{std::nullopt, std::string("v"), {Header{"", "x"}}, {}, ""};
  EXPECT_EQ(ValidateRecord(topic, bad_header, std::nullopt, 0).code(),
            absl::StatusCode::kInvalidArgument);
  topic.config.cleanup_policy = CleanupPolicy::kCompact;
  RecordData keyless{std::nullopt, std::string("v"), {}, {}, ""};
  EXPECT_EQ(ValidateRecord(topic, keyless, std::nullopt, 0).code(),
            absl::StatusCode::kInvalidArgument)
      << "compacted topics need keys";
}

}  // namespace
}  // namespace conduit::log_broker
