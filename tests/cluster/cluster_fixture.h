#pragma once

// A Conduit cluster of real processes for tests: one etcd (EtcdProcess; a test may bring its own
// etcd members instead: EtcdEndpoints) and N conduit-broker processes in cluster mode on free
// 127.0.0.1 ports, each with its own data dir, 2 s leases.
// Everything started is killed when the fixture goes, also when a test fails.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/testing/etcd_process.h"
#include "common/testing/temp_dir.h"
#include "tests/support/log_client.h"
#include "tests/support/server_process.h"

namespace conduit::testing {

inline constexpr absl::Duration kLeaseTtl = absl::Seconds(2);

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.Start().ok()); }

  // What brokers get as --etcd-endpoints: the fixture's one etcd. A test on several etcd members
  // starts them in its own SetUp and returns their endpoints, comma-separated, here.
  virtual std::string EtcdEndpoints() const { return etcd_.endpoint(); }

  static std::string BrokerBinary() {
    const char* dir = std::getenv("CONDUIT_BIN_DIR");
    return std::string(dir ? dir : "build/bin") + "/conduit-broker";
  }

  // Starts (or restarts, on the same data dir) broker `id`; returns whether it serves.
  bool StartBroker(int32_t id, std::vector<std::string> extra = {}) {
    const std::string work = dir_.Sub(absl::StrCat("broker-", id));
    std::filesystem::create_directories(work);
    std::vector<std::string> args = {
        "--etcd-endpoints", EtcdEndpoints(), "--broker-id",      std::to_string(id),
        "--cluster-name",   "test",          "--etcd-lease-ttl", "2s",
        "--log-level",      "info"};
    args.insert(args.end(), extra.begin(), extra.end());
    brokers_[id] = std::make_unique<ServerProcess>(BrokerBinary(), DataDir(id), work, args);
    if (!brokers_[id]->running()) return false;
    clients_[id] = std::make_unique<LogClient>(brokers_[id]->address());
    return true;
  }
  void StartBrokers(int n) {
    for (int32_t id = 1; id <= n; ++id) ASSERT_TRUE(StartBroker(id)) << "broker " << id;
    ASSERT_TRUE(Eventually([&] { return Metadata(1).brokers_size() == n; }))
        << "all brokers registered";
  }

  // Broker `id`'s --data-dir (its store is DataDir(id) + "/broker").
  std::string DataDir(int32_t id) { return dir_.Sub(absl::StrCat("broker-", id)) + "/data"; }
  ServerProcess& broker(int32_t id) { return *brokers_.at(id); }
  LogClient& client(int32_t id) { return *clients_.at(id); }
  std::string address(int32_t id) { return brokers_.at(id)->address(); }
  std::string log(int32_t id) {
    std::ifstream in(dir_.Sub(absl::StrCat("broker-", id)) + "/server.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  logpb::GetMetadataResponse Metadata(int32_t via, const std::string& topic = "") {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx, absl::Seconds(5));
    logpb::GetMetadataRequest request;
    if (!topic.empty()) request.add_topics(topic);
    logpb::GetMetadataResponse response;
    (void)client(via).stub()->GetMetadata(&ctx, request, &response);
    return response;
  }
  // The partitions of `topic` as broker `via` sees them (empty until placed).
  std::vector<logpb::PartitionMetadata> Partitions(int32_t via, const std::string& topic) {
    logpb::GetMetadataResponse m = Metadata(via, topic);
    if (m.topics_size() != 1) return {};
    return {m.topics(0).partitions().begin(), m.topics(0).partitions().end()};
  }
  // The broker id of `address` in broker `via`'s metadata.
  int32_t IdOf(int32_t via, const std::string& address) {
    for (const auto& b : Metadata(via).brokers())
      if (b.address() == address) return b.id();
    return -1;
  }

  // Polls `ready` every 50 ms up to `timeout` (leases are real etcd leases here).
  template <typename Pred>
  static bool Eventually(Pred ready, absl::Duration timeout = absl::Seconds(15)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!ready()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }

  // Waits until every running broker serves each partition of `topic` or refuses it naming the
  // leader: until then a broker that has not applied the new metadata answers UNAVAILABLE
  // (retry shortly), as clients are told.
  bool AwaitApplied(const std::string& topic, int partitions) {
    return Eventually([&] {
      for (auto& [id, c] : clients_) {
        if (!brokers_.at(id)->running()) continue;
        for (int p = 0; p < partitions; ++p) {
          logpb::FetchResponse ignored;
          grpc::StatusCode code = c->Fetch(topic, p, 0, &ignored).error_code();
          if (code != grpc::StatusCode::OK && code != grpc::StatusCode::FAILED_PRECONDITION) {
            return false;
          }
        }
      }
      return true;
    });
  }

  // One record to `partition` of `topic` through broker `via` (no redirect), with `acks`;
  // its offset in *offset when acknowledged.
  grpc::Status ProduceOne(int32_t via, const std::string& topic, int32_t partition,
                          const std::string& value, int64_t* offset = nullptr,
                          logpb::Acks acks = logpb::ACKS_UNSPECIFIED) {
    logpb::ProduceRequest request;
    request.set_topic(topic);
    request.set_acks(acks);
    auto* record = request.add_records();
    record->set_partition(partition);
    record->set_value(value);
    logpb::ProduceResponse response;
    grpc::Status status = client(via).Produce(request, &response, absl::Seconds(5));
    if (status.ok() && offset != nullptr) *offset = response.positions(0).offset();
    return status;
  }
  // DescribeTopic's view of one partition at broker `id` (empty when it cannot answer).
  logpb::PartitionInfo Described(int32_t id, const std::string& topic, int32_t partition) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx, absl::Seconds(5));
    logpb::DescribeTopicRequest request;
    request.set_name(topic);
    logpb::DescribeTopicResponse response;
    if (!client(id).stub()->DescribeTopic(&ctx, request, &response).ok() ||
        response.partitions_size() <= partition) {
      return logpb::PartitionInfo();
    }
    return response.partitions(partition);
  }

  static grpc::Status CreateTopic(LogClient& via, const std::string& name, int partitions,
                                  int replication_factor = 1) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx, absl::Seconds(15));
    logpb::CreateTopicRequest request;
    request.set_name(name);
    request.set_partitions(partitions);
    request.set_replication_factor(replication_factor);
    logpb::CreateTopicResponse response;
    return via.stub()->CreateTopic(&ctx, request, &response);
  }

  TempDir dir_;
  EtcdProcess etcd_{dir_.path()};
  std::map<int32_t, std::unique_ptr<ServerProcess>> brokers_;
  std::map<int32_t, std::unique_ptr<LogClient>> clients_;
};

}  // namespace conduit::testing
