// Etcd faults under replicated partitions. A 3-member etcd on loopback
// (EtcdProcessCluster), three conduit-broker given all three endpoints, RF 3, min in-sync 2, 2 s
// leases, a 2 s replica lag time, acks-all produce throughout. The etcd leader member is killed
// (etcd elects another; produce goes on), then a second member (quorum lost: the data plane
// takes writes until each leader's own lease clock runs out, then refuses them UNAVAILABLE; no
// election, no in-sync change), then both come back (brokers confirm their leases and serve
// again). Every record acknowledged at any point is in the log exactly once at its offset, and
// the replicas converge.

#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/etcd/etcd_client.h"
#include "services/log_broker/cluster/metadata_codec.h"
#include "tests/cluster/cluster_fixture.h"

namespace conduit::testing {
namespace {

constexpr char kLagTime[] = "2s";

// What a broker's GetMetadata says of partition 0 (and the controller), for comparing.
struct Seen {
  int32_t leader = -1;
  int32_t epoch = -1;
  std::set<int32_t> isr;
  int32_t controller = -1;
  int64_t controller_epoch = -1;
  bool operator==(const Seen&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Seen& s) {
  os << "leader " << s.leader << " epoch " << s.epoch << " isr {";
  for (int32_t id : s.isr) os << " " << id;
  return os << " } controller " << s.controller << " epoch " << s.controller_epoch;
}

class EtcdQuorumTest : public ClusterTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcds_.Start().ok()) << "3-member etcd under " << dir_.path();
  }
  std::string EtcdEndpoints() const override { return etcds_.endpoints_flag(); }

  Seen SeenBy(int32_t via) {
    logpb::GetMetadataResponse m = Metadata(via, "t");
    Seen s;
    s.controller = m.controller_id();
    s.controller_epoch = m.controller_epoch();
    if (m.topics_size() == 1 && m.topics(0).partitions_size() == 1) {
      const auto& p = m.topics(0).partitions(0);
      s.leader = p.leader();
      s.epoch = p.leader_epoch();
      s.isr = {p.isr().begin(), p.isr().end()};
    }
    return s;
  }
  uint64_t TopicId() {
    logpb::GetMetadataResponse m = Metadata(1, "t");
    return m.topics_size() == 1 ? m.topics(0).topic_id() : 0;
  }

  // One record at partition 0 through broker `via` (no redirect), acks as the topic says (all).
  grpc::Status Produce(int32_t via, const std::string& value, int64_t* offset,
                       absl::Duration deadline) {
    logpb::ProduceRequest request;
    request.set_topic("t");
    auto* record = request.add_records();
    record->set_partition(0);
    record->set_value(value);
    logpb::ProduceResponse response;
    grpc::Status status = client(via).Produce(request, &response, deadline);
    if (status.ok()) *offset = response.positions(0).offset();
    return status;
  }
  // Produces one new value (never a retry of an earlier one, so an unacknowledged attempt that
  // was appended anyway cannot make an acknowledged value appear twice) and records an ack.
  grpc::Status ProduceNext(int32_t via, absl::Duration deadline = absl::Seconds(1)) {
    const std::string value = absl::StrCat("v", attempts_++);
    int64_t offset = -1;
    grpc::Status status = Produce(via, value, &offset, deadline);
    if (status.ok()) {
      EXPECT_TRUE(acked_.emplace(offset, value).second) << "offset " << offset << " acked twice";
    }
    return status;
  }

  // DescribeTopic's view of partition 0 at broker `id` (copied from replication_test.cc).
  logpb::PartitionInfo Described(int32_t id) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx, absl::Seconds(5));
    logpb::DescribeTopicRequest request;
    request.set_name("t");
    logpb::DescribeTopicResponse response;
    if (!client(id).stub()->DescribeTopic(&ctx, request, &response).ok() ||
        response.partitions_size() == 0) {
      return logpb::PartitionInfo();
    }
    return response.partitions(0);
  }
  // Every broker has the same log end and high watermark, at least `end`.
  bool Converged(int64_t end) {
    std::set<std::pair<int64_t, int64_t>> seen;
    for (int32_t id = 1; id <= 3; ++id) {
      logpb::PartitionInfo p = Described(id);
      if (p.log_end_offset() < end) return false;
      seen.emplace(p.log_end_offset(), p.high_watermark());
    }
    return seen.size() == 1 && seen.begin()->first == seen.begin()->second;
  }

  // A key of the cluster's metadata in etcd, read directly (linearizable: needs a quorum).
  static absl::StatusOr<etcd::KeyValue> Key(etcd::Client& etcd, const std::string& key) {
    absl::StatusOr<etcd::RangeResult> got = etcd.Get(key);
    if (!got.ok()) return got.status();
    if (got->kvs.size() != 1) return absl::NotFoundError(absl::StrCat("no key ", key));
    return got->kvs[0];
  }
  // The partition state's mod revision and each broker registration's create revision: a
  // controller or in-sync change moves the first, a broker joining again (its lease lost) the
  // others.
  absl::StatusOr<std::vector<int64_t>> Revisions(etcd::Client& etcd, uint64_t topic_id) {
    const log_broker::cluster::MetadataKeys keys("test");
    std::vector<int64_t> out;
    absl::StatusOr<etcd::KeyValue> partition =
        Key(etcd, keys.Partition(log_broker::TopicId(topic_id), 0));
    if (!partition.ok()) return partition.status();
    out.push_back(partition->mod_revision);
    for (int32_t id = 1; id <= 3; ++id) {
      absl::StatusOr<etcd::KeyValue> broker = Key(etcd, keys.Broker(id));
      if (!broker.ok()) return broker.status();
      out.push_back(broker->create_revision);
    }
    return out;
  }

  static double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

  EtcdProcessCluster etcds_{dir_.Sub("etcd")};
  std::map<int64_t, std::string> acked_;  // offset → value, every acknowledged record
  int attempts_ = 0;
};

