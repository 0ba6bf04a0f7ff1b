#include "common/security/acl.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/security/principal.h"

namespace conduit::security {
namespace {

using ::testing::HasSubstr;

AclEntry Valid() {
  return AclEntry{.principal = "User:alice",
                  .resource_type = ResourceType::kTopic,
                  .pattern_type = PatternType::kPrefixed,
                  .resource_name = "orders.",
                  .operation = Operation::kWrite,
                  .permission = Permission::kAllow};
}

void ExpectInvalid(const AclEntry& entry, absl::string_view fragment) {
  const absl::Status s = ValidateAclEntry(entry);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << FormatAclEntry(entry);
  EXPECT_THAT(std::string(s.message()), HasSubstr(std::string(fragment)));
}

TEST(ValidateAclEntry, AcceptsWellFormedEntries) {
  EXPECT_TRUE(ValidateAclEntry(Valid()).ok());
  AclEntry any = Valid();
  any.principal = "*";
  any.pattern_type = PatternType::kAny;
  any.resource_name = "*";
  EXPECT_TRUE(ValidateAclEntry(any).ok());
}

TEST(ValidateAclEntry, RefusesBadPrincipals) {
  for (const char* principal : {"", "alice", ":alice", "User:", "User:al ice", "User:a\nb"}) {
    AclEntry e = Valid();
    e.principal = principal;
    ExpectInvalid(e, "principal");
  }
}

TEST(ValidateAclEntry, RefusesBadResourceNames) {
  AclEntry e = Valid();
  e.resource_name = "";
  ExpectInvalid(e, "resource name is empty");
  e.resource_name = "orders eu";
  ExpectInvalid(e, "whitespace");
  e.resource_name = std::string(kMaxResourceNameBytes + 1, 'x');
  ExpectInvalid(e, "longer than");
  e.resource_name = "*";  // a wildcard needs pattern any
  ExpectInvalid(e, "needs pattern 'any'");
  e.pattern_type = PatternType::kAny;
  e.resource_name = "orders";
  ExpectInvalid(e, "takes the resource name '*'");
}

TEST(ValidateAclEntry, RefusesOutOfRangeEnums) {
  AclEntry e = Valid();
  e.resource_type = static_cast<ResourceType>(9);
  ExpectInvalid(e, "resource type 9");
  e = Valid();
  e.pattern_type = static_cast<PatternType>(-1);
  ExpectInvalid(e, "pattern type -1");
  e = Valid();
  e.operation = static_cast<Operation>(8);
  ExpectInvalid(e, "operation 8");
  e = Valid();
  e.permission = static_cast<Permission>(2);
  ExpectInvalid(e, "permission 2");
}

TEST(AclNames, RoundTripAndIgnoreCase) {
  EXPECT_EQ(ParseOperation("viewpayload"), Operation::kViewPayload);
  EXPECT_EQ(ParseOperation(OperationName(Operation::kRedrive)), Operation::kRedrive);
  EXPECT_EQ(ParseResourceType("QUEUE"), ResourceType::kQueue);
  EXPECT_EQ(ParsePatternType("Prefixed"), PatternType::kPrefixed);
  EXPECT_EQ(ParsePermission("DENY"), Permission::kDeny);
  EXPECT_EQ(ParseOperation("Wrte"), std::nullopt);
  EXPECT_EQ(OperationName(static_cast<Operation>(42)), "invalid");
  EXPECT_EQ(FormatAclEntry(Valid()), "allow User:alice topic prefixed orders. Write");
}

TEST(ValidatePrincipal, NeedsTypeAndName) {
  EXPECT_TRUE(ValidatePrincipal("User:alice").ok());
  EXPECT_TRUE(ValidatePrincipal("Service:spiffe://conduit/broker-1").ok());
  EXPECT_FALSE(ValidatePrincipal("*").ok());
  EXPECT_FALSE(ValidatePrincipal(std::string(kMaxPrincipalBytes + 1, 'a')).ok());
}

}  // namespace
}  // namespace conduit::security
