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

TEST(Validation, ConfigDefaultsAndRanges) {
  auto config = NormalizeConfig(TopicConfig{Durability::kInterval, absl::ZeroDuration(), 0});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->flush_interval, absl::Milliseconds(100));
  EXPECT_EQ(config->max_record_bytes, 1 << 20);
  EXPECT_FALSE(NormalizeConfig(TopicConfig{Durability::kSync, absl::Minutes(5), 0}).ok());
  EXPECT_FALSE(NormalizeConfig(TopicConfig{Durability::kSync, absl::Microseconds(10), 0}).ok());
  EXPECT_FALSE(NormalizeConfig(TopicConfig{Durability::kSync, {}, kMaxRecordBytesLimit + 1}).ok());
  EXPECT_FALSE(NormalizeConfig(TopicConfig{Durability::kSync, {}, -1}).ok());
}

TEST(Validation, RecordSizeAndPartition) {
  TopicMeta topic{1, "t", 4, TopicConfig{Durability::kSync, absl::Milliseconds(100), 10}, {}};
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
}

}  // namespace
}  // namespace conduit::log_broker
