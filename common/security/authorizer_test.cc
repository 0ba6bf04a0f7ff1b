#include "common/security/authorizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/security/principal.h"

namespace conduit::security {
namespace {

using ::testing::HasSubstr;

AclEntry Entry(Permission permission, std::string principal, ResourceType type, PatternType pattern,
               std::string name, Operation operation) {
  return AclEntry{std::move(principal), type, pattern, std::move(name), operation, permission};
}

constexpr auto kAllow = Permission::kAllow;
constexpr auto kDeny = Permission::kDeny;
constexpr auto kTopic = ResourceType::kTopic;
constexpr auto kGroup = ResourceType::kGroup;
constexpr auto kQueue = ResourceType::kQueue;

// The file's entries and the stored ones are one set: a stored deny wins over a file allow, each
// set is replaced on its own.
TEST(Authorizer, StoredAndFileEntriesDecideTogether) {
  Authorizer authorizer;
  ASSERT_TRUE(authorizer
                  .ReplaceAcls({Entry(kAllow, "User:alice", kTopic, PatternType::kPrefixed,
                                      "orders.", Operation::kWrite)})
                  .ok());
  ASSERT_TRUE(authorizer
                  .ReplaceStoredAcls({Entry(kDeny, "User:alice", kTopic, PatternType::kLiteral,
                                            "orders.pii", Operation::kWrite)})
                  .ok());
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "orders.pii", Operation::kWrite).allowed);
  EXPECT_TRUE(authorizer.Authorize("User:alice", kTopic, "orders.eu", Operation::kWrite).allowed);
  ASSERT_TRUE(authorizer.ReplaceAcls({}).ok());  // the file emptied: the stored deny stays
  EXPECT_EQ(authorizer.StoredAcls().size(), 1u);
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "orders.eu", Operation::kWrite).allowed);
  AclEntry invalid = Entry(kAllow, "alice", kTopic, PatternType::kLiteral, "t", Operation::kRead);
  EXPECT_FALSE(authorizer.ReplaceStoredAcls({invalid}).ok());
  EXPECT_EQ(authorizer.StoredAcls().size(), 1u);  // kept
}

// Deny wins over allow.
TEST(Authorizer, DenyWinsOverAllow) {
  Authorizer authorizer;
  ASSERT_TRUE(authorizer
                  .ReplaceAcls({Entry(kAllow, "User:alice", kTopic, PatternType::kPrefixed,
                                      "orders.", Operation::kWrite),
                                Entry(kDeny, "User:alice", kTopic, PatternType::kLiteral,
                                      "orders.pii", Operation::kWrite)})
                  .ok());
  const Decision pii = authorizer.Authorize("User:alice", kTopic, "orders.pii", Operation::kWrite);
  EXPECT_FALSE(pii.allowed);
  EXPECT_EQ(pii.reason, "denied by acl 'deny User:alice topic literal orders.pii Write'");
  const Decision eu = authorizer.Authorize("User:alice", kTopic, "orders.eu", Operation::kWrite);
  EXPECT_TRUE(eu.allowed);
  EXPECT_EQ(eu.reason, "allowed by acl 'allow User:alice topic prefixed orders. Write'");
}

TEST(Authorizer, AWildcardDenyWinsOverAPersonalAllow) {
  Authorizer authorizer;
  ASSERT_TRUE(
      authorizer
          .ReplaceAcls({Entry(kAllow, "User:alice", kTopic, PatternType::kLiteral, "orders.pii",
                              Operation::kRead),
                        Entry(kDeny, "*", kTopic, PatternType::kAny, "*", Operation::kRead)})
          .ok());
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "orders.pii", Operation::kRead).allowed);
}

// Prefix boundaries.
TEST(Authorizer, PrefixMatchesOnlyNamesStartingWithIt) {
  Authorizer authorizer;
  ASSERT_TRUE(authorizer
                  .ReplaceAcls({Entry(kAllow, "User:alice", kTopic, PatternType::kPrefixed,
                                      "orders.", Operation::kRead)})
                  .ok());
  EXPECT_TRUE(authorizer.Authorize("User:alice", kTopic, "orders.eu", Operation::kRead).allowed);
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "orders", Operation::kRead).allowed);
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "ordersx", Operation::kRead).allowed);
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "x.orders.eu", Operation::kRead).allowed);
  // Another resource type with the same name is another resource.
  EXPECT_FALSE(authorizer.Authorize("User:alice", kGroup, "orders.eu", Operation::kRead).allowed);
}

