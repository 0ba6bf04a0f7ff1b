#include "client/cluster_router.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/backoff/backoff.h"
#include "common/grpc/dial.h"
#include "common/grpc/status.h"

namespace conduit::client {

namespace lpb = ::conduit::log::v1;

namespace {

std::optional<std::string> TrailingValue(const grpc::ClientContext& ctx, const char* key) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find(key);
  if (it == trailers.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

bool WildcardHost(absl::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::";
}

}  // namespace

std::optional<LeaderHint> NotLeaderHint(const grpc::ClientContext& ctx,
                                        const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return std::nullopt;
  std::optional<std::string> id = TrailingValue(ctx, kLeaderIdKey);
  std::optional<std::string> address = TrailingValue(ctx, kLeaderAddressKey);
  std::optional<std::string> epoch = TrailingValue(ctx, kLeaderEpochKey);
  LeaderHint hint;
  if (!id || !address || !epoch || !absl::SimpleAtoi(*id, &hint.id) ||
      !absl::SimpleAtoi(*epoch, &hint.epoch) || address->empty()) {
    return std::nullopt;
  }
  hint.address = *std::move(address);
  return hint;
}

std::string ResolveAdvertised(const std::string& advertised, const std::string& via) {
  if (advertised.empty()) return via;
  const size_t colon = advertised.rfind(':');
  if (colon == std::string::npos || !WildcardHost(advertised.substr(0, colon))) return advertised;
  const size_t via_colon = via.rfind(':');
  if (via_colon == std::string::npos) return advertised;
  return via.substr(0, via_colon) + advertised.substr(colon);
}

std::vector<std::string> BootstrapList(const std::string& address,
                                       const std::vector<std::string>& bootstrap) {
  std::vector<std::string> out;
  auto add = [&out](absl::string_view list) {
    for (absl::string_view a : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      out.emplace_back(absl::StripAsciiWhitespace(a));
    }
  };
  add(address);
  for (const std::string& b : bootstrap) add(b);
  return out;
}

absl::StatusOr<std::unique_ptr<ClusterRouter>> ClusterRouter::Create(RouterOptions options) {
  if (options.bootstrap.empty()) {
    return absl::InvalidArgumentError("no bootstrap broker address given");
  }
  std::unique_ptr<ClusterRouter> router(new ClusterRouter(std::move(options)));
  if (absl::Status s = router->Refresh(); !s.ok()) return s;
  return router;
}

ClusterRouter::Stub* ClusterRouter::AnyBroker() {
  absl::MutexLock lock(&mu_);
  return StubLocked(answered_);
}

std::string ClusterRouter::answered_address() {
  absl::MutexLock lock(&mu_);
  return answered_;
}

absl::StatusOr<int32_t> ClusterRouter::PartitionCount(const std::string& topic) {
  for (int round = 0; round < 2; ++round) {
    {
      absl::MutexLock lock(&mu_);
      auto it = topics_.find(topic);
      if (it != topics_.end()) {
        if (it->second.partitions.empty()) {
          return absl::UnavailableError(
              absl::StrCat("the partitions of topic '", topic, "' are not placed yet"));
        }
        return static_cast<int32_t>(it->second.partitions.size());
      }
    }
    if (round == 0) {
      if (absl::Status s = Refresh(); !s.ok()) return s;
    }
  }
  return absl::NotFoundError(absl::StrCat("topic '", topic, "' does not exist"));
}

absl::StatusOr<ClusterRouter::Route> ClusterRouter::Leader(const std::string& topic,
                                                           int32_t partition) {
  absl::MutexLock lock(&mu_);
  auto t = topics_.find(topic);
  if (t == topics_.end()) {
    return absl::NotFoundError(absl::StrCat("topic '", topic, "' does not exist"));
  }
  const size_t count = t->second.partitions.size();
  if (count == 0) {
    return absl::UnavailableError(
        absl::StrCat("the partitions of topic '", topic, "' are not placed yet"));
  }
  if (partition < 0 || static_cast<size_t>(partition) >= count) {
    return absl::NotFoundError(
        absl::StrCat("partition ", partition, " of topic '", topic, "' does not exist"));
  }
  const PartitionRoute route = t->second.partitions[partition];
  if (route.leader < 0) {
    return absl::UnavailableError(absl::StrCat("partition ", partition, " of topic '", topic,
                                               "' is offline (no live leader)"));
  }
  auto b = brokers_.find(route.leader);
  if (b == brokers_.end()) {
    return absl::UnavailableError(absl::StrCat("broker ", route.leader, ", leader of partition ",
                                               partition, " of topic '", topic,
                                               "', has no known address"));
  }
  return Route{StubLocked(b->second), route.leader, route.epoch};
}

absl::Status ClusterRouter::Refresh() {
  absl::MutexLock one_at_a_time(&refresh_mu_);
  std::vector<std::string> candidates;
  {
    absl::MutexLock lock(&mu_);
    candidates = CandidatesLocked();
  }
  grpc::Status last(grpc::StatusCode::UNAVAILABLE, "no broker address known");
  std::string tried;
  for (const std::string& address : candidates) {
    lpb::GetMetadataResponse response;
    last = ReadMetadata(address, &response);
    if (last.ok()) {
      absl::MutexLock lock(&mu_);
      ApplyLocked(response, address);
      return absl::OkStatus();
    }
    absl::StrAppend(&tried, tried.empty() ? "" : "; ", address, ": ", last.error_message());
  }
  return absl::Status(static_cast<absl::StatusCode>(last.error_code()),
                      absl::StrCat("no broker answered GetMetadata (", tried, ")"));
}

bool ClusterRouter::OnNotLeader(const std::string& topic, int32_t partition, const Route& sent,
                                const grpc::ClientContext& ctx, const grpc::Status& status) {
  const std::optional<LeaderHint> hint = NotLeaderHint(ctx, status);
  absl::MutexLock lock(&mu_);
  auto t = topics_.find(topic);
  if (t == topics_.end() || partition < 0 ||
      static_cast<size_t>(partition) >= t->second.partitions.size()) {
    return false;
  }
  auto route = t->second.partitions.begin() + partition;
  if (hint && hint->epoch > route->epoch) {
    // The refusing broker's own host stands in for a wildcard in the address it names.
    auto refuser = brokers_.find(sent.leader);
    const std::string via = refuser == brokers_.end() ? hint->address : refuser->second;
    *route = PartitionRoute{hint->id, hint->epoch};
    brokers_[hint->id] = ResolveAdvertised(hint->address, via);
  }
  return route->epoch > sent.epoch;
}

grpc::Status ClusterRouter::CallLeader(const std::string& topic, int32_t partition,
                                       const LeaderCall& call) {
  grpc::Status last;
  bool looked_up = false;  // an unknown topic is looked up once (it may be newer than us)
  backoff::Sequence waits({options_.retry_backoff, 2, absl::InfiniteDuration()});
  const int attempts = std::max(1, options_.max_attempts);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    absl::StatusOr<Route> route = Leader(topic, partition);
    if (!route.ok()) {
      last = grpc_util::ToGrpcStatus(route.status());
      if (absl::IsNotFound(route.status()) && !looked_up) {
        looked_up = true;
        if (Refresh().ok()) continue;
      }
      if (!absl::IsUnavailable(route.status())) return last;
    } else {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
      last = call(*route->stub, ctx);
      if (last.ok() || OnNotLeader(topic, partition, *route, ctx, last)) {
        if (last.ok()) return last;
        continue;  // the leader moved: follow it at once
      }
      if (!NotLeaderHint(ctx, last) && last.error_code() != grpc::StatusCode::UNAVAILABLE) {
        return last;
      }
    }
    if (attempt == attempts) break;
    absl::SleepFor(waits.Next());
    (void)Refresh();  // its failure shows in the next attempt's status
  }
  return last;
}

grpc::Status ClusterRouter::ReadMetadata(const std::string& address,
                                         lpb::GetMetadataResponse* response) {
  Stub* stub;
  {
    absl::MutexLock lock(&mu_);
    stub = StubLocked(address);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  return stub->GetMetadata(&ctx, lpb::GetMetadataRequest(), response);
}

void ClusterRouter::ApplyLocked(const lpb::GetMetadataResponse& response, const std::string& via) {
  for (const lpb::BrokerMetadata& b : response.brokers()) {
    brokers_[b.id()] = ResolveAdvertised(b.address(), via);
  }
  // Topics the answer leaves out stay: a lagging broker may not know a new topic yet, and the
  // leader of a deleted one refuses its calls anyway.
  for (const lpb::TopicMetadata& t : response.topics()) {
    TopicRoute fresh;
    fresh.topic_id = t.topic_id();
    fresh.partitions.resize(t.partitions_size());
    for (const lpb::PartitionMetadata& p : t.partitions()) {
      if (p.partition() < 0 || p.partition() >= t.partitions_size()) continue;
      fresh.partitions[p.partition()] = PartitionRoute{p.leader(), p.leader_epoch()};
    }
    auto old = topics_.find(t.name());
    if (old != topics_.end() && old->second.topic_id == fresh.topic_id &&
        old->second.partitions.size() == fresh.partitions.size()) {
      for (size_t i = 0; i < fresh.partitions.size(); ++i) {
        if (old->second.partitions[i].epoch > fresh.partitions[i].epoch) {
          fresh.partitions[i] = old->second.partitions[i];  // this broker lags behind
        }
      }
    }
    topics_[t.name()] = std::move(fresh);
  }
  answered_ = via;
}

ClusterRouter::Stub* ClusterRouter::StubLocked(const std::string& address) {
  auto [it, made] = stubs_.try_emplace(address);
  if (made) {
    it->second = lpb::LogService::NewStub(grpc_util::Dial(address, options_.security));
  }
  return it->second.get();
}

std::vector<std::string> ClusterRouter::CandidatesLocked() const {
  std::vector<std::string> out;
  auto add = [&out](const std::string& a) {
    if (!a.empty() && std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  };
  add(answered_);
  for (const auto& [id, address] : brokers_) add(address);
  for (const std::string& address : options_.bootstrap) add(address);
  return out;
}

}  // namespace conduit::client
