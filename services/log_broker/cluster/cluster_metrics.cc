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
  int led = 0, offline = 0;
  for (const auto& [name, t] : view.topics) {
    for (const auto& p : t.partitions) {
      if (!p) continue;
      led += p->leader == self;
      offline += p->leader == kNoBroker;
    }
  }
  partitions_led_.Set(led);
  offline_partitions_.Set(offline);
  live_brokers_.Set(static_cast<double>(view.brokers.size()));
  is_controller_.Set(view.controller == self ? 1 : 0);
  controller_epoch_.Set(static_cast<double>(view.controller_epoch));
  view_apply_.Observe(absl::ToDoubleSeconds(latency));
}

}  // namespace conduit::log_broker::cluster
