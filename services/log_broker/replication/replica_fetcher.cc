#include "services/log_broker/replication/replica_fetcher.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "common/grpc/dial.h"
#include "common/grpc/proto_time.h"
#include "common/logging/logging.h"
#include "services/log_broker/replication/replica_convert.h"

namespace conduit::log_broker::replication {

namespace pb = ::conduit::log::v1;

// One leader's fetch loop: a call, its answer applied, the next call. At most one call or
// apply in flight; Stop() cancels and waits for it.
class ReplicaFetchers::Fetcher : public std::enable_shared_from_this<Fetcher> {
 public:
  Fetcher(Broker* broker, runtime::Scope* scope, const ReplicaFetcherOptions& options,
          int32_t leader, std::string address)
      : broker_(broker),
        scope_(scope),
        options_(options),
        leader_(leader),
        address_(std::move(address)),
        stub_(pb::ReplicaService::NewStub(grpc_util::Dial(address_))) {}

  const std::string& address() const { return address_; }

  void Start() { Round(); }

  void Stop() {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    if (ctx_) ctx_->TryCancel();
    mu_.Await(absl::Condition(
        +[](bool* busy) { return !*busy; }, &busy_));
    // The channel goes here, on the caller's thread. The last reference to this object may be
    // a callback's, dropped on gRPC's thread; were the channel's last reference dropped there,
    // gRPC 1.51 would shut its callback threads down from one of them and abort the process
    // (a broker's shutdown, once its server is gone: see client_shutdown_test.cc).
    stub_.reset();
  }

 private:
  void Round() {
    std::vector<ReplicaFetchItem> items = broker_->replicas().FollowedPartitions(leader_);
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    if (items.empty()) {  // nothing to follow here (yet): look again shortly
      Later(options_.retry_backoff);
      return;
    }
    busy_ = true;
    request_ = pb::ReplicaFetchRequest();
    response_ = pb::ReplicaFetchResponse();
    request_.set_follower(options_.self);
    request_.set_max_bytes(options_.max_bytes);
    grpc_util::SetDuration(options_.max_wait, request_.mutable_max_wait());
    ToProto(items, &request_);
    items_ = std::move(items);
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(options_.max_wait + absl::Seconds(5)));
    auto self = shared_from_this();
    stub_->async()->ReplicaFetch(ctx_.get(), &request_, &response_,
                                 [self](grpc::Status status) { self->OnResponse(status); });
  }

  void OnResponse(const grpc::Status& status) {
    if (!status.ok()) {
      if (status.error_code() != grpc::StatusCode::CANCELLED) {
        spdlog::debug("broker {}: replica fetch from broker {} at {} failed: {}", options_.self,
                      leader_, address_, status.error_message());
      }
      Done(options_.retry_backoff);
      return;
    }
    // Apply every partition's answer; the next round starts once all are durable.
    auto pending = std::make_shared<std::atomic<int>>(1);
    auto backoff = std::make_shared<std::atomic<bool>>(false);
    auto self = shared_from_this();
    auto finish_one = [self, pending, backoff] {
      if (pending->fetch_sub(1) == 1) {
        self->Done(backoff->load() ? self->options_.retry_backoff : absl::ZeroDuration());
      }
    };
    for (auto& p : *response_.mutable_partitions()) {
      ReplicaFetchData data = FromProto(std::move(p));
      auto item = std::find_if(items_.begin(), items_.end(), [&](const ReplicaFetchItem& i) {
        return i.topic_id == data.topic_id && i.partition == data.partition;
      });
      if (item == items_.end()) continue;
      if (!data.status.ok() && !data.truncate_to) {
        // Not the leader at that epoch (yet, or any more): the next view tells where to fetch.
        spdlog::debug("broker {}: {}/{} from broker {}: {}", options_.self, data.topic,
                      data.partition, leader_, data.status.ToString());
        backoff->store(true);
        continue;
      }
      pending->fetch_add(1);
      absl::Status s = broker_->replicas().ApplyReplicaData(
          std::move(data), item->current_leader_epoch, [finish_one, backoff](absl::Status s) {
            if (!s.ok()) backoff->store(true);
            finish_one();
          });
      if (!s.ok()) {
        backoff->store(true);
        finish_one();
      }
    }
    finish_one();
  }

  void Done(absl::Duration delay) {
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      ctx_.reset();
      if (stopped_) return;
      if (delay > absl::ZeroDuration()) {
        Later(delay);
        return;
      }
    }
    Round();
  }

  void Later(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    busy_ = true;
    auto self = shared_from_this();
    scope_->After(delay, [self] {
      {
        absl::MutexLock lock(&self->mu_);
        self->busy_ = false;
        if (self->stopped_) return;
      }
      // Off the timer thread: a round reads the broker's state and may start an apply.
      if (!self->scope_->Submit([self] { self->Round(); })) {
        absl::MutexLock lock(&self->mu_);
        if (!self->stopped_) self->Later(self->options_.retry_backoff);
      }
    });
  }

  Broker* const broker_;
  runtime::Scope* const scope_;
  const ReplicaFetcherOptions options_;
  const int32_t leader_;
  const std::string address_;
  std::unique_ptr<pb::ReplicaService::Stub> stub_ ABSL_GUARDED_BY(mu_);  // null once stopped

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // a call, an apply or a timer is pending
  std::unique_ptr<grpc::ClientContext> ctx_ ABSL_GUARDED_BY(mu_);
  pb::ReplicaFetchRequest request_;
  pb::ReplicaFetchResponse response_;
  std::vector<ReplicaFetchItem> items_;
};

ReplicaFetchers::ReplicaFetchers(Broker* broker, runtime::Runtime* runtime,
                                 ReplicaFetcherOptions options)
    : broker_(broker), options_(options), scope_(runtime, runtime::Pool::kRemote) {}

ReplicaFetchers::~ReplicaFetchers() {
  std::map<int32_t, std::shared_ptr<Fetcher>> fetchers;
  {
    absl::MutexLock lock(&mu_);
    fetchers.swap(fetchers_);
  }
  for (auto& [id, f] : fetchers) f->Stop();
}

void ReplicaFetchers::OnView(const ClusterView& view) {
  std::map<int32_t, std::string> leaders;  // those this broker copies from
  for (const auto& [name, t] : view.topics) {
    for (const auto& a : t.partitions) {
      if (!a || a->leader == kNoBroker || a->leader == options_.self) continue;
      if (std::find(a->replicas.begin(), a->replicas.end(), options_.self) == a->replicas.end()) {
        continue;
      }
      auto b = view.brokers.find(a->leader);
      if (b != view.brokers.end()) leaders[a->leader] = b->second.address;
    }
  }
  std::vector<std::shared_ptr<Fetcher>> stop, start;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = fetchers_.begin(); it != fetchers_.end();) {
      auto wanted = leaders.find(it->first);
      if (wanted == leaders.end() || wanted->second != it->second->address()) {
        stop.push_back(it->second);
        it = fetchers_.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& [id, address] : leaders) {
      if (fetchers_.contains(id)) continue;
      auto f = std::make_shared<Fetcher>(broker_, &scope_, options_, id, address);
      fetchers_.emplace(id, f);
      start.push_back(f);
    }
  }
  for (auto& f : stop) f->Stop();
  for (auto& f : start) f->Start();
}

}  // namespace conduit::log_broker::replication
