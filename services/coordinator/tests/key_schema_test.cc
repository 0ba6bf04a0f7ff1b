#include "services/coordinator/storage/key_schema.h"

#include <gtest/gtest.h>

namespace conduit::coordinator {
namespace {

TEST(CoordinatorKeys, ParseWhatTheyBuildAndRefuseOtherShapes) {
  const auto member = keys::ParseMemberKey(keys::MemberKey("g", "m-1"));
  ASSERT_TRUE(member.has_value());
  EXPECT_EQ(member->group, "g");
  EXPECT_EQ(member->member, "m-1");
  EXPECT_FALSE(keys::ParseMemberKey("no-separator").has_value());

  const auto offset = keys::ParseOffsetKey(keys::OffsetKey("g", "orders", 70000));
  ASSERT_TRUE(offset.has_value());
  EXPECT_EQ(offset->group, "g");
  EXPECT_EQ(offset->topic, "orders");
  EXPECT_EQ(offset->partition, 70000);
  EXPECT_FALSE(keys::ParseOffsetKey(keys::MemberKey("g", "m")).has_value());
  EXPECT_FALSE(keys::ParseOffsetKey(keys::OffsetKey("g", "t", 1) + "x").has_value());

  EXPECT_EQ(keys::AuditIdOfKey("g", keys::AuditKey("g", 12)), 12u);
  EXPECT_EQ(keys::AuditIdOfKey("h", keys::AuditKey("g", 12)), std::nullopt);
  EXPECT_EQ(keys::AuditIdOfKey("g", keys::MemberKey("g", "m")), std::nullopt);
}

}  // namespace
}  // namespace conduit::coordinator
