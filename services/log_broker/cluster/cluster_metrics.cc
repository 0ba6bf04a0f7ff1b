#include "services/log_broker/cluster/cluster_metrics.h"

#include "common/metrics/metrics.h"

namespace conduit::log_broker::cluster {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

prometheus::Gauge& Gauge(prometheus::Registry& registry, const char* name, const char* help) {
  return BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

ClusterMetrics::ClusterMetrics(prometheus::Registry& registry)
    : partitions_led_(
          Gauge(registry, "conduit_cluster_partitions_led", "Partitions this broker leads")),
      offline_partitions_(Gauge(registry, "conduit_cluster_offline_partitions",
                                "Placed partitions with no live leader, in this broker's view")),
      live_brokers_(Gauge(registry, "conduit_cluster_live_brokers",
                          "Brokers registered with a live etcd lease, in this broker's view")),
      is_controller_(Gauge(registry, "conduit_cluster_is_controller",
                           "1 while this broker is the controller")),
      controller_epoch_(Gauge(registry, "conduit_cluster_controller_epoch",
                              "The controller epoch in this broker's view")),
      lease_valid_(Gauge(registry, "conduit_cluster_lease_valid",
                         "1 while this broker's etcd lease is confirmed (0: it refuses writes)")),
      unclean_elections_(prometheus::BuildCounter()
                             .Name("conduit_cluster_unclean_elections_total")
                             .Help("Out-of-sync replicas this broker elected as controller "
                                   "(acknowledged records may be lost)")
                             .Register(registry)
                             .Add({})),
      under_replicated_(Gauge(registry, "conduit_cluster_under_replicated_partitions",
                              "Partitions this broker leads whose in-sync set is smaller than "
                              "their replicas")),
      under_min_isr_(Gauge(registry, "conduit_cluster_under_min_isr_partitions",
                           "Partitions this broker leads with fewer in-sync replicas than "
                           "min_insync_replicas: acks-all produce to them is refused")),
      leader_elections_(BuildCounter()
                            .Name("conduit_cluster_leader_elections_total")
                            .Help("Times this broker became leader of a partition at a new "
                                  "leader epoch (elected, or placed on it at creation)")
                            .Register(registry)
                            .Add({})),
      view_apply_(BuildHistogram()
                      .Name("conduit_cluster_view_apply_seconds")
                      .Help("From a metadata change reaching the broker to the broker acting on it")
                      .Register(registry)
                      .Add({}, metrics::LatencyBuckets())),
      etcd_latency_(BuildHistogram()
                        .Name("conduit_cluster_etcd_request_seconds")
                        .Help("etcd round trips by operation")
                        .Register(registry)),
      etcd_errors_(BuildCounter()
                       .Name("conduit_cluster_etcd_errors_total")
                       .Help("etcd round trips that failed, by operation")
                       .Register(registry)) {}

void ClusterMetrics::OnEtcdRequest(absl::string_view op, absl::Duration latency,
                                   const absl::Status& status) {
  const std::string method(op);
  etcd_latency_.Add({{"op", method}}, metrics::LatencyBuckets())
      .Observe(absl::ToDoubleSeconds(latency));
  if (!status.ok()) etcd_errors_.Add({{"op", method}}).Increment();
}

void ClusterMetrics::OnViewApplied(const ClusterView& view, int32_t self, absl::Duration latency) {
  int led = 0, offline = 0, elected = 0;
  absl::flat_hash_map<std::pair<uint64_t, int32_t>, int32_t> epochs;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, t] : view.topics) {
    for (size_t i = 0; i < t.partitions.size(); ++i) {
      const auto& p = t.partitions[i];
      if (!p) continue;
      offline += p->leader == kNoBroker;
      if (p->leader != self) continue;
      ++led;
      const std::pair<uint64_t, int32_t> key(t.meta.id.value(), static_cast<int32_t>(i));
      epochs[key] = p->leader_epoch.value();
      auto before = led_.find(key);
      elected += before == led_.end() || before->second != p->leader_epoch.value();
    }
  }
  if (seeded_ && elected > 0) leader_elections_.Increment(elected);
  seeded_ = true;
  led_ = std::move(epochs);
  partitions_led_.Set(led);
  offline_partitions_.Set(offline);
  live_brokers_.Set(static_cast<double>(view.brokers.size()));
  is_controller_.Set(view.controller == self ? 1 : 0);
  controller_epoch_.Set(static_cast<double>(view.controller_epoch));
  view_apply_.Observe(absl::ToDoubleSeconds(latency));
}

void ClusterMetrics::OnReplication(const std::vector<PartitionReplication>& led) {
  int under_replicated = 0, under_min_isr = 0;
  for (const PartitionReplication& p : led) {
    const size_t in_sync = p.replication.isr.size();
    under_replicated += in_sync < p.replication.replicas.size();
    under_min_isr += static_cast<int32_t>(in_sync) < p.min_insync_replicas;
  }
  under_replicated_.Set(under_replicated);
  under_min_isr_.Set(under_min_isr);
}

}  // namespace conduit::log_broker::cluster
