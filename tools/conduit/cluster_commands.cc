// conduit cluster describe|reassign
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "tools/conduit/cli.h"

namespace conduit::cli {
namespace {

namespace lpb = ::conduit::log::v1;
using Stub = lpb::LogService::Stub;

std::string BrokerList(const google::protobuf::RepeatedField<int32_t>& ids) {
  return ids.empty() ? "-" : absl::StrJoin(ids, ",");
}

void PrintBrokers(const lpb::GetMetadataResponse& resp) {
  std::vector<lpb::BrokerMetadata> brokers(resp.brokers().begin(), resp.brokers().end());
  std::sort(brokers.begin(), brokers.end(),
            [](const auto& a, const auto& b) { return a.id() < b.id(); });
  Table t({"BROKER", "ADDRESS", "CONTROLLER"});
  for (const auto& broker : brokers) {
    t.Add({std::to_string(broker.id()), broker.address().empty() ? "-" : broker.address(),
           broker.id() == resp.controller_id() ? "yes" : "no"});
  }
  t.Print();
}

// Every partition, by topic name and partition.
void PrintPartitions(const lpb::GetMetadataResponse& resp) {
  std::vector<const lpb::TopicMetadata*> topics;
  for (const auto& t : resp.topics()) topics.push_back(&t);
  std::sort(topics.begin(), topics.end(),
            [](const auto* a, const auto* b) { return a->name() < b->name(); });
  Table t({"TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "MOVING-TO"});
  for (const lpb::TopicMetadata* topic : topics) {
    if (topic->partitions().empty()) t.Add({topic->name(), "-", "unplaced", "-", "-", "-", "-"});
    std::vector<lpb::PartitionMetadata> parts(topic->partitions().begin(),
                                              topic->partitions().end());
    std::sort(parts.begin(), parts.end(),
              [](const auto& a, const auto& b) { return a.partition() < b.partition(); });
    for (const auto& p : parts) {
      t.Add({topic->name(), std::to_string(p.partition()),
             p.leader() < 0 ? "offline" : std::to_string(p.leader()),
             std::to_string(p.leader_epoch()), BrokerList(p.replicas()), BrokerList(p.isr()),
             BrokerList(p.target_replicas())});
    }
  }
  t.Print();
}

// The summary line, the brokers, a blank line, the partitions.
void PrintCluster(const lpb::GetMetadataResponse& resp) {
  const std::string controller = resp.controller_id() < 0
                                     ? std::string("none elected")
                                     : absl::StrCat("broker ", resp.controller_id());
  std::printf("cluster %s: %d brokers, controller %s (epoch %lld), answered by broker %d\n",
              resp.cluster().empty() ? "(single node)" : resp.cluster().c_str(),
              resp.brokers_size(), controller.c_str(),
              static_cast<long long>(resp.controller_epoch()), resp.answered_by());
  PrintBrokers(resp);
  std::puts("");
  PrintPartitions(resp);
}

void AddClusterDescribe(CLI::App* cluster, const Globals& g, Action* run) {
  auto topics = std::make_shared<std::vector<std::string>>();
  auto* cmd = Command(
      cluster, "describe",
      "brokers, the controller, and per partition its leader, leader epoch, replicas and ISR", run,
      [&g, topics] {
        return [&g, topics] {
          lpb::GetMetadataRequest req;
          for (const std::string& t : *topics) req.add_topics(t);
          return Call<lpb::GetMetadataRequest, lpb::GetMetadataResponse>(g, &Stub::GetMetadata, req,
                                                                         PrintCluster);
        };
      });
  cmd->add_option("topics", *topics, "only these topics (default: every topic)");
}

void AddClusterReassign(CLI::App* cluster, const Globals& g, Action* run) {
  auto req = std::make_shared<lpb::ReassignPartitionRequest>();
  auto replicas = std::make_shared<std::vector<int32_t>>();
  auto* cmd = Command(
      cluster, "reassign",
      "move a partition's replicas (the first leads once all are in sync); progress in describe",
      run, [&g, req, replicas] {
        return [&g, req, replicas] {
          req->clear_replicas();
          for (int32_t b : *replicas) req->add_replicas(b);
          return Call<lpb::ReassignPartitionRequest, lpb::ReassignPartitionResponse>(
              g, &Stub::ReassignPartition, *req, [&](const auto&) {
                std::printf("reassigning %s/%d to brokers %s\n", req->topic().c_str(),
                            req->partition(), absl::StrJoin(*replicas, ",").c_str());
              });
        };
      });
  cmd->add_option_function<std::string>(
         "topic", [req](const std::string& v) { req->set_topic(v); }, "topic name")
      ->required();
  cmd->add_option_function<int32_t>(
         "partition", [req](int32_t v) { req->set_partition(v); }, "partition")
      ->required();
  cmd->add_option("--replicas", *replicas, "broker ids, comma-separated (the first preferred)")
      ->delimiter(',')
      ->required();
  cmd->add_option_function<int64_t>(
      "--throttle-bytes",
      [req](int64_t v) { req->set_throttle_bytes_per_second(v); },
      "bytes/s a new replica copies while catching up (default: unthrottled)");
}

}  // namespace

void AddClusterCommands(CLI::App& app, const Globals& g, Action* run) {
  CLI::App* cluster = app.add_subcommand("cluster", "the cluster's brokers and partition leaders");
  cluster->require_subcommand(1);
  AddClusterDescribe(cluster, g, run);
  AddClusterReassign(cluster, g, run);
}

}  // namespace conduit::cli
