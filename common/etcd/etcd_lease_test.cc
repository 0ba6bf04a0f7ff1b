#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/etcd/etcd_client.h"
#include "common/etcd/etcd_test_fixture.h"

// Leases against a real etcd, whose test-speed timing (EtcdProcess) makes 1-2 s TTLs work. These
// tests wait on etcd's real clock, polling with deadlines: etcd is the thing under test.

namespace conduit::etcd {
namespace {

using ::testing::HasSubstr;

// Polls until the key is gone, up to `limit`; returns how long that took, or nullopt.
std::optional<absl::Duration> AwaitGone(Client& client, const std::string& key,
                                        absl::Duration limit) {
  const absl::Time start = absl::Now();
  while (absl::Now() - start < limit) {
    absl::StatusOr<RangeResult> read = client.Get(key);
    if (read.ok() && read->kvs.empty()) return absl::Now() - start;
    absl::SleepFor(absl::Milliseconds(50));  // polling etcd's own expiry
  }
  return std::nullopt;
}

TEST_F(EtcdTest, KeyOnALeaseGoesWhenTheLeaseExpiresWithoutKeepAlive) {
  ASSERT_OK_AND_ASSIGN(const Lease lease, client_->Grant(1));
  EXPECT_EQ(lease.ttl_seconds, 1);
  ASSERT_OK(client_->Put("/brokers/1", "me", lease.id).status());
  ASSERT_OK_AND_ASSIGN(const RangeResult present, client_->Get("/brokers/1"));
  ASSERT_EQ(present.kvs.size(), 1u);
  EXPECT_EQ(present.kvs[0].lease, lease.id);

  const std::optional<absl::Duration> gone = AwaitGone(*client_, "/brokers/1", absl::Seconds(5));
  ASSERT_TRUE(gone.has_value()) << "the key outlived its 1 s lease by 4 s";
  absl::StatusOr<int64_t> renewed = client_->KeepAliveOnce(lease.id);
  EXPECT_TRUE(absl::IsNotFound(renewed.status())) << renewed.status();
  EXPECT_THAT(renewed.status().message(), HasSubstr("not found (expired or revoked)"));
  EXPECT_TRUE(absl::IsNotFound(client_->TimeToLive(lease.id).status()));
}

TEST_F(EtcdTest, KeepAliveOnceEveryThirdOfTheTtlKeepsTheKeyPastTwiceTheTtl) {
  ASSERT_OK_AND_ASSIGN(const Lease lease, client_->Grant(2));
  ASSERT_EQ(lease.ttl_seconds, 2);
  ASSERT_OK(client_->Put("/brokers/2", "me", lease.id).status());
  const absl::Time until = absl::Now() + 2 * absl::Seconds(lease.ttl_seconds) + absl::Seconds(1);
  while (absl::Now() < until) {
    absl::SleepFor(absl::Seconds(lease.ttl_seconds) / 3);  // the keep-alive period under test
    ASSERT_OK_AND_ASSIGN(const int64_t ttl, client_->KeepAliveOnce(lease.id));
    EXPECT_EQ(ttl, 2);
    ASSERT_OK_AND_ASSIGN(const RangeResult read, client_->Get("/brokers/2"));
    ASSERT_EQ(read.kvs.size(), 1u) << "the key went while its lease was kept alive";
  }
  ASSERT_OK_AND_ASSIGN(const LeaseInfo info, client_->TimeToLive(lease.id, /*with_keys=*/true));
  EXPECT_EQ(info.granted_ttl_seconds, 2);
  EXPECT_GT(info.ttl_seconds, 0);
  EXPECT_THAT(info.keys, ::testing::ElementsAre("/brokers/2"));
}

TEST_F(EtcdTest, RevokeDeletesTheLeasesKeysAtOnce) {
  ASSERT_OK_AND_ASSIGN(const Lease lease, client_->Grant(60));
  ASSERT_OK(client_->Put("/controller/a", "1", lease.id).status());
  ASSERT_OK(client_->Put("/controller/b", "2", lease.id).status());
  ASSERT_OK(client_->Put("/controller/c", "unleased").status());
  ASSERT_OK(client_->Revoke(lease.id));
  ASSERT_OK_AND_ASSIGN(const RangeResult left, client_->GetPrefix("/controller/"));
  ASSERT_EQ(left.kvs.size(), 1u);
  EXPECT_EQ(left.kvs[0].key, "/controller/c");
  absl::Status again = client_->Revoke(lease.id);
  EXPECT_TRUE(absl::IsNotFound(again)) << again;
  EXPECT_TRUE(absl::IsNotFound(client_->KeepAliveOnce(lease.id).status()));
}

}  // namespace
}  // namespace conduit::etcd
