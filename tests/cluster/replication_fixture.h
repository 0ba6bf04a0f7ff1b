#pragma once

// The replication tests' cluster: etcd and three conduit-broker processes, topic "t"
// with RF 3 and min in-sync 2 (the default at RF 3), 2 s leases, a 2 s replica lag time. Faults
// are real (SIGKILL, SIGSTOP). Once the brokers are stopped, each one's copy of a partition can
// be read back from its data dir (replica_contents.h) to compare the copies by content.

#include <signal.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/replica_contents.h"

namespace conduit::testing {

inline constexpr char kLagTime[] = "2s";

class ReplicationTest : public ClusterTest {
 protected:
  void StartReplicatedCluster(int partitions = 1) {
    for (int32_t id = 1; id <= 3; ++id) {
      ASSERT_TRUE(StartBroker(id, {"--replica-lag-time", kLagTime})) << "broker " << id;
    }
    ASSERT_TRUE(Eventually([&] { return Metadata(1).brokers_size() == 3; }));
    ASSERT_TRUE(CreateTopic(client(1), "t", partitions, 3).ok());
    ASSERT_TRUE(AwaitApplied("t", partitions));
  }

  // A partition's state as broker `via` has applied it.
  logpb::PartitionMetadata State(int32_t via, int32_t partition = 0) {
    auto parts = Partitions(via, "t");
    return static_cast<int32_t>(parts.size()) <= partition ? logpb::PartitionMetadata()
                                                           : parts[partition];
  }
  int32_t Leader(int32_t via, int32_t partition = 0) { return State(via, partition).leader(); }

  // One record at partition 0 through broker `via` (no redirect), with `acks`.
  grpc::Status Produce(int32_t via, const std::string& value, int64_t* offset = nullptr,
                       logpb::Acks acks = logpb::ACKS_UNSPECIFIED) {
    return ProduceOne(via, "t", 0, value, offset, acks);
  }

  // Sets the topic's unclean_leader_election through broker `via`.
  grpc::Status AllowUncleanElection(int32_t via) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::UpdateTopicConfigRequest request;
    request.set_name("t");
    request.mutable_config()->set_unclean_leader_election(true);
    logpb::UpdateTopicConfigResponse response;
    return client(via).stub()->UpdateTopicConfig(&ctx, request, &response);
  }

  // DescribeTopic's view of a partition at broker `id`.
  logpb::PartitionInfo Described(int32_t id, int32_t partition = 0) {
    return ClusterTest::Described(id, "t", partition);
  }

  // Every broker in `ids` has the same log end and high watermark of the partition, at least
  // `end`.
  bool Converged(const std::vector<int32_t>& ids, int64_t end, int32_t partition = 0) {
    std::set<std::pair<int64_t, int64_t>> seen;
    for (int32_t id : ids) {
      logpb::PartitionInfo p = Described(id, partition);
      if (p.log_end_offset() < end) return false;
      seen.emplace(p.log_end_offset(), p.high_watermark());
    }
    return seen.size() == 1 && seen.begin()->first == seen.begin()->second;
  }

  // Stops every running broker for good: all SIGSTOPped first, so none sees another go (no
  // election or truncation in between), then SIGKILLed. What each wrote is in its files (the
  // topic is fsynced per write, and a killed process loses nothing the kernel has).
  void StopAllBrokers() {
    for (auto& [id, b] : brokers_) b->Signal(SIGSTOP);
    for (auto& [id, b] : brokers_) b->Kill(SIGKILL);
  }

  // Broker `id`'s copy of partition `partition` of "t" over [0, end), read from its data dir;
  // the broker must have stopped.
  absl::StatusOr<StoredPartition> StoredCopy(int32_t id, int32_t partition, int64_t end) {
    return ReadStoredPartition(DataDir(id), "t", partition, end);
  }

  // The checksum of what broker `leader` serves of a partition over [0, its high watermark)
  // (Fetch): ties the stored copies to what a consumer reads.
  grpc::Status ServedChecksum(int32_t leader, int32_t partition, RecordsChecksum* sum) {
    std::vector<logpb::Record> records;
    grpc::Status status = client(leader).FetchAll("t", partition, &records);
    for (const auto& r : records) sum->Add(r);
    return status;
  }
};

}  // namespace conduit::testing