TEST(Authorizer, LiteralMatchesExactlyAndAnyMatchesAll) {
  Authorizer authorizer;
  ASSERT_TRUE(
      authorizer
          .ReplaceAcls({Entry(kAllow, "User:bob", kQueue, PatternType::kLiteral, "emails",
                              Operation::kRedrive),
                        Entry(kAllow, "*", kGroup, PatternType::kAny, "*", Operation::kRead)})
          .ok());
  EXPECT_TRUE(authorizer.Authorize("User:bob", kQueue, "emails", Operation::kRedrive).allowed);
  EXPECT_FALSE(authorizer.Authorize("User:bob", kQueue, "emails2", Operation::kRedrive).allowed);
  EXPECT_FALSE(authorizer.Authorize("User:bob", kQueue, "email", Operation::kRedrive).allowed);
  EXPECT_FALSE(authorizer.Authorize("User:eve", kQueue, "emails", Operation::kRedrive).allowed);
  EXPECT_TRUE(authorizer.Authorize("User:eve", kGroup, "anything", Operation::kRead).allowed);
  EXPECT_TRUE(authorizer.Authorize(kAnonymousPrincipal, kGroup, "g", Operation::kRead).allowed);
}

// Defaults.
TEST(Authorizer, NoMatchingAllowMeansDenied) {
  Authorizer authorizer;
  const Decision d = authorizer.Authorize("User:alice", kTopic, "orders", Operation::kRead);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "no acl allows 'User:alice' to Read topic 'orders'");
  ASSERT_TRUE(authorizer
                  .ReplaceAcls({Entry(kAllow, "User:alice", kTopic, PatternType::kLiteral, "orders",
                                      Operation::kRead)})
                  .ok());
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "orders", Operation::kWrite).allowed);
  EXPECT_FALSE(authorizer.Authorize("", kTopic, "orders", Operation::kRead).allowed);
}

TEST(Authorizer, ReadWriteDeleteAlterImplyDescribe) {
  for (Operation granted : {Operation::kRead, Operation::kWrite, Operation::kDelete,
                            Operation::kAlter, Operation::kDescribe}) {
    Authorizer authorizer;
    ASSERT_TRUE(authorizer
                    .ReplaceAcls({Entry(kAllow, "User:alice", kTopic, PatternType::kLiteral,
                                        "orders", granted)})
                    .ok());
    const Decision d = authorizer.Authorize("User:alice", kTopic, "orders", Operation::kDescribe);
    EXPECT_TRUE(d.allowed) << OperationName(granted);
    if (granted != Operation::kDescribe) {
      EXPECT_THAT(d.reason, HasSubstr("implies Describe"));
    }
  }
  for (Operation granted : {Operation::kCreate, Operation::kRedrive, Operation::kViewPayload}) {
    Authorizer authorizer;
    ASSERT_TRUE(authorizer
                    .ReplaceAcls({Entry(kAllow, "User:alice", kTopic, PatternType::kLiteral,
                                        "orders", granted)})
                    .ok());
    EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "orders", Operation::kDescribe).allowed)
        << OperationName(granted);
  }
}

TEST(Authorizer, ImplicationDoesNotRunBackwardsOrThroughDeny) {
  Authorizer authorizer;
  ASSERT_TRUE(
      authorizer
          .ReplaceAcls(
              {Entry(kAllow, "User:alice", kTopic, PatternType::kAny, "*", Operation::kDescribe),
               Entry(kAllow, "User:alice", kTopic, PatternType::kAny, "*", Operation::kRead),
               Entry(kDeny, "User:alice", kTopic, PatternType::kAny, "*", Operation::kDescribe)})
          .ok());
  // Describe does not give Read; an explicit deny of Describe beats the Read that implies it.
  EXPECT_TRUE(authorizer.Authorize("User:alice", kTopic, "t", Operation::kRead).allowed);
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "t", Operation::kDescribe).allowed);
}

TEST(Authorizer, SuperusersPassEvenADeny) {
  Authorizer authorizer;
  ASSERT_TRUE(authorizer.ReplaceSuperusers({"User:admin"}).ok());
  ASSERT_TRUE(
      authorizer
          .ReplaceAcls({Entry(kDeny, "*", kTopic, PatternType::kAny, "*", Operation::kDelete)})
          .ok());
  const Decision d = authorizer.Authorize("User:admin", kTopic, "orders", Operation::kDelete);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reason, "principal 'User:admin' is a superuser");
  EXPECT_FALSE(authorizer.Authorize("User:alice", kTopic, "orders", Operation::kDelete).allowed);
}

TEST(Authorizer, InvalidReplacementsKeepTheOldSets) {
  Authorizer authorizer;
  const AclEntry good =
      Entry(kAllow, "User:alice", kTopic, PatternType::kLiteral, "orders", Operation::kRead);
  ASSERT_TRUE(authorizer.ReplaceAcls({good}).ok());
  const absl::Status s = authorizer.ReplaceAcls(
      {good, Entry(kAllow, "alice", kTopic, PatternType::kLiteral, "x", Operation::kRead)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("acl entry 1"));
  EXPECT_EQ(authorizer.Acls(), std::vector<AclEntry>{good});

  ASSERT_TRUE(authorizer.ReplaceSuperusers({"User:admin"}).ok());
  EXPECT_EQ(authorizer.ReplaceSuperusers({"*"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(authorizer.Authorize("User:admin", kQueue, "q", Operation::kRedrive).allowed);
  EXPECT_FALSE(authorizer.Authorize("User:bob", kQueue, "q", Operation::kRedrive).allowed);
}

}  // namespace
}  // namespace conduit::security