TEST_F(EtcdQuorumTest, LosingEtcdQuorumStopsWritesAtTheLeaseAndChangesNothingUntilItReturns) {
  for (int32_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(StartBroker(id, {"--replica-lag-time", kLagTime})) << "broker " << id;
  }
  ASSERT_TRUE(Eventually([&] { return Metadata(1).brokers_size() == 3; }));
  ASSERT_TRUE(CreateTopic(client(1), "t", 1, 3).ok());
  ASSERT_TRUE(AwaitApplied("t", 1));
  ASSERT_TRUE(Eventually([&] { return SeenBy(1).isr.size() == 3; }));
  const int32_t leader = SeenBy(1).leader;
  ASSERT_NE(leader, -1);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(ProduceNext(leader).ok()) << i;

  auto etcd = etcd::Client::Connect(etcds_.endpoints());
  ASSERT_TRUE(etcd.ok());
  const uint64_t topic_id = TopicId();
  ASSERT_NE(topic_id, 0u);

  // a. Kill etcd's leader member: the other two elect one; produce goes on.
  const int first_killed = etcds_.AwaitLeader();
  ASSERT_GE(first_killed, 0);
  etcds_.member(first_killed).Kill();
  const absl::Time a_start = absl::Now();
  absl::Duration reelected = absl::InfiniteDuration();
  int a_ok = 0, a_failed = 0;
  std::string a_refusal;
  // For at least 3 s, until etcd has a leader again and the last write was acknowledged.
  for (bool last_ok = false; absl::Now() - a_start < absl::Seconds(3) ||
                             reelected == absl::InfiniteDuration() || !last_ok;) {
    ASSERT_LT(absl::Now() - a_start, absl::Seconds(10)) << "etcd elects a new leader";
    if (reelected == absl::InfiniteDuration() && etcds_.Leader() >= 0) {
      reelected = absl::Now() - a_start;
    }
    grpc::Status s = ProduceNext(leader);
    last_ok = s.ok();
    if (s.ok()) {
      ++a_ok;
    } else {
      ++a_failed;
      if (a_refusal.empty()) a_refusal = s.error_message();
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
      absl::SleepFor(absl::Milliseconds(50));  // a client's retry backoff
    }
  }
  std::cout << "a. etcd re-elected in " << Seconds(reelected) << " s; " << a_ok
            << " acks-all writes acknowledged and " << a_failed << " refused in "
            << Seconds(absl::Now() - a_start) << " s after the kill"
            << (a_refusal.empty() ? "" : " (first: \"" + a_refusal + "\")") << "\n";
  EXPECT_GT(a_ok, 0);

  // The state before quorum goes: every broker's view, and the partition key in etcd.
  const Seen before = SeenBy(leader);
  EXPECT_EQ(before.leader, leader) << "losing etcd's leader member moved no partition";
  EXPECT_EQ(before.isr, (std::set<int32_t>{1, 2, 3}));
  for (int32_t id = 1; id <= 3; ++id) EXPECT_EQ(SeenBy(id), before) << "broker " << id;
  absl::StatusOr<std::vector<int64_t>> revisions_before = Revisions(**etcd, topic_id);
  ASSERT_TRUE(revisions_before.ok()) << revisions_before.status();
  const int64_t acked_before_b = static_cast<int64_t>(acked_.size());

  // b. Kill a second member (the new leader): one of three left, no quorum. The leader broker
  // takes acks-all writes while its lease is valid by its own clock (confirmed by a keep-alive
  // sent less than a TTL ago, and the last one was sent at most TTL/3 before the kill), then
  // refuses them.
  const int second_killed = etcds_.Leader();
  ASSERT_GE(second_killed, 0);
  ASSERT_NE(second_killed, first_killed);
  etcds_.member(second_killed).Kill();
  const absl::Time b_start = absl::Now();
  absl::Duration first_refusal = absl::InfiniteDuration(), last_ok = -absl::InfiniteDuration();
  int b_ok = 0, b_indeterminate = 0;
  while (first_refusal == absl::InfiniteDuration()) {
    ASSERT_LT(absl::Now() - b_start, kLeaseTtl + absl::Seconds(3)) << "writes refused in time";
    // A short deadline, so that an attempt caught by the lease's end does not hide the refusals.
    grpc::Status s = ProduceNext(leader, absl::Milliseconds(250));
    const absl::Duration at = absl::Now() - b_start;
    if (s.ok()) {
      ++b_ok;
      last_ok = at;
    } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
               absl::StrContains(s.error_message(), "cannot confirm its etcd lease")) {
      first_refusal = at;
    } else {
      // Appended while the lease held, but the high watermark stops with the lease: outcome
      // unknown to the client (the deadline), never a success.
      ++b_indeterminate;
      EXPECT_THAT(s.error_code(), ::testing::AnyOf(grpc::StatusCode::DEADLINE_EXCEEDED,
                                                   grpc::StatusCode::UNAVAILABLE))
          << s.error_message();
    }
  }
  std::cout << "b. quorum lost: " << b_ok << " acks-all writes acknowledged, the last "
            << Seconds(last_ok) << " s after the kill; " << b_indeterminate
            << " indeterminate; writes refused (\"cannot confirm its etcd lease\") from "
            << Seconds(first_refusal) << " s\n";
  EXPECT_GT(b_ok, 0) << "the leader goes on while its lease holds by its clock";
  EXPECT_GE(first_refusal, kLeaseTtl - kLeaseTtl / 3 - absl::Milliseconds(300))
      << "not refused before the lease could have run out";
  EXPECT_LE(last_ok, kLeaseTtl + absl::Milliseconds(200))
      << "nothing acknowledged once the lease has run out";
  // Refused from then on, at once; reads of what the leader has go on.
  for (int i = 0; i < 5; ++i) {
    grpc::Status s = ProduceNext(leader);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  std::vector<logpb::Record> during;
  EXPECT_TRUE(client(leader).FetchAll("t", 0, &during).ok());
  EXPECT_GE(during.size(), acked_.size()) << "fetch serves every acknowledged record";
  // No election, no in-sync change: every broker still sees the state from before, also after
  // longer than a lease (the controller would have set a dead broker's partitions offline).
  absl::SleepFor(kLeaseTtl);  // giving a controller time to act if it could (it cannot)
  for (int32_t id = 1; id <= 3; ++id) EXPECT_EQ(SeenBy(id), before) << "broker " << id;
  const absl::Duration quorum_lost_for_at_least = absl::Now() - b_start;

  // c. Restart both members: quorum returns, the brokers confirm their leases and serve.
  ASSERT_TRUE(etcds_.StartMembers({first_killed, second_killed}).ok());
  const absl::Time c_start = absl::Now();
  std::cout << "c. quorum back after " << Seconds(c_start - b_start) << " s without it (members"
            << " restarted and healthy in " << Seconds(c_start - b_start - quorum_lost_for_at_least)
            << " s)\n";
  int c_refused = 0;
  for (;;) {
    ASSERT_LT(absl::Now() - c_start, absl::Seconds(10)) << "the leader serves again";
    grpc::Status s = ProduceNext(leader);
    if (s.ok()) break;
    ++c_refused;
    absl::SleepFor(absl::Milliseconds(50));  // a client's retry backoff
  }
  const absl::Duration serving_again = absl::Now() - c_start;
  std::cout << "c. the leader acknowledged again " << Seconds(serving_again) << " s after quorum ("
            << c_refused << " refused meanwhile)\n";
  EXPECT_LT(serving_again, kLeaseTtl + absl::Seconds(1)) << "a keep-alive or two";

  // Nothing was changed in etcd while quorum was gone, or since: the partition state has its
  // old mod revision, every broker its first registration (its lease outlived the outage: a new
  // etcd leader renews every lease for a TTL), and every broker has the view from before.
  absl::StatusOr<std::vector<int64_t>> revisions_after = Revisions(**etcd, topic_id);
  ASSERT_TRUE(revisions_after.ok()) << revisions_after.status();
  EXPECT_EQ(*revisions_after, *revisions_before)
      << "partition state mod revision, then brokers 1-3's registration create revisions";
  for (int32_t id = 1; id <= 3; ++id) EXPECT_EQ(SeenBy(id), before) << "broker " << id;

  for (int i = 0; i < 10; ++i) ASSERT_TRUE(ProduceNext(leader).ok()) << i;
  const int64_t end = acked_.rbegin()->first + 1;
  EXPECT_TRUE(Eventually([&] { return Converged(end); })) << "the replicas converge";
  std::vector<logpb::Record> records;
  ASSERT_TRUE(client(leader).FetchAll("t", 0, &records).ok());
  std::map<std::string, std::vector<int64_t>> offsets_of;  // value → offsets holding it
  for (const auto& r : records) offsets_of[r.value()].push_back(r.offset());
  for (const auto& [offset, value] : acked_) {
    EXPECT_THAT(offsets_of[value], ::testing::ElementsAre(offset)) << value;
  }
  std::cout << "acknowledged " << acked_.size() << " records (" << acked_before_b
            << " before quorum was lost) of " << attempts_ << " attempts; the log holds "
            << records.size() << "\n";
}

}  // namespace
}  // namespace conduit::testing
