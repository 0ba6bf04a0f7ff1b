// The security service's domain on its real RocksDB store: stored ACLs (validated, deduplicated,
// durable across a reopen, applied to the Authorizer, deleted by filter) and the audit trail
// (increasing ids across a reopen, filters, pages, retention).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "common/security/acl_file.h"
#include "common/testing/temp_dir.h"
#include "services/security/domain/acl_registry.h"
#include "services/security/domain/audit_trail.h"
#include "services/security/storage/rocksdb_security_store.h"

namespace conduit::security_service {
namespace {

using security::AclEntry;
using security::Operation;
using security::ResourceType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

AclEntry Entry(const std::string& line) {
  auto entries = security::ParseAclFile(line);
  EXPECT_TRUE(entries.ok()) << entries.status();
  return entries.ok() && entries->size() == 1 ? entries->front() : AclEntry{};
}

class SecurityStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    trail_.reset();
    acls_.reset();
    store_.reset();
    auto store = RocksDbSecurityStore::Open(dir_.Sub("security"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    authorizer_ = std::make_shared<security::Authorizer>();
    acls_ = std::make_unique<AclRegistry>(store_.get(), authorizer_);
    ASSERT_TRUE(acls_->Load().ok());
    trail_ = std::make_unique<AuditTrail>(store_.get());
    ASSERT_TRUE(trail_->Open().ok());
  }
  bool Allowed(const std::string& principal, const std::string& topic, Operation op) {
    return authorizer_->Authorize(principal, ResourceType::kTopic, topic, op).allowed;
  }
  security::AuditRecord Record(const std::string& principal, const std::string& resource,
                               bool allowed, absl::Time time) {
    security::AuditRecord r;
    r.time = time;
    r.principal = principal;
    r.method = "/conduit.log.v1.LogService/DeleteTopic";
    r.checks.push_back({ResourceType::kTopic, resource, Operation::kDelete, allowed, "why"});
    r.denied = !allowed;
    return r;
  }
  std::vector<uint64_t> Ids(const AuditQuery& q, uint64_t* next = nullptr) {
    auto page = trail_->List(q);
    EXPECT_TRUE(page.ok()) << page.status();
    std::vector<uint64_t> ids;
    if (!page.ok()) return ids;
    for (const auto& r : page->records) ids.push_back(r.id);
    if (next != nullptr) *next = page->next_after_id;
    return ids;
  }

  testing::TempDir dir_;
  std::unique_ptr<RocksDbSecurityStore> store_;
  std::shared_ptr<security::Authorizer> authorizer_;
  std::unique_ptr<AclRegistry> acls_;
  std::unique_ptr<AuditTrail> trail_;
  const absl::Time t0_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(SecurityStoreTest, CreatedAclsApplyAtOnceAndSurviveAReopen) {
  EXPECT_FALSE(Allowed("User:bob", "orders.eu", Operation::kWrite));
  auto created = acls_->Create({Entry("allow User:bob topic prefixed orders. Write"),
                                Entry("deny User:bob topic literal orders.pii Write")});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(*created, 2u);
  EXPECT_TRUE(Allowed("User:bob", "orders.eu", Operation::kWrite));
  EXPECT_FALSE(Allowed("User:bob", "orders.pii", Operation::kWrite));  // deny wins

  Reopen();  // a new Authorizer: only the store can have them
  EXPECT_TRUE(Allowed("User:bob", "orders.eu", Operation::kWrite));
  EXPECT_FALSE(Allowed("User:bob", "orders.pii", Operation::kWrite));
  EXPECT_EQ(acls_->List({}).size(), 2u);
}

TEST_F(SecurityStoreTest, AnEntryStoredTwiceIsStoredOnce) {
  ASSERT_TRUE(acls_->Create({Entry("allow User:bob topic literal t Read")}).ok());
  auto again = acls_->Create(
      {Entry("allow User:bob topic literal t Read"), Entry("allow User:bob topic literal u Read")});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 1u);
  EXPECT_EQ(acls_->List({}).size(), 2u);
}

TEST_F(SecurityStoreTest, OneInvalidEntryStoresNothing) {
  AclEntry bad = Entry("allow User:bob topic literal t Read");
  bad.principal = "bob";  // no type
  auto created = acls_->Create({Entry("allow User:bob topic literal u Read"), bad});
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(created.status().message(), HasSubstr("entries[1]"));
  EXPECT_THAT(acls_->List({}), IsEmpty());
  EXPECT_FALSE(Allowed("User:bob", "u", Operation::kRead));
  Reopen();
  EXPECT_THAT(acls_->List({}), IsEmpty());
}

TEST_F(SecurityStoreTest, DeleteRemovesWhatTheFiltersMatchAndOnlyThat) {
  ASSERT_TRUE(acls_
                  ->Create({Entry("allow User:bob topic literal t Read"),
                            Entry("allow User:bob topic literal t Write"),
                            Entry("allow User:eve topic literal t Read")})
                  .ok());
  AclFilter bob;
  bob.principal = "User:bob";
  bob.operation = Operation::kRead;
  auto deleted = acls_->Delete({bob});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, ElementsAre(Entry("allow User:bob topic literal t Read")));
  EXPECT_FALSE(Allowed("User:bob", "t", Operation::kRead));
  EXPECT_TRUE(Allowed("User:bob", "t", Operation::kWrite));
  EXPECT_TRUE(Allowed("User:eve", "t", Operation::kRead));
  Reopen();
  EXPECT_EQ(acls_->List({}).size(), 2u);
  EXPECT_FALSE(Allowed("User:bob", "t", Operation::kRead));
}

TEST_F(SecurityStoreTest, ListShowsTheFileEntriesFirstAndFilters) {
  ASSERT_TRUE(authorizer_->ReplaceAcls({Entry("allow User:ops cluster any * Alter")}).ok());
  ASSERT_TRUE(acls_->Create({Entry("allow User:bob topic literal t Read")}).ok());
  const auto all = acls_->List({});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].source, AclSource::kFile);
  EXPECT_EQ(all[1].source, AclSource::kStored);
  AclFilter topics;
  topics.resource_type = ResourceType::kTopic;
  ASSERT_EQ(acls_->List(topics).size(), 1u);
  // A file entry cannot be deleted through the store.
  AclFilter ops;
  ops.principal = "User:ops";
  auto deleted = acls_->Delete({ops});
  ASSERT_TRUE(deleted.ok());
  EXPECT_THAT(*deleted, IsEmpty());
  EXPECT_TRUE(
      authorizer_->Authorize("User:ops", ResourceType::kCluster, "conduit", Operation::kAlter)
          .allowed);
}

