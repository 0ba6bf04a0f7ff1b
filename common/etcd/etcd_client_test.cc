#include "common/etcd/etcd_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/etcd/etcd_test_fixture.h"

// KV, Txn, errors and endpoints against a real etcd (one per test). Leases and watches are in
// etcd_lease_test.cc and etcd_watch_test.cc.

namespace conduit::etcd {
namespace {

using ::testing::HasSubstr;

// A 127.0.0.1 port nothing listens on (bound, then closed).
std::string DeadEndpoint() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
}

TEST_F(EtcdTest, PutGetPrefixAndDeleteRoundTripWithRevisionsIncreasing) {
  ASSERT_OK_AND_ASSIGN(const int64_t first, client_->Put("/app/a", "1"));
  ASSERT_OK_AND_ASSIGN(const int64_t second, client_->Put("/app/b", "2"));
  ASSERT_OK_AND_ASSIGN(const int64_t sibling, client_->Put("/apple", "not under /app/"));
  ASSERT_OK_AND_ASSIGN(const int64_t third, client_->Put("/app/a", "3"));
  EXPECT_LT(first, second);
  EXPECT_LT(second, sibling);
  EXPECT_LT(sibling, third);

  ASSERT_OK_AND_ASSIGN(const RangeResult one, client_->Get("/app/a"));
  ASSERT_EQ(one.kvs.size(), 1u);
  EXPECT_EQ(one.kvs[0].value, "3");
  EXPECT_EQ(one.kvs[0].create_revision, first);
  EXPECT_EQ(one.kvs[0].mod_revision, third);
  EXPECT_EQ(one.kvs[0].version, 2);
  EXPECT_EQ(one.kvs[0].lease, LeaseId());
  EXPECT_EQ(one.revision, third);

  ASSERT_OK_AND_ASSIGN(const RangeResult under, client_->GetPrefix("/app/"));
  ASSERT_EQ(under.kvs.size(), 2u);  // not /apple
  EXPECT_EQ(under.kvs[0].key, "/app/a");
  EXPECT_EQ(under.kvs[1].key, "/app/b");
  EXPECT_EQ(under.kvs[1].value, "2");

  ASSERT_OK_AND_ASSIGN(const RangeResult missing, client_->Get("/app/none"));
  EXPECT_TRUE(missing.kvs.empty());
  EXPECT_EQ(missing.revision, third);

  ASSERT_OK_AND_ASSIGN(const DeleteResult gone, client_->Delete("/app/a"));
  EXPECT_EQ(gone.deleted, 1);
  EXPECT_EQ(gone.revision, third + 1);
  ASSERT_OK_AND_ASSIGN(const DeleteResult nothing, client_->Delete("/app/a"));
  EXPECT_EQ(nothing.deleted, 0);
  EXPECT_EQ(nothing.revision, gone.revision);  // deleting nothing changes nothing

  ASSERT_OK_AND_ASSIGN(const DeleteResult prefix, client_->DeletePrefix("/app/"));
  EXPECT_EQ(prefix.deleted, 1);
  ASSERT_OK_AND_ASSIGN(const RangeResult all, client_->GetPrefix(""));
  ASSERT_EQ(all.kvs.size(), 1u);
  EXPECT_EQ(all.kvs[0].key, "/apple");
}

Txn CreateIfAbsent(const std::string& key, const std::string& value) {
  Txn txn;
  txn.If(Compare::Version(key, CompareOp::kEqual, 0)).Then(Op::Put(key, value)).Else(Op::Get(key));
  return txn;
}

TEST_F(EtcdTest, OfTwoCreateIfAbsentTxnsExactlyOneSucceeds) {
  ASSERT_OK_AND_ASSIGN(const TxnResult winner, client_->Commit(CreateIfAbsent("/topic", "w")));
  ASSERT_OK_AND_ASSIGN(const TxnResult loser, client_->Commit(CreateIfAbsent("/topic", "l")));

  EXPECT_TRUE(winner.succeeded);
  ASSERT_EQ(winner.responses.size(), 1u);
  EXPECT_EQ(winner.responses[0].kind, Op::Kind::kPut);

  EXPECT_FALSE(loser.succeeded);
  EXPECT_EQ(loser.revision, winner.revision);  // the losing Txn wrote nothing
  ASSERT_EQ(loser.responses.size(), 1u);
  EXPECT_EQ(loser.responses[0].kind, Op::Kind::kGet);
  ASSERT_EQ(loser.responses[0].range.kvs.size(), 1u);
  EXPECT_EQ(loser.responses[0].range.kvs[0].value, "w");
  EXPECT_EQ(loser.responses[0].range.kvs[0].create_revision, winner.revision);
}

TEST_F(EtcdTest, TxnComparingAStaleModRevisionChangesNothing) {
  ASSERT_OK_AND_ASSIGN(const int64_t read, client_->Put("/state", "v1"));
  ASSERT_OK_AND_ASSIGN(const int64_t changed, client_->Put("/state", "v2"));  // someone else
  Txn txn;
  txn.If(Compare::ModRevision("/state", CompareOp::kEqual, read))
      .Then(Op::Put("/state", "mine"))
      .Then(Op::Delete("/other"));
  ASSERT_OK_AND_ASSIGN(const TxnResult result, client_->Commit(txn));
  EXPECT_FALSE(result.succeeded);
  EXPECT_TRUE(result.responses.empty());  // no Else ops
  EXPECT_EQ(result.revision, changed);
  ASSERT_OK_AND_ASSIGN(const RangeResult now, client_->Get("/state"));
  ASSERT_EQ(now.kvs.size(), 1u);
  EXPECT_EQ(now.kvs[0].value, "v2");
  EXPECT_EQ(now.kvs[0].mod_revision, changed);
}

TEST_F(EtcdTest, TxnRunsEveryKindOfOpAndCompare) {
  ASSERT_OK_AND_ASSIGN(const int64_t created, client_->Put("/t/owner", "me"));
  ASSERT_OK(client_->Put("/t/old/1", "x").status());
  ASSERT_OK(client_->Put("/t/old/2", "y").status());
  ASSERT_OK_AND_ASSIGN(const Lease lease, client_->Grant(30));
  Txn txn;
  txn.If(Compare::CreateRevision("/t/owner", CompareOp::kEqual, created))
      .If(Compare::Value("/t/owner", CompareOp::kEqual, "me"))
      .If(Compare::Version("/t/owner", CompareOp::kLess, 2))
      .If(Compare::ModRevision("/t/owner", CompareOp::kGreater, 0))
      .If(Compare::Value("/t/owner", CompareOp::kNotEqual, "you"))
      .Then(Op::Put("/t/leased", "v", lease.id))
      .Then(Op::DeletePrefix("/t/old/"))
      .Then(Op::GetPrefix("/t/"));
  ASSERT_OK_AND_ASSIGN(const TxnResult result, client_->Commit(txn));
  ASSERT_TRUE(result.succeeded);
  ASSERT_EQ(result.responses.size(), 3u);
  EXPECT_EQ(result.responses[0].kind, Op::Kind::kPut);
  EXPECT_EQ(result.responses[1].kind, Op::Kind::kDelete);
  EXPECT_EQ(result.responses[1].deleted, 2);
  ASSERT_EQ(result.responses[2].kind, Op::Kind::kGet);
  const RangeResult& seen = result.responses[2].range;  // sees the Txn's own writes
  ASSERT_EQ(seen.kvs.size(), 2u);
  EXPECT_EQ(seen.kvs[0].key, "/t/leased");
  EXPECT_EQ(seen.kvs[0].lease, lease.id);
  EXPECT_EQ(seen.kvs[1].key, "/t/owner");
}

TEST_F(EtcdTest, EtcdErrorsKeepTheirCodes) {
  ASSERT_OK_AND_ASSIGN(const int64_t revision, client_->Put("/k", "v"));
  absl::Status future = client_->Compact(revision + 100);
  EXPECT_TRUE(absl::IsOutOfRange(future)) << future;
  EXPECT_THAT(future.message(), HasSubstr("etcd Compact: "));
  absl::StatusOr<int64_t> no_lease = client_->Put("/k", "v", LeaseId(12345));
  EXPECT_TRUE(absl::IsNotFound(no_lease.status())) << no_lease.status();
  absl::StatusOr<RangeResult> empty_key = client_->Get("");
  EXPECT_TRUE(absl::IsInvalidArgument(empty_key.status())) << empty_key.status();
  EXPECT_TRUE(absl::IsInvalidArgument(client_->DeletePrefix("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Client::Connect({}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Client::Connect({"https://127.0.0.1:1"}).status()));
}

TEST_F(EtcdTest, KilledEtcdIsUnreachableAndTheSameClientWorksOnceItIsBack) {
  ASSERT_OK_AND_ASSIGN(const int64_t written, client_->Put("/durable", "kept"));
  etcd_.Kill();

  absl::Time start = absl::Now();
  absl::StatusOr<RangeResult> read = client_->Get("/durable");
  EXPECT_TRUE(absl::IsUnavailable(read.status())) << read.status();
  EXPECT_THAT(read.status().message(),
              HasSubstr(absl::StrCat("etcd unreachable: ", etcd_.endpoint(), ": ")));
  absl::StatusOr<int64_t> write = client_->Put("/durable", "lost");
  EXPECT_TRUE(absl::IsUnavailable(write.status())) << write.status();
  EXPECT_THAT(write.status().message(), HasSubstr("etcd unreachable: "));
  EXPECT_LT(absl::Now() - start, 2 * kRequestTimeout + absl::Milliseconds(500));

  ASSERT_OK(etcd_.Start());  // same data dir, same port
  ASSERT_OK_AND_ASSIGN(const RangeResult after, GetOnceReachable("/durable"));
  ASSERT_EQ(after.kvs.size(), 1u);
  EXPECT_EQ(after.kvs[0].value, "kept");
  EXPECT_EQ(after.kvs[0].mod_revision, written);
  ASSERT_OK_AND_ASSIGN(const int64_t again, client_->Put("/durable", "new"));
  EXPECT_GT(again, written);
}

TEST_F(EtcdTest, StoppedEtcdRestartsWithItsData) {
  ASSERT_OK_AND_ASSIGN(const int64_t written, client_->Put("/durable", "kept"));
  EXPECT_TRUE(etcd_.Stop());  // SIGTERM: exits by itself
  EXPECT_FALSE(etcd_.running());
  ASSERT_OK(etcd_.Start());
  ASSERT_OK_AND_ASSIGN(const RangeResult after, GetOnceReachable("/durable"));
  ASSERT_EQ(after.kvs.size(), 1u);
  EXPECT_EQ(after.kvs[0].mod_revision, written);
}

TEST_F(EtcdTest, PausedEtcdIsUnreachableWithinTheRequestTimeout) {
  ASSERT_OK(client_->Put("/p", "v").status());  // the channel is connected
  etcd_.Pause();
  const absl::Time start = absl::Now();
  absl::StatusOr<RangeResult> read = client_->Get("/p");
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(read.status())) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("etcd unreachable: "));
  EXPECT_GE(took, kRequestTimeout - absl::Milliseconds(100));  // it waited for an answer
  EXPECT_LT(took, kRequestTimeout + absl::Milliseconds(500));
  absl::StatusOr<int64_t> write = client_->Put("/p", "maybe");
  EXPECT_TRUE(absl::IsUnavailable(write.status())) << write.status();
  EXPECT_THAT(write.status().message(), HasSubstr("may have applied"));  // sent, never answered
  etcd_.Resume();
  ASSERT_OK(GetOnceReachable("/p").status());
}

TEST_F(EtcdTest, WithTheFirstEndpointDeadCallsGoToTheSecond) {
  const std::string dead = DeadEndpoint();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> alone, Client::Connect({dead}, Options()));
  absl::StatusOr<RangeResult> refused = alone->Get("/k");
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat("etcd unreachable: ", dead)));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> both,
                       Client::Connect({dead, etcd_.endpoint()}, Options()));
  ASSERT_OK_AND_ASSIGN(const int64_t revision, both->Put("/k", "v"));  // a change, too
  ASSERT_OK_AND_ASSIGN(const RangeResult read, both->Get("/k"));
  ASSERT_EQ(read.kvs.size(), 1u);
  EXPECT_EQ(read.kvs[0].mod_revision, revision);
  ASSERT_OK(both->Commit(CreateIfAbsent("/k2", "v")).status());
  ASSERT_OK_AND_ASSIGN(const Lease lease, both->Grant(10));
  ASSERT_OK(both->KeepAliveOnce(lease.id).status());
  WatchRecorder recorder;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> watch,
                       both->WatchKey("/k", revision, recorder.Handlers()));
  EXPECT_TRUE(recorder.AwaitEvents(1));

  // A fresh client starting at the dead endpoint gets there too, watch first.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> fresh,
                       Client::Connect({dead, etcd_.endpoint()}, Options()));
  WatchRecorder fresh_recorder;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> fresh_watch,
                       fresh->WatchKey("/k", revision, fresh_recorder.Handlers()));
  EXPECT_TRUE(fresh_recorder.AwaitEvents(1));
}

}  // namespace
}  // namespace conduit::etcd
