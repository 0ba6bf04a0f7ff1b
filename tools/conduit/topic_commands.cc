// conduit topic create|list|describe|alter|delete
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/grpc/proto_time.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "tools/conduit/cli.h"

namespace conduit::cli {
namespace {

namespace lpb = ::conduit::log::v1;

// Topic settings shared by create and alter; only those given are set.
struct ConfigFlags {
  std::string retention_time, retention_bytes, cleanup_policy, durability, dedup_window;
  std::string acks, unclean_leader_election;
  int min_insync_replicas = 0;  // 0: not given

  void Add(CLI::App* cmd) {
    cmd->add_option("--min-insync-replicas", min_insync_replicas,
                    "acks all needs this many in-sync replicas (1..replication factor)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--acks", acks, "all | leader: when a produce is answered (default all)")
        ->check(CLI::IsMember({"all", "leader"}));
    cmd->add_option("--unclean-leader-election", unclean_leader_election,
                    "true | false: elect a replica out of the in-sync set (may lose records)")
        ->check(CLI::IsMember({"true", "false"}));
    cmd->add_option("--retention-time", retention_time, "e.g. 7d, 12h; -1s keeps forever");
    cmd->add_option("--retention-bytes", retention_bytes, "per partition; -1: no limit");
    cmd->add_option("--cleanup-policy", cleanup_policy, "delete | compact | compact,delete")
        ->check(CLI::IsMember({"delete", "compact", "compact,delete"}));
    cmd->add_option("--durability", durability, "sync | interval")
        ->check(CLI::IsMember({"sync", "interval"}));
    cmd->add_option("--dedup-window", dedup_window, "skip repeated event ids within, e.g. 10m");
  }
  // Fills `config`; an error message for a bad value.
  std::string Fill(lpb::TopicConfig* config) const {
    absl::Duration d;
    if (!retention_time.empty()) {
      if (!ParseDuration(retention_time, &d)) return "bad --retention-time " + retention_time;
      grpc_util::SetDuration(d, config->mutable_retention_time());
    }
    if (!retention_bytes.empty()) {
      int64_t bytes;
      if (!absl::SimpleAtoi(retention_bytes, &bytes)) return "bad --retention-bytes";
      config->set_retention_bytes(bytes);
    }
    if (cleanup_policy == "delete") config->set_cleanup_policy(lpb::CLEANUP_POLICY_DELETE);
    if (cleanup_policy == "compact") config->set_cleanup_policy(lpb::CLEANUP_POLICY_COMPACT);
    if (cleanup_policy == "compact,delete") {
      config->set_cleanup_policy(lpb::CLEANUP_POLICY_COMPACT_DELETE);
    }
    if (durability == "sync") config->set_durability(lpb::DURABILITY_SYNC);
    if (durability == "interval") config->set_durability(lpb::DURABILITY_INTERVAL);
    if (!dedup_window.empty()) {
      if (!ParseDuration(dedup_window, &d)) return "bad --dedup-window " + dedup_window;
      grpc_util::SetDuration(d, config->mutable_dedup_window());
    }
    if (min_insync_replicas > 0) config->set_min_insync_replicas(min_insync_replicas);
    if (!acks.empty()) config->set_acks(acks == "all" ? lpb::ACKS_ALL : lpb::ACKS_LEADER);
    if (!unclean_leader_election.empty()) {
      config->set_unclean_leader_election(unclean_leader_election == "true");
    }
    return "";
  }
};

std::string ConfigText(const lpb::TopicConfig& c) {
  std::string policy = lpb::CleanupPolicy_Name(c.cleanup_policy());
  std::string out = absl::StrCat(lpb::Durability_Name(c.durability()), " ", policy);
  if (c.has_retention_time()) {
    absl::StrAppend(&out, " retention=", DurationText(grpc_util::FromDuration(c.retention_time())));
  }
  if (c.has_retention_bytes()) absl::StrAppend(&out, " retention_bytes=", c.retention_bytes());
  if (c.has_min_insync_replicas()) absl::StrAppend(&out, " min_insync=", c.min_insync_replicas());
  if (c.acks() != lpb::ACKS_UNSPECIFIED) {
    absl::StrAppend(&out, " acks=", c.acks() == lpb::ACKS_ALL ? "all" : "leader");
  }
  if (c.unclean_leader_election()) absl::StrAppend(&out, " unclean_leader_election");
  return out;
}

std::string BrokerList(const google::protobuf::RepeatedField<int32_t>& ids) {
  return ids.empty() ? "-" : absl::StrJoin(ids, ",");
}

// The partitions table, then, for those the answering broker leads, one line per follower.
void PrintDescription(const lpb::DescribeTopicResponse& resp) {
  std::printf("topic %s: %d partitions, replication factor %d, %s\n", resp.topic().name().c_str(),
              resp.topic().partitions(), resp.topic().replication_factor(),
              ConfigText(resp.topic().config()).c_str());
  Table t({"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START", "HIGH-WATERMARK",
           "RECORDS", "BYTES", "NEWEST-APPEND"});
  Table lag({"PARTITION", "FOLLOWER", "IN-SYNC", "LOG-END", "LAG-RECORDS", "LAG-SECONDS"});
  bool followers = false;
  for (const auto& p : resp.partitions()) {
    t.Add({std::to_string(p.partition()), p.leader() < 0 ? "offline" : std::to_string(p.leader()),
           std::to_string(p.leader_epoch()), BrokerList(p.replicas()), BrokerList(p.isr()),
           std::to_string(p.log_start_offset()), std::to_string(p.high_watermark()),
           std::to_string(p.record_count()), std::to_string(p.bytes()),
           p.has_newest_append_time() ? TimeText(grpc_util::FromTimestamp(p.newest_append_time()))
                                      : "-"});
    for (const auto& f : p.followers()) {
      followers = true;
      lag.Add({std::to_string(p.partition()), std::to_string(f.broker()),
               f.in_sync() ? "yes" : "no",
               f.log_end_offset() < 0 ? "-" : std::to_string(f.log_end_offset()),
               std::to_string(f.lag_records()),
               absl::StrFormat(
                   "%.1f", absl::ToDoubleSeconds(grpc_util::FromDuration(f.since_caught_up())))});
    }
  }
  t.Print();
  if (!followers) return;
  std::printf("\nfollowers of the partitions broker %d leads:\n", resp.answered_by());
  lag.Print();
}

using Stub = lpb::LogService::Stub;

void AddTopicCreate(CLI::App* topic, const Globals& g, Action* run) {
  auto name = std::make_shared<std::string>();
  auto partitions = std::make_shared<int>(1);
  auto replication_factor = std::make_shared<int>(0);  // 0: the server's default
  auto flags = std::make_shared<ConfigFlags>();
  auto* cmd = Command(
      topic, "create", "create a topic", run, [&g, name, partitions, replication_factor, flags] {
        return [&g, name, partitions, replication_factor, flags] {
          lpb::CreateTopicRequest req;
          req.set_name(*name);
          req.set_partitions(*partitions);
          if (*replication_factor > 0) req.set_replication_factor(*replication_factor);
          if (std::string err = flags->Fill(req.mutable_config()); !err.empty()) {
            return UsageError(err);
          }
          return Call<lpb::CreateTopicRequest, lpb::CreateTopicResponse>(
              g, &Stub::CreateTopic, req, [&](const lpb::CreateTopicResponse& resp) {
                std::printf("created topic %s with %d partitions, replication factor %d\n",
                            name->c_str(), *partitions, resp.topic().replication_factor());
              });
        };
      });
  cmd->add_option("name", *name, "topic name")->required();
  cmd->add_option("--partitions,-p", *partitions, "partition count")->capture_default_str();
  cmd->add_option("--replication-factor", *replication_factor,
                  "copies of each partition (default: 3 with 3+ live brokers, else 1)")
      ->check(CLI::PositiveNumber);
  flags->Add(cmd);
}

void AddTopicList(CLI::App* topic, const Globals& g, Action* run) {
  Command(topic, "list", "list topics", run, [&g] {
    return [&g] {
      return Call<lpb::ListTopicsRequest, lpb::ListTopicsResponse>(
          g, &Stub::ListTopics, {}, [](const lpb::ListTopicsResponse& resp) {
            Table t({"TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "CONFIG"});
            for (const auto& topic : resp.topics()) {
              t.Add({topic.name(), std::to_string(topic.partitions()),
                     std::to_string(topic.replication_factor()), ConfigText(topic.config())});
            }
            t.Print();
          });
    };
  });
}

void AddTopicDescribe(CLI::App* topic, const Globals& g, Action* run) {
  auto name = std::make_shared<std::string>();
  auto* cmd = Command(topic, "describe",
                      "partitions: replicas, in-sync set, log start, high watermark, size; "
                      "follower lag where the answering broker (the first --addr) leads",
                      run, [&g, name] {
                        return [&g, name] {
                          lpb::DescribeTopicRequest req;
                          req.set_name(*name);
                          return Call<lpb::DescribeTopicRequest, lpb::DescribeTopicResponse>(
                              g, &Stub::DescribeTopic, req, PrintDescription);
                        };
                      });
  cmd->add_option("name", *name, "topic name")->required();
}

void AddTopicAlter(CLI::App* topic, const Globals& g, Action* run) {
  auto name = std::make_shared<std::string>();
  auto flags = std::make_shared<ConfigFlags>();
  auto* cmd = Command(topic, "alter", "change settings (only those given)", run, [&g, name, flags] {
    return [&g, name, flags] {
      lpb::UpdateTopicConfigRequest req;
      req.set_name(*name);
      if (std::string err = flags->Fill(req.mutable_config()); !err.empty()) {
        return UsageError(err);
      }
      return Call<lpb::UpdateTopicConfigRequest, lpb::UpdateTopicConfigResponse>(
          g, &Stub::UpdateTopicConfig, req, [&](const lpb::UpdateTopicConfigResponse& resp) {
            std::printf("topic %s: %s\n", name->c_str(), ConfigText(resp.topic().config()).c_str());
          });
    };
  });
  cmd->add_option("name", *name, "topic name")->required();
  flags->Add(cmd);
}

void AddTopicDelete(CLI::App* topic, const Globals& g, Action* run) {
  auto name = std::make_shared<std::string>();
  auto* cmd = Command(topic, "delete", "delete a topic and its records", run, [&g, name] {
    return [&g, name] {
      lpb::DeleteTopicRequest req;
      req.set_name(*name);
      return Call<lpb::DeleteTopicRequest, lpb::DeleteTopicResponse>(
          g, &Stub::DeleteTopic, req,
          [&](const auto&) { std::printf("deleted topic %s\n", name->c_str()); });
    };
  });
  cmd->add_option("name", *name, "topic name")->required();
}

}  // namespace

void AddTopicCommands(CLI::App& app, const Globals& g, Action* run) {
  CLI::App* topic = app.add_subcommand("topic", "create, list, describe, alter, delete topics");
  topic->require_subcommand(1);
  AddTopicCreate(topic, g, run);
  AddTopicList(topic, g, run);
  AddTopicDescribe(topic, g, run);
  AddTopicAlter(topic, g, run);
  AddTopicDelete(topic, g, run);
}

}  // namespace conduit::cli
