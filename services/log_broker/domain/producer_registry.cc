#include "services/log_broker/domain/producer_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace conduit::log_broker {

absl::Status ProducerRegistry::Recover() {
  auto producers = store_->LoadProducers();
  if (!producers.ok()) return producers.status();
  absl::MutexLock lock(&mu_);
  for (const ProducerInfo& p : *producers) {
    by_id_[p.id] = p;
    if (!p.name.empty()) by_name_[p.name] = p.id;
    ids_->NoteInUse(p.id);
  }
  return absl::OkStatus();
}

absl::StatusOr<ProducerInfo> ProducerRegistry::Init(const std::string& name) {
  if (name.size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("producer_name is ", name.size(), " bytes; the limit is 256"));
  }
  absl::MutexLock init(&init_mu_);
  ProducerInfo info;
  {
    absl::MutexLock lock(&mu_);
    auto named = name.empty() ? by_name_.end() : by_name_.find(name);
    if (named != by_name_.end()) {
      info = by_id_[named->second];
      if (info.epoch == INT32_MAX) {
        return absl::ResourceExhaustedError(
            absl::StrCat("producer '", name, "' has used every epoch; use a new producer_name"));
      }
      ++info.epoch;
    }
  }
  if (info.id.value() == 0) {  // not a known name: a new producer
    CONDUIT_ASSIGN_OR_RETURN(ProducerId id, ids_->NextProducerId());
    info = ProducerInfo{id, 0, name};
  }
  // Durable before anyone can use it: a fenced instance stays fenced after a restart.
  CONDUIT_RETURN_IF_ERROR(store_->SaveProducer(info));
  absl::MutexLock lock(&mu_);
  by_id_[info.id] = info;
  if (!name.empty()) by_name_[name] = info.id;
  return info;
}

int32_t ProducerRegistry::LearnEpoch(ProducerId producer_id, int32_t epoch) {
  absl::MutexLock lock(&mu_);
  ProducerInfo& info = by_id_[producer_id];
  if (info.id.value() == 0) info = ProducerInfo{producer_id, epoch, ""};
  info.epoch = std::max(info.epoch, epoch);
  return info.epoch;
}

int32_t ProducerRegistry::CurrentEpoch(ProducerId producer_id) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(producer_id);
  return it == by_id_.end() ? -1 : it->second.epoch;
}

}  // namespace conduit::log_broker
