#include "services/work_queue/bridge/bridge_manager.h"

#include "absl/strings/str_cat.h"
#include "client/cluster_router.h"
#include "common/logging/logging.h"
#include "common/status/status_macros.h"

namespace conduit::work_queue::bridge {

BridgeManager::BridgeManager(BridgeStore* store, WorkQueue* queue, const time::Clock* clock,
                             BridgeObserver* observer)
    : store_(store),
      queue_(queue),
      clock_(clock),
      observer_(observer != nullptr ? observer : &default_observer_) {}

BridgeManager::~BridgeManager() { Stop(); }

void BridgeManager::Stop() {
  absl::MutexLock lock(&mu_);
  started_ = false;
  for (auto& [name, e] : bridges_) e.runner.reset();
}

absl::Status BridgeManager::Start(BridgeEndpoints endpoints, const std::string& own_address) {
  if (endpoints.bootstrap.empty()) endpoints.bootstrap = own_address;
  // The bootstrap may be a list of brokers; without a coordinator of its own, the first serves.
  if (const auto brokers = client::BootstrapList(endpoints.bootstrap, {});
      endpoints.coordinator.empty() && !brokers.empty()) {
    endpoints.coordinator = brokers.front();
  }
  CONDUIT_ASSIGN_OR_RETURN(std::vector<BridgeSpec> specs, store_->LoadBridges());
  absl::MutexLock lock(&mu_);
  endpoints_ = std::move(endpoints);
  started_ = true;
  for (BridgeSpec& spec : specs) {
    Entry& e = bridges_[spec.name];
    e.spec = std::move(spec);
    if (!e.spec.paused) e.runner = RunnerFor(e.spec);
  }
  spdlog::info("bridges: {} loaded, reading from {} (coordinator {})", bridges_.size(),
               endpoints_.bootstrap, endpoints_.coordinator);
  return absl::OkStatus();
}

std::unique_ptr<BridgeRunner> BridgeManager::RunnerFor(const BridgeSpec& spec) const {
  return std::make_unique<BridgeRunner>(spec, queue_, endpoints_, observer_, clock_);
}

BridgeInfo BridgeManager::InfoOf(const Entry& e) const {
  BridgeInfo info{e.spec, {}, std::nullopt, ""};
  if (e.runner != nullptr) {
    info.status = e.runner->Status();
  } else {
    info.status.state = BridgeRunState::kPaused;
  }
  return info;
}

absl::StatusOr<BridgeManager::Entry*> BridgeManager::Find(const std::string& name) {
  auto it = bridges_.find(name);
  if (it == bridges_.end()) {
    return absl::NotFoundError(absl::StrCat("bridge '", name, "' does not exist"));
  }
  return &it->second;
}

absl::StatusOr<BridgeInfo> BridgeManager::Create(BridgeSpec spec) {
  CONDUIT_RETURN_IF_ERROR(ValidateBridgeSpec(&spec));
  if (!queue_->Stats(spec.queue).ok()) {
    return absl::NotFoundError(absl::StrCat("queue '", spec.queue, "' does not exist"));
  }
  absl::MutexLock lock(&mu_);
  if (!started_) return absl::FailedPreconditionError("bridges are not running on this server");
  if (bridges_.contains(spec.name)) {
    return absl::AlreadyExistsError(absl::StrCat("bridge '", spec.name, "' already exists"));
  }
  spec.id = absl::Uniform<uint64_t>(rng_);
  spec.created = clock_->Now();
  spec.paused = false;
  CONDUIT_RETURN_IF_ERROR(store_->PutBridge(spec));
  Entry& e = bridges_[spec.name];
  e.spec = std::move(spec);
  e.runner = RunnerFor(e.spec);
  spdlog::info("bridge {} created: topic {} (group {}) -> queue {}", e.spec.name, e.spec.topic,
               e.spec.group, e.spec.queue);
  return InfoOf(e);
}

std::vector<BridgeInfo> BridgeManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<BridgeInfo> out;
  for (const auto& [name, e] : bridges_) out.push_back(InfoOf(e));
  return out;
}

absl::StatusOr<BridgeInfo> BridgeManager::Describe(const std::string& name) const {
  BridgeInfo info;
  std::string coordinator;
  {
    absl::MutexLock lock(&mu_);
    auto it = bridges_.find(name);
    if (it == bridges_.end()) {
      return absl::NotFoundError(absl::StrCat("bridge '", name, "' does not exist"));
    }
    info = InfoOf(it->second);
    coordinator = endpoints_.coordinator;
  }
  auto lag = AskLag(coordinator, info.spec);  // outside the lock: a network call
  if (lag.ok()) {
    info.lag = *lag;
  } else {
    info.lag_error = lag.status().ToString();
  }
  return info;
}

absl::Status BridgeManager::Pause(const std::string& name) {
  absl::MutexLock lock(&mu_);
  CONDUIT_ASSIGN_OR_RETURN(Entry * e, Find(name));
  if (e->spec.paused) return absl::OkStatus();
  BridgeSpec next = e->spec;
  next.paused = true;
  CONDUIT_RETURN_IF_ERROR(store_->PutBridge(next));
  e->spec = std::move(next);
  e->runner.reset();  // joins its thread: the member leaves the group
  spdlog::info("bridge {} paused", name);
  return absl::OkStatus();
}

absl::Status BridgeManager::Resume(const std::string& name) {
  absl::MutexLock lock(&mu_);
  CONDUIT_ASSIGN_OR_RETURN(Entry * e, Find(name));
  if (!e->spec.paused) return absl::OkStatus();
  BridgeSpec next = e->spec;
  next.paused = false;
  CONDUIT_RETURN_IF_ERROR(store_->PutBridge(next));
  e->spec = std::move(next);
  e->runner = RunnerFor(e->spec);
  spdlog::info("bridge {} resumed", name);
  return absl::OkStatus();
}

absl::Status BridgeManager::Delete(const std::string& name) {
  absl::MutexLock lock(&mu_);
  CONDUIT_ASSIGN_OR_RETURN(Entry * e, Find(name));
  CONDUIT_RETURN_IF_ERROR(store_->DeleteBridge(name));
  e->runner.reset();
  bridges_.erase(name);
  observer_->OnForgotten(name);
  spdlog::info("bridge {} deleted", name);
  return absl::OkStatus();
}

}  // namespace conduit::work_queue::bridge