TEST_F(SecurityStoreTest, WithoutAuthorisationChangesAreRefused) {
  AclRegistry off(store_.get(), nullptr);
  auto created = off.Create({Entry("allow User:bob topic literal t Read")});
  EXPECT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(created.status().message(), HasSubstr("--authorization"));
  EXPECT_THAT(acls_->List({}), IsEmpty());
}

TEST_F(SecurityStoreTest, AuditIdsIncreaseAcrossAReopen) {
  trail_->Record(Record("User:a", "t1", true, t0_));
  trail_->Record(Record("User:b", "t2", false, t0_ + absl::Seconds(1)));
  EXPECT_THAT(Ids({}), ElementsAre(1, 2));
  Reopen();
  trail_->Record(Record("User:a", "t3", true, t0_ + absl::Seconds(2)));
  auto page = trail_->List({});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->records.size(), 3u);
  EXPECT_EQ(page->records[2].id, 3u);
  EXPECT_EQ(page->records[1], [&] {
    auto r = Record("User:b", "t2", false, t0_ + absl::Seconds(1));
    r.id = 2;
    return r;
  }());
  EXPECT_EQ(page->next_after_id, 0u);
}

TEST_F(SecurityStoreTest, AuditQueriesFilterAndPage) {
  for (int i = 0; i < 10; ++i) {
    trail_->Record(Record(i % 2 ? "User:b" : "User:a", "t" + std::to_string(i % 3), i % 4 != 0,
                          t0_ + absl::Seconds(i)));
  }
  AuditQuery by_b;
  by_b.principal = "User:b";
  EXPECT_THAT(Ids(by_b), ElementsAre(2, 4, 6, 8, 10));
  AuditQuery denied;
  denied.denied_only = true;
  EXPECT_THAT(Ids(denied), ElementsAre(1, 5, 9));
  AuditQuery t1;
  t1.resource_name = "t1";
  EXPECT_THAT(Ids(t1), ElementsAre(2, 5, 8));
  AuditQuery since;
  since.since = t0_ + absl::Seconds(7);
  EXPECT_THAT(Ids(since), ElementsAre(8, 9, 10));
  AuditQuery page;
  page.limit = 4;
  uint64_t next = 0;
  EXPECT_THAT(Ids(page, &next), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(next, 4u);
  page.after_id = next;
  EXPECT_THAT(Ids(page, &next), ElementsAre(5, 6, 7, 8));
  page.after_id = next;
  EXPECT_THAT(Ids(page, &next), ElementsAre(9, 10));
  EXPECT_EQ(next, 0u);
  AuditQuery too_many;
  too_many.limit = kMaxAuditPage + 1;
  EXPECT_EQ(trail_->List(too_many).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SecurityStoreTest, TrimRemovesOnlyRecordsPastTheRetention) {
  for (int i = 0; i < 5; ++i) trail_->Record(Record("User:a", "t", true, t0_ + absl::Hours(i)));
  auto removed = trail_->Trim(t0_ + absl::Hours(2));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2u);
  EXPECT_THAT(Ids({}), ElementsAre(3, 4, 5));
  EXPECT_EQ(*trail_->Trim(t0_ + absl::Hours(2)), 0u);
  // Everything past the retention: the newest stays, so ids go on after a restart.
  EXPECT_EQ(*trail_->Trim(t0_ + absl::Hours(100)), 2u);
  EXPECT_THAT(Ids({}), ElementsAre(5));
  Reopen();
  trail_->Record(Record("User:a", "t", true, t0_ + absl::Hours(6)));
  EXPECT_THAT(Ids({}), ElementsAre(5, 6));
}

}  // namespace
}  // namespace conduit::security_service
