#include "services/log_broker/cluster/etcd_cluster.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging/logging.h"
#include "common/status/status_macros.h"

namespace conduit::log_broker::cluster {
namespace {

using etcd::Compare;
using etcd::CompareOp;
using etcd::Op;

std::string NewIncarnation() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x", rd(), rd());
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Create(EtcdClusterOptions options,
                                                                 runtime::Runtime* runtime) {
  if (options.broker_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("broker id must be >= 0, got ", options.broker_id));
  }
  etcd::ClientOptions etcd_options = options.etcd;
  if (ClusterObserver* observer = options.observer) {
    etcd_options.on_request = [observer](absl::string_view op, absl::Duration latency,
                                         const absl::Status& status) {
      observer->OnEtcdRequest(op, latency, status);
    };
  }
  CONDUIT_ASSIGN_OR_RETURN(auto client, etcd::Client::Connect(options.endpoints, etcd_options));
  // Keep-alives are useless once late (one every TTL/3), and the stop must not wait long.
  etcd::ClientOptions quick_options = etcd_options;
  quick_options.request_timeout =
      std::min({etcd_options.request_timeout, options.lease_ttl / 3, absl::Seconds(1)});
  CONDUIT_ASSIGN_OR_RETURN(auto quick, etcd::Client::Connect(options.endpoints, quick_options));
  return std::unique_ptr<EtcdCluster>(
      new EtcdCluster(std::move(options), std::move(client), std::move(quick), runtime));
}

EtcdCluster::EtcdCluster(EtcdClusterOptions options, std::unique_ptr<etcd::Client> client,
                         std::unique_ptr<etcd::Client> quick_client, runtime::Runtime* runtime)
    : options_(std::move(options)),
      observer_(options_.observer ? options_.observer : &default_observer_),
      keys_(options_.cluster),
      client_(std::move(client)),
      quick_client_(std::move(quick_client)),
      clock_(runtime->clock()),
      incarnation_(NewIncarnation()),
      lease_ttl_(options_.lease_ttl),
      view_(std::make_shared<ClusterView>()),
      scope_(runtime, runtime::Pool::kRemote) {}

EtcdCluster::~EtcdCluster() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  scope_.StopEvery(keepalive_);
  scope_.StopEvery(controller_tick_);
  scope_.StopEvery(rebalance_tick_);
  etcd::LeaseId lease;
  {
    absl::MutexLock join(&join_mu_);
    watch_.reset();
    lease = this->lease();
  }
  // A clean stop hands the broker's partitions on now rather than after the TTL (not when etcd
  // has been out of reach for a TTL: the lease is gone). At most a second: an etcd that just
  // went must not hold up the exit for a whole request timeout.
  if (lease.value() != 0 && LeaseValid()) (void)quick_client_->Revoke(lease);
}

bool EtcdCluster::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

etcd::LeaseId EtcdCluster::lease() const {
  absl::MutexLock lock(&mu_);
  return lease_;
}

std::shared_ptr<const ClusterView> EtcdCluster::View() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

bool EtcdCluster::LeaseValid() const {
  absl::MutexLock lock(&mu_);
  return clock_->Monotonic() - lease_confirmed_at_ < lease_ttl_;
}

int64_t EtcdCluster::RegistrationRevision() const {
  absl::MutexLock lock(&mu_);
  return registration_revision_;
}

