#include "common/etcd/watch_reactor.h"

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/etcd/endpoint.h"
#include "common/etcd/proto_convert.h"

namespace conduit::etcd {
namespace internal {
namespace {

// The reactor whose handler this thread is running, to catch a Cancel from inside a handler.
thread_local const WatchReactor* running_handler = nullptr;

class HandlerScope {
 public:
  explicit HandlerScope(const WatchReactor* reactor) { running_handler = reactor; }
  ~HandlerScope() { running_handler = nullptr; }
};

std::vector<WatchEvent> Events(const etcdserverpb::WatchResponse& response) {
  std::vector<WatchEvent> events;
  events.reserve(response.events_size());
  for (const mvccpb::Event& event : response.events()) {
    events.push_back({event.type() == mvccpb::Event::DELETE ? EventType::kDelete : EventType::kPut,
                      FromProto(event.kv())});
  }
  return events;
}

}  // namespace

WatchReactor::WatchReactor(std::string endpoint, etcdserverpb::WatchRequest create,
                           WatchHandlers handlers)
    : endpoint_(std::move(endpoint)), create_(std::move(create)), handlers_(std::move(handlers)) {}

void WatchReactor::Start(etcdserverpb::Watch::Stub& stub) {
  // As etcd's own client does: a member that has lost its leader ends the stream ("etcdserver:
  // no leader", UNAVAILABLE) instead of keeping a watch that sees no new changes.
  context_.AddMetadata(std::string(kRequireLeaderKey), std::string(kRequireLeaderValue));
  stub.async()->Watch(&context_, this);
  StartWrite(&create_);
  StartRead(&response_);
  StartCall();
}

absl::Status WatchReactor::AwaitCreated(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return created_ || refused_.has_value() || done_status_.has_value();
  };
  mu_.AwaitWithDeadline(absl::Condition(&answered), deadline);
  if (created_) return absl::OkStatus();
  if (refused_) return *refused_;
  if (done_status_) {
    return done_status_->ok() ? absl::UnavailableError("watch stream closed before etcd confirmed")
                              : *done_status_;
  }
  return absl::DeadlineExceededError("no answer to the watch request in time");
}

void WatchReactor::Cancel() {
  if (running_handler == this) {
    std::fprintf(stderr, "etcd watch cancelled from its own handler: it would wait forever\n");
    std::abort();
  }
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }
  context_.TryCancel();
  done_.WaitForNotification();
}

bool WatchReactor::MayDeliver(bool terminal) {
  absl::MutexLock lock(&mu_);
  if (!created_ || cancelled_ || finished_) return false;
  if (terminal) finished_ = true;
  return true;
}

bool WatchReactor::HandleEnd(const etcdserverpb::WatchResponse& response) {
  if (response.compact_revision() > 0) {
    if (MayDeliver(/*terminal=*/true)) {
      HandlerScope scope(this);
      handlers_.on_compacted(response.compact_revision());
    }
  } else if (response.canceled()) {
    absl::Status status = absl::AbortedError(absl::StrCat(
        "etcd cancelled the watch: ",
        response.cancel_reason().empty() ? "no reason given" : response.cancel_reason()));
    if (MayDeliver(/*terminal=*/true)) {
      HandlerScope scope(this);
      handlers_.on_ended(std::move(status));
    }
  } else {
    return false;
  }
  context_.TryCancel();  // no more reads: OnDone follows
  return true;
}

bool WatchReactor::Confirm(const etcdserverpb::WatchResponse& response) {
  absl::MutexLock lock(&mu_);
  if (response.canceled()) {
    refused_ = absl::InvalidArgumentError(absl::StrCat("refused: ", response.cancel_reason()));
    finished_ = true;
    return false;
  }
  created_ = true;
  return true;
}

void WatchReactor::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended: OnDone follows with its status
  if (response_.created() && !Confirm(response_)) {
    context_.TryCancel();
    return;
  }
  if (HandleEnd(response_)) return;
  if (response_.events_size() > 0 && MayDeliver(/*terminal=*/false)) {
    HandlerScope scope(this);
    handlers_.on_events(Events(response_), response_.header().revision());
  }
  StartRead(&response_);
}

void WatchReactor::OnDone(const grpc::Status& status) {
  const absl::Status raw = FromGrpc(status);
  bool report = false;
  {
    absl::MutexLock lock(&mu_);
    report = created_ && !cancelled_ && !finished_;
    finished_ = true;
    done_status_ = raw;
  }
  if (report) {
    absl::Status ended =
        raw.ok() || IsUnreachable(raw)
            ? Unreachable(endpoint_, raw.ok() ? "watch stream closed by etcd" : raw.message())
            : absl::Status(raw.code(), absl::StrCat("etcd Watch: ", raw.message()));
    HandlerScope scope(this);
    handlers_.on_ended(std::move(ended));
  }
  done_.Notify();  // last: Cancel's caller may destroy this reactor as soon as it wakes
}

}  // namespace internal

WatchHandle::WatchHandle(std::unique_ptr<internal::WatchReactor> reactor)
    : reactor_(std::move(reactor)) {}

WatchHandle::~WatchHandle() { Cancel(); }

void WatchHandle::Cancel() {
  if (reactor_) reactor_->Cancel();
}

}  // namespace conduit::etcd
