// LogService.Tail: a partition streamed to the caller as it grows.

#include <grpcpp/alarm.h>

#include <algorithm>
#include <memory>

#include "absl/time/clock.h"
#include "common/grpc/request_checks.h"
#include "common/grpc/status.h"
#include "services/log_broker/api/convert.h"
#include "services/log_broker/api/log_service.h"

namespace conduit::log_broker::api {
namespace {

using grpc_util::ToGrpcStatus;

// Each Tail wait (for records, or out a quota pause) is bounded so that a cancelled or
// shutting-down stream ends promptly.
constexpr absl::Duration kTailWait = absl::Seconds(1);

}  // namespace

// Streams a partition: fetch (long-poll) → write → on write done, fetch again. One message is in
// flight at a time and the next fetch starts only when gRPC has taken the previous one, so a
// slow reader holds back the stream (HTTP/2 flow control) instead of growing a buffer.
//
// The fetch-byte quota, as Fetch takes it: each message sent is debited after the fact, and
// before each fetch the caller is charged a byte. A caller over its quota is paused — no fetch,
// no message — until its debt is paid, then the stream goes on: Kafka delays a throttled
// fetch's answer rather than failing it, and a stream has no retry to push back. The pause is
// counted as a throttle (QuotaObserver) with the wait it was given; it waits on a gRPC alarm
// in steps of at most kTailWait (to see a shutdown), cancelled with the call.
class LogService::TailReactor final : public grpc::ServerWriteReactor<pb::TailResponse> {
 public:
  TailReactor(LogService* service, grpc::CallbackServerContext* ctx, const pb::TailRequest& request)
      : service_(service), ctx_(ctx) {
    // Before any record is read or sent.
    if (auto s = service_->Allow(ctx_, request.topic(), security::Operation::kRead); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    payloads_ = service_->MayViewPayload(ctx_, request.topic());
    if (service_->guard_.has_quotas()) {
      principal_ = service_->guard_.PrincipalOf(*ctx_).value_or("");
      if (!principal_.empty()) quotas_ = service_->guard_.security().quotas.get();
    }
    if (auto s = grpc_util::CheckTimeFields(request); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    args_.topic = request.topic();
    args_.partition = request.partition();
    args_.offset = request.offset();
    if (request.has_max_records()) args_.max_records = request.max_records();
    args_.max_wait = kTailWait;
    if (request.start() == pb::OFFSET_SPEC_EARLIEST || request.start() == pb::OFFSET_SPEC_LATEST) {
      auto offsets = service_->broker_->ListOffsets(args_.topic, {args_.partition},
                                                    request.start() == pb::OFFSET_SPEC_EARLIEST
                                                        ? OffsetQuery::kEarliest
                                                        : OffsetQuery::kLatest,
                                                    absl::InfinitePast());
      if (!offsets.ok()) {
        Finish(Answer(ctx_, offsets.status()));
        return;
      }
      args_.offset = offsets->front().offset;
    } else if (request.start() != pb::OFFSET_SPEC_UNSPECIFIED) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "start must be OFFSET_SPEC_EARLIEST or OFFSET_SPEC_LATEST when set"));
      return;
    }
    Next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed"));
      return;
    }
    Next();
  }
  void OnCancel() override {
    cancelled_.store(true);
    std::shared_ptr<PendingFetch> pending;
    {
      absl::MutexLock lock(&mu_);
      pending = pending_;
      // End a quota pause now: its callback then finishes the stream. Its callbacks run on
      // gRPC's executor, never inside Set or Cancel, so holding mu_ here is safe.
      if (alarm_ != nullptr) alarm_->Cancel();
    }
    if (pending) pending->Cancel();  // end the wait now rather than at its deadline
  }
  void OnDone() override { delete this; }

 private:
  // The next fetch, once the caller is within its fetch-byte quota; a pause until then.
  void Next() {
    if (quotas_ != nullptr) {
      const security::QuotaBook::Verdict verdict =
          quotas_->Charge(principal_, security::QuotaKind::kFetchBytes, 1);
      if (!verdict.allowed) {
        resume_at_ = absl::Now() + verdict.retry_after;
        Pause();
        return;
      }
    }
    FetchNext();
  }

  // Waits towards resume_at_, at most kTailWait at a time; then OnPaused. A fresh alarm each
  // time: this may run inside the previous alarm's callback, which must not be set again while
  // it runs (the previous alarm goes once its callback returns).
  void Pause() {
    const absl::Duration wait = std::min(resume_at_ - absl::Now(), kTailWait);
    std::unique_ptr<grpc::Alarm> previous;  // destroyed after mu_ is released
    absl::MutexLock lock(&mu_);
    previous = std::move(alarm_);
    alarm_ = std::make_unique<grpc::Alarm>();
    alarm_->Set(absl::ToChronoTime(absl::Now() + wait),
                [this](bool expired) { OnPaused(expired); });
    if (cancelled_.load()) alarm_->Cancel();  // OnCancel ran before this alarm existed
  }

  void OnPaused(bool expired) {
    // Waits for Pause to release mu_: the stream may end below, and `this` with it.
    { absl::MutexLock lock(&mu_); }
    if (!expired || cancelled_.load()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "tail cancelled"));
      return;
    }
    if (service_->shutting_down_.load()) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      return;
    }
    if (absl::Now() < resume_at_) {
      Pause();
      return;
    }
    Next();
  }

  // Must not touch `this` after a successful Fetch: its callback may already have finished
  // the stream (and OnDone deleted the reactor).
  void FetchNext() {
    absl::Status status = service_->broker_->Fetch(
        args_, [this](absl::StatusOr<FetchResult> result) { OnFetched(std::move(result)); },
        [this](std::shared_ptr<PendingFetch> pending) {
          bool cancel;
          {
            absl::MutexLock lock(&mu_);
            pending_ = pending;
            cancel = cancelled_.load();  // OnCancel ran before this wait existed
          }
          if (cancel) pending->Cancel();
        });
    if (!status.ok()) Finish(Answer(ctx_, status));
  }

  void OnFetched(absl::StatusOr<FetchResult> result) {
    if (cancelled_.load()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "tail cancelled"));
      return;
    }
    if (service_->shutting_down_.load()) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      return;
    }
    if (!result.ok()) {
      Finish(ToGrpcStatus(result.status()));
      return;
    }
    if (result->records.empty()) {
      // The wait ran out with nothing new, or compaction left a gap: wait again past it.
      args_.offset = std::max(args_.offset, result->next_offset);
      FetchNext();
      return;
    }
    response_.Clear();
    response_.mutable_records()->Reserve(static_cast<int>(result->records.size()));
    for (const StoredRecord& r : result->records) {
      pb::Record* record = response_.add_records();
      ToProto(r, record);
      if (!payloads_) record->clear_value();
    }
    response_.set_high_watermark(result->high_watermark);
    args_.offset = result->records.back().offset + 1;
    // Debited as sent, paid back before the next fetch (Next).
    if (quotas_ != nullptr) {
      quotas_->Debit(principal_, security::QuotaKind::kFetchBytes,
                     static_cast<double>(response_.ByteSizeLong()));
    }
    StartWrite(&response_);
  }

  LogService* const service_;
  grpc::CallbackServerContext* const ctx_;
  FetchArgs args_;
  bool payloads_ = false;  // whether the caller may see record values (ViewPayload), from the start
  // The fetch-byte quota: the guard's book (null without quotas) and the caller, from the start.
  security::QuotaBook* quotas_ = nullptr;
  std::string principal_;
  absl::Time resume_at_;  // the end of the current quota pause
  pb::TailResponse response_;
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::shared_ptr<PendingFetch> pending_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::Alarm> alarm_ ABSL_GUARDED_BY(mu_);  // the current quota pause's
};

grpc::ServerWriteReactor<pb::TailResponse>* LogService::Tail(grpc::CallbackServerContext* ctx,
                                                             const pb::TailRequest* request) {
  return new TailReactor(this, ctx, *request);
}

}  // namespace conduit::log_broker::api