absl::Status EtcdCluster::Join(const std::string& address) {
  absl::MutexLock join(&join_mu_);
  address_ = address;
  CONDUIT_RETURN_IF_ERROR(Register());
  CONDUIT_RETURN_IF_ERROR(Relist());
  absl::Duration ttl;
  {
    absl::MutexLock lock(&mu_);
    ttl = lease_ttl_;
  }
  observer_->OnLease(true);
  keepalive_ = scope_.Every(ttl / 3, [this] { KeepAlive(); });
  // Changes are driven by watch events; the tick retries a controller write that failed.
  controller_tick_ = scope_.Every(ttl, [this] { RunController(View()); });
  if (options_.leader_rebalance_interval > absl::ZeroDuration()) {
    rebalance_tick_ = scope_.Every(options_.leader_rebalance_interval,
                                   [this] { RunController(View(), /*rebalance=*/true); });
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::Register() {
  const absl::Duration granted_at = clock_->Monotonic();
  CONDUIT_ASSIGN_OR_RETURN(etcd::Lease lease,
                           client_->Grant(absl::ToInt64Seconds(options_.lease_ttl)));
  {
    // A lease confirmed again, but no view yet shows what changed while this broker was
    // away (it may have been deposed): it leads nothing until one does (RegistrationRevision).
    absl::MutexLock lock(&mu_);
    lease_ = lease.id;
    lease_ttl_ = absl::Seconds(lease.ttl_seconds);
    lease_confirmed_at_ = granted_at;
    registration_revision_ = kRegistering;
  }
  const std::string key = keys_.Broker(options_.broker_id);
  const BrokerRegistration self{options_.broker_id, address_, incarnation_};
  for (int attempt = 0;; ++attempt) {
    etcd::Txn txn;
    txn.If(Compare::Version(key, CompareOp::kEqual, 0))
        .Then(Op::Put(key, EncodeBroker(self, lease.id), lease.id))
        .Else(Op::Get(key));
    CONDUIT_ASSIGN_OR_RETURN(etcd::TxnResult result, client_->Commit(txn));
    if (result.succeeded) break;
    if (attempt == 3) {
      return absl::AbortedError(absl::StrCat("broker ", options_.broker_id,
                                             " is registered by another process that keeps "
                                             "registering again; broker ids must be unique"));
    }
    // An earlier process of this broker id, within its lease's TTL: that process is gone (this
    // one holds the data directory's lock), so its lease goes, with its keys.
    etcd::LeaseId stale;
    if (!result.responses.empty() && !result.responses[0].range.kvs.empty()) {
      (void)DecodeBroker(result.responses[0].range.kvs[0].value, &stale);
    }
    spdlog::info("broker {}: revoking the lease {} of its previous process", options_.broker_id,
                 stale.value());
    absl::Status revoked = client_->Revoke(stale);
    if (!revoked.ok() && !absl::IsNotFound(revoked)) return revoked;
  }
  // Candidacy: the live controller/ key with the lowest create revision is the controller.
  CONDUIT_ASSIGN_OR_RETURN(
      int64_t candidacy,
      client_->Put(keys_.Controller(lease.id), EncodeController(options_.broker_id, incarnation_),
                   lease.id));
  // Complete: views from this revision on show everything written while the broker was away.
  absl::MutexLock lock(&mu_);
  registration_revision_ = candidacy;
  return absl::OkStatus();
}

absl::Status EtcdCluster::Relist() {
  watch_.reset();
  // Quick: it holds join_mu_, which a stop waits for; on failure it is retried with backoff.
  CONDUIT_ASSIGN_OR_RETURN(etcd::RangeResult all, quick_client_->GetPrefix(keys_.prefix()));
  std::shared_ptr<const ClusterView> view;
  {
    absl::MutexLock lock(&mu_);
    mirror_.clear();
    for (auto& kv : all.kvs) mirror_[kv.key] = std::move(kv);
    mirror_revision_ = all.revision;
    view = std::make_shared<ClusterView>(BuildView(keys_, mirror_, all.revision));
  }
  Publish(view);
  etcd::WatchHandlers handlers{
      .on_events = [this](std::vector<etcd::WatchEvent> events,
                          int64_t revision) { OnEvents(std::move(events), revision); },
      .on_compacted = [this](int64_t) { ScheduleRelist(absl::ZeroDuration()); },
      .on_ended = [this](absl::Status) { ScheduleRelist(absl::Milliseconds(200)); },
  };
  CONDUIT_ASSIGN_OR_RETURN(watch_,
                           quick_client_->WatchPrefix(keys_.prefix(), all.revision + 1, handlers));
  return absl::OkStatus();
}

void EtcdCluster::ScheduleRelist(absl::Duration delay) {
  scope_.After(delay, [this, delay] {
    if (stopping()) return;  // the destructor's drain runs pending timers at once
    absl::MutexLock join(&join_mu_);
    if (absl::Status s = Relist(); !s.ok()) {
      spdlog::warn("broker {}: re-reading the cluster metadata failed: {}", options_.broker_id,
                   s.ToString());
      // Until it works (etcd down): the view stays as it was, and this broker's lease runs out.
      ScheduleRelist(std::clamp(delay * 2, absl::Milliseconds(200), absl::Seconds(5)));
    }
  });
}

void EtcdCluster::OnEvents(std::vector<etcd::WatchEvent> events, int64_t revision) {
  std::shared_ptr<const ClusterView> view;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    for (auto& e : events) {
      if (e.type == etcd::EventType::kPut) {
        mirror_[e.kv.key] = std::move(e.kv);
      } else {
        mirror_.erase(e.kv.key);
      }
    }
    mirror_revision_ = std::max(mirror_revision_, revision);
    view = std::make_shared<ClusterView>(BuildView(keys_, mirror_, mirror_revision_));
  }
  Publish(view);
}

void EtcdCluster::Publish(std::shared_ptr<const ClusterView> view) {
  {
    absl::MutexLock lock(&mu_);
    if (view_->revision > view->revision) return;
    view_ = view;
  }
  // In order and coalesced: each task applies the newest view, once.
  const absl::Duration received = clock_->Monotonic();
  (void)scope_.Submit([this, received] {
    if (stopping()) return;
    absl::MutexLock apply(&apply_mu_);
    std::shared_ptr<const ClusterView> latest = View();
    if (latest->revision <= last_applied_revision_) return;
    last_applied_revision_ = latest->revision;
    options_.on_view(latest);
    observer_->OnViewApplied(*latest, options_.broker_id, clock_->Monotonic() - received);
    RunController(latest);
  });
}

void EtcdCluster::KeepAlive() {
  const absl::Duration sent = clock_->Monotonic();
  const etcd::LeaseId id = lease();
  absl::StatusOr<int64_t> ttl = quick_client_->KeepAliveOnce(id);
  bool registered = false;
  {
    absl::MutexLock lock(&mu_);
    if (ttl.ok() && lease_ == id) lease_confirmed_at_ = sent;
    registered = registration_revision_ != kRegistering;
  }
  observer_->OnLease(LeaseValid());
  if (ttl.ok() && registered) return;
  if (ttl.ok()) {
    // The last Register failed after its grant: the lease lives, the registration does not.
    spdlog::warn("broker {}: its registration is incomplete; joining again", options_.broker_id);
  } else if (absl::IsNotFound(ttl.status())) {
    spdlog::warn(
        "broker {}: its etcd lease {} is gone (the cluster counted it dead); joining again",
        options_.broker_id, id.value());
  } else {
    return;  // unreachable: nothing to do but try again; LeaseValid() turns false after the TTL
  }
  absl::MutexLock join(&join_mu_);
  if (absl::Status s = Register(); !s.ok()) {
    spdlog::warn("broker {}: joining again failed: {}", options_.broker_id, s.ToString());
  }
}

}  // namespace conduit::log_broker::cluster
