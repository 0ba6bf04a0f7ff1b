#include "bench/replication_conduit.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "absl/time/clock.h"
#include "client/cluster_router.h"

namespace conduit::bench {

namespace lpb = ::conduit::log::v1;
using testing::LogClient;

int CreateReplicatedTopic(BrokerCluster& c, const std::string& topic, const ConduitConfig& cfg) {
  lpb::CreateTopicRequest create;
  create.set_name(topic);
  create.set_partitions(1);
  create.set_replication_factor(cfg.replication_factor);
  create.mutable_config()->set_durability(cfg.durability);
  create.mutable_config()->set_acks(cfg.acks);
  if (cfg.replication_factor >= 3) create.mutable_config()->set_min_insync_replicas(2);
  if (!c.CreateTopic(create)) return -1;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    for (int via = 1; via <= c.size(); ++via) {
      if (!c.running(via)) continue;
      const lpb::GetMetadataResponse m = c.Metadata(via);
      for (const auto& t : m.topics()) {
        if (t.name() != topic || t.partitions_size() != 1) continue;
        const auto& p = t.partitions(0);
        if (p.leader() <= 0 || p.isr_size() < cfg.replication_factor || !c.running(p.leader())) {
          continue;
        }
        lpb::ProduceRequest probe;
        probe.set_topic(topic);
        auto* record = probe.add_records();
        record->set_partition(0);
        record->set_value("probe");
        lpb::ProduceResponse resp;
        if (LogClient(c.address(p.leader())).Produce(probe, &resp, absl::Seconds(2)).ok()) {
          return p.leader();
        }
      }
      break;  // one broker's view per round
    }
    absl::SleepFor(absl::Milliseconds(50));  // placement, the leader applying its view
  }
  return -1;
}


namespace {

// The partition's leader when it has one that is running and all three replicas are in sync
// (as a running broker's metadata says), else -1.
int HealthyLeader(BrokerCluster& c) {
  for (int via = 1; via <= c.size(); ++via) {
    if (!c.running(via)) continue;
    const lpb::GetMetadataResponse m = c.Metadata(via);
    for (const auto& t : m.topics()) {
      if (t.name() != "fo" || t.partitions_size() != 1) continue;
      const auto& p = t.partitions(0);
      if (p.leader() > 0 && p.isr_size() == 3 && c.running(p.leader())) return p.leader();
    }
    return -1;
  }
  return -1;
}

}  // namespace

FailoverFigures ConduitFailover(int kills, const std::vector<std::string>& broker_args,
                                absl::Duration limit) {
  FailoverFigures out;
  BrokerCluster c;
  if (!c.Start(3, true, broker_args)) {
    out.error = "cluster did not start";
    return out;
  }
  const ConduitConfig cfg{"fo", 3, lpb::ACKS_ALL, lpb::DURABILITY_SYNC};
  if (CreateReplicatedTopic(c, "fo", cfg) < 0) {
    out.error = "topic not served in 30 s";
    return out;
  }
  client::RouterOptions ro;
  for (int id = 1; id <= 3; ++id) ro.bootstrap.push_back(c.address(id));
  ro.request_timeout = absl::Seconds(1);
  auto router = client::ClusterRouter::Create(ro);
  if (!router.ok()) {
    out.error = router.status().ToString();
    return out;
  }
  for (int k = 0; k < kills; ++k) {
    int leader = -1;
    const absl::Time healthy_by = absl::Now() + absl::Seconds(60);
    while ((leader = HealthyLeader(c)) < 0 && absl::Now() < healthy_by) {
      absl::SleepFor(absl::Milliseconds(50));  // the restarted broker catching up, rejoining
    }
    if (leader < 0) {
      out.error = "the partition did not get back to 3 in-sync replicas within 60 s";
      break;
    }
    std::atomic<int64_t> killed_at{INT64_MAX}, acked_at{0};
    std::atomic<bool> stop{false};
    std::thread produce([&] {
      lpb::ProduceRequest request;
      request.set_topic("fo");
      auto* record = request.add_records();
      record->set_partition(0);
      record->set_value(std::string(100, 'f'));
      while (!stop.load()) {
        const int64_t t0 = absl::ToUnixNanos(absl::Now());
        auto route = (*router)->Leader("fo", 0);
        if (!route.ok()) {
          (void)(*router)->Refresh();
          absl::SleepFor(absl::Milliseconds(5));  // the partition offline: ask again shortly
          continue;
        }
        grpc::ClientContext ctx;
        LogClient::SetDeadline(&ctx, absl::Seconds(1));
        lpb::ProduceResponse response;
        const grpc::Status s = route->stub->Produce(&ctx, request, &response);
        if (s.ok()) {
          if (t0 >= killed_at.load()) {
            acked_at.store(absl::ToUnixNanos(absl::Now()));
            stop.store(true);
          }
        } else if (!(*router)->OnNotLeader("fo", 0, *route, ctx, s)) {
          (void)(*router)->Refresh();
          absl::SleepFor(absl::Milliseconds(5));  // leader unreachable or not known yet
        }
      }
    });
    absl::SleepFor(absl::Milliseconds(500));  // steady acks-all producing before the kill
    killed_at.store(absl::ToUnixNanos(absl::Now()));
    c.Kill(leader);
    ++out.kills;
    const absl::Time give_up = absl::Now() + limit;
    while (!stop.load() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    stop.store(true);
    produce.join();
    if (acked_at.load() > 0) {
      const int64_t ns = acked_at.load() - killed_at.load();
      out.seconds_ns.Record(static_cast<uint64_t>(ns));
      ++out.measured;
      std::fprintf(stderr, "  conduit kill %d: leader broker %d, first ack after %.3f s\n", k + 1,
                   leader, ns / 1e9);
    } else {
      std::fprintf(stderr, "  conduit kill %d: leader broker %d, no ack within %.0f s\n", k + 1,
                   leader, absl::ToDoubleSeconds(limit));
    }
    if (!c.StartBroker(leader)) {
      out.error = "restart of a killed broker failed";
      break;
    }
  }
  return out;
}


}  // namespace conduit::bench
