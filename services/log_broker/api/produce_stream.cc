// LogService.ProduceStream: Produce, one message at a time, on one stream.

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/grpc/status.h"
#include "common/grpc/stepped_reactor.h"
#include "services/log_broker/api/convert.h"
#include "services/log_broker/api/log_service.h"
#include "services/log_broker/domain/not_leader.h"

namespace conduit::log_broker::api {

// Messages go to the broker in order. Consecutive plain messages (no producer id) of one topic
// and acks are handed over together (Broker::ProduceParts: one entry in the writer's group
// commit, each message validated and answered on its own) while kMaxGroupsInFlight earlier
// hand-overs of the stream (one) are unanswered; otherwise a message goes at once. So a caller
// streaming one record per message pays the writer's per-request costs (and a follower's
// fetches) once per group, and a lone message waits for nothing. An idempotent message goes alone
// (Broker::Produce: its sequences are its own), after what was queued before it. Answers are
// written in message order, one write in flight at a time, and every answer ready when a write
// starts goes in it (up to kMaxResponseBytes): the caller gets its answers in as few responses as
// the writes allow, instead of paying a write and a read per record. The answers of a group are
// made one after another on the broker's thread; the write waits for the group's last one, where
// it would otherwise send the first alone in a response of its own. With one group in flight,
// not two, groups are larger: together about a quarter fewer context switches per message and
// more messages/s in peer_bench append-stream-1, single node and RF 3 (PERFORMANCE-NOTES).
// Reading pauses while kWindow messages are unanswered or in the write: the caller is then held
// back by HTTP/2 flow control, and the broker holds at most kWindow requests and answers per
// stream. A message that does not parse as a ProduceStreamRequest ends the stream
// INVALID_ARGUMENT after the answers of the messages before it (it has no sequence of its own to
// be answered by); nothing of it is appended.
//
// Authorisation: each message needs Write on its topic. A topic is checked when it first appears
// on the stream and, once allowed, stays allowed for the stream's life (like Kafka's checks per
// connection), so a long stream does not re-verify its token per message; a refused message is
// answered with PERMISSION_DENIED or UNAUTHENTICATED like any other refused message, nothing of
// it is appended, and the stream goes on.
//
// Lifetime: gRPC calls OnDone once after Finish; Finish is called only when no read, write,
// hand-over or broker callback is outstanding, so no callback ever runs on a deleted reactor.
// Reactions and Produce callbacks run on gRPC and the broker's threads; state is under mu_, and
// Start*/Finish are called outside it. The exception: a grouped message's answer is filled and
// marked answered without mu_, and only the group's last answer takes it (Slot, Group): a group
// answered message by message under mu_ contended with the reading thread, and together with
// the group commit completing on its writer (common/commit/group_commit.h) that cost about a
// fifth of the messages/s of append-stream-1 (PERFORMANCE-NOTES).
class LogService::ProduceStreamReactor final
    : public grpc_util::SteppedReactor<
          LogService::ProduceStreamReactor,
          grpc_util::ParsedBidiReactor<pb::ProduceStreamRequest, pb::ProduceStreamResponse>> {
 public:
  static constexpr size_t kWindow = 1024;
  // A response takes answers while under this size (it always takes one).
  static constexpr size_t kMaxResponseBytes = 1 << 20;
  // Allowed topics remembered per stream; a stream writing more is checked for the others at
  // every message (bounds the memory a stream naming many topics can take).
  static constexpr size_t kRememberedTopics = 64;
  // Hand-overs of grouped messages unanswered at once; a further group waits (and grows).
  static constexpr int kMaxGroupsInFlight = 1;
  // A group this large is handed over without waiting.
  static constexpr size_t kFullGroupRecords = 1000;
  static constexpr int64_t kFullGroupBytes = 1 << 20;

  ProduceStreamReactor(LogService* service, grpc::CallbackServerContext* ctx)
      : service_(service), ctx_(ctx) {
    StartRead(&request_);  // reading_ starts true
  }

  // A message that does not parse ends the stream INVALID_ARGUMENT once the answers of those
  // before it are written: it has no sequence to be answered by.
  void OnUnparsable(absl::Status status) override {
    React([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      EndReadsLocked();
      unparsable_ = std::move(status);
    });
  }

  void OnRead(bool ok) override {
    if (!ok) return ReadsEnded();                 // half-close, or the stream broke
    absl::StatusOr<Message> message = Prepare();  // request_ is free again once this returns
    if (!message.ok()) service_->metrics_->CountProduce(message.status().code());
    React([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      Slot& slot = slots_.emplace_back();  // deque: stays put while slots are added and popped
      slot.answer.set_sequence(request_.sequence());
      if (message.ok()) {
        message->slot = &slot;
        ++producing_;
        QueueLocked(*std::move(message));
      } else {
        ToProto(message.status(), &slot.answer);
        slot.answered.store(true, std::memory_order_relaxed);
      }
      reading_ = false;
    });
  }

 private:
  friend class grpc_util::SteppedReactor<ProduceStreamReactor, ParsedBidiReactor>;
  struct Group;
  struct Slot {
    // Set when the message is queued, and taken by the thread that answers it: the message's
    // callback then carries only the reactor and the slot, small enough for std::function to
    // hold without an allocation per message.
    absl::Time started;
    std::shared_ptr<Group> group;  // the hand-over the message is part of, if grouped
    // Filled by the thread that answers the message, before it sets `answered`.
    pb::ProduceStreamResponse::Answer answer;
    // Set with release once `answer` is filled, and then the answering thread does not touch the
    // slot again: the slot may be written and popped at once. Read under mu_ (acquire).
    std::atomic<bool> answered{false};
  };
  // Grouped messages handed over together. Their answers take no lock except the group's last
  // one, which writes what is due: the broker's thread answering a group does not contend with
  // the thread reading the stream message by message.
  struct Group {
    int messages = 0;                 // under the reactor's mu_, until handed over
    std::atomic<int> unanswered{0};  // set when handed over
  };
  // A message checked and ready for the broker.
  struct Message {
    Slot* slot = nullptr;
    absl::Time started;
    std::string topic;
    std::optional<Acks> acks;
    std::optional<ProducerArgs> producer;
    int64_t bytes = 0;
    Broker::ProducePart part;
  };
  // Messages queued for the broker: a lone idempotent message, or consecutive plain messages of
  // one topic and acks (a group).
  struct Unit {
    std::string topic;
    std::optional<Acks> acks;
    std::optional<ProducerArgs> producer;
    std::vector<Broker::ProducePart> parts;
    std::shared_ptr<Group> group;  // plain messages only
    size_t records = 0;
    int64_t bytes = 0;
    // Handed over without waiting: idempotent, or large enough.
    bool Full() const {
      return producer.has_value() || records >= kFullGroupRecords || bytes >= kFullGroupBytes;
    }
  };

  // OK when this stream may write `topic` (see the class comment); PERMISSION_DENIED or
  // UNAUTHENTICATED otherwise.
  absl::Status AllowWrite(const std::string& topic) {
    if (std::find(allowed_topics_.begin(), allowed_topics_.end(), topic) != allowed_topics_.end()) {
      return absl::OkStatus();
    }
    absl::Status allowed = service_->Allow(ctx_, topic, security::Operation::kWrite);
    if (allowed.ok() && allowed_topics_.size() < kRememberedTopics) {
      allowed_topics_.push_back(topic);
    }
    return allowed;
  }

  // Checks the message in request_ and takes its records; the status to answer with when it is
  // refused here.
  absl::StatusOr<Message> Prepare() {
    const absl::Time started = absl::Now();
    pb::ProduceRequest& request = *request_.mutable_request();
    absl::Status refused = AllowWrite(request.topic());
    const int64_t bytes = RecordBytes(request);
    if (refused.ok()) {
      refused = service_->guard_.ChargeBytes(*ctx_, security::QuotaKind::kProduceBytes, bytes);
    }
    if (refused.ok()) refused = CheckRecordTimes(request);
    auto acks = FromProto(request.acks());
    if (refused.ok()) refused = acks.status();
    if (!refused.ok()) return refused;
    Message m;
    m.started = started;
    m.topic = request.topic();
    m.acks = *acks;
    m.producer = ProducerFromProto(request);
    m.bytes = bytes;
    m.part.records.reserve(request.records_size());
    for (auto& r : *request.mutable_records()) m.part.records.push_back(FromProto(std::move(r)));
    return m;
  }

  // Queues `m` behind what is queued: into the last group when it fits there.
  void QueueLocked(Message m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool plain = !m.producer.has_value();
    if (queued_.empty() || !plain || queued_.back().producer || queued_.back().Full() ||
        queued_.back().topic != m.topic || queued_.back().acks != m.acks) {
      Unit unit;
      unit.topic = std::move(m.topic);
      unit.acks = m.acks;
      unit.producer = std::move(m.producer);
      if (plain) unit.group = std::make_shared<Group>();
      queued_.push_back(std::move(unit));
    }
    Unit& unit = queued_.back();
    unit.records += m.part.records.size();
    unit.bytes += m.bytes;
    if (unit.group) ++unit.group->messages;
    m.slot->started = m.started;
    m.slot->group = unit.group;
    m.part.done = [this, slot = m.slot](absl::StatusOr<ProduceResult> result) {
      Answer(slot, std::move(result));
    };
    unit.parts.push_back(std::move(m.part));
  }

  // Hands `unit` to the broker (outside mu_). Its messages' answers land in their slots.
  void HandOver(Unit& unit) {
    if (unit.producer) {
      Broker::ProducePart& part = unit.parts.front();
      // Produce consumes its callback only when it takes the request.
      absl::Status refused = service_->broker_->Produce(
          unit.topic, std::move(part.records), std::move(unit.producer), part.done, unit.acks);
      if (!refused.ok()) part.done(refused);
      return;
    }
    service_->broker_->ProduceParts(unit.topic, std::move(unit.parts), unit.acks);
  }

  // Records the answer of `slot`'s handed-over message (from any thread) and writes what is due.
  void Answer(Slot* slot, absl::StatusOr<ProduceResult> result) {
    service_->metrics_->ObserveProduceLatency(absl::Now() - slot->started);
    service_->metrics_->CountProduce(result.status().code());
    ToProto(result, &slot->answer);
    const std::shared_ptr<Group> group = std::move(slot->group);
    Steps steps;
    if (group != nullptr) {
      slot->answered.store(true, std::memory_order_release);  // the slot's last use here
      if (group->unanswered.fetch_sub(1, std::memory_order_acq_rel) > 1) return;
      absl::MutexLock lock(&mu_);  // the group's last answer writes
      producing_ -= group->messages;
      --groups_in_flight_;
      steps = NextLocked();
    } else {
      absl::MutexLock lock(&mu_);
      slot->answered.store(true, std::memory_order_release);
      --producing_;
      steps = NextLocked();
    }
    Run(std::move(steps));
  }

  // What the state allows next: the next write and/or the next read, or the end. Decided under
  // mu_ (which marks it started) and carried out by Run after mu_ is released.
  static bool Answered(const Slot& slot) { return slot.answered.load(std::memory_order_acquire); }
  struct Steps {
    std::vector<Unit> hand_over;  // in order, by one thread at a time (handing_over_)
    const pb::ProduceStreamResponse* write = nullptr;
    bool read = false;
    std::optional<grpc::Status> finish;
  };
  Steps NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Steps steps;
    // The queue goes to the broker when no group of the stream waits for its answer (or too few
    // do), or when its head can take no more messages.
    if (!handing_over_ && !queued_.empty() &&
        (groups_in_flight_ < kMaxGroupsInFlight || queued_.size() > 1 || queued_.front().Full())) {
      handing_over_ = true;
      for (const Unit& unit : queued_) {
        if (unit.group == nullptr) continue;
        ++groups_in_flight_;
        unit.group->unanswered.store(unit.group->messages, std::memory_order_relaxed);
      }
      steps.hand_over.swap(queued_);
    }
    if (!broken_ && !writing_ && !slots_.empty() && Answered(slots_.front())) {
      writing_ = true;
      response_.clear_answers();
      size_t bytes = 0;
      while (!slots_.empty() && Answered(slots_.front()) && bytes < kMaxResponseBytes) {
        bytes += slots_.front().answer.ByteSizeLong();
        *response_.add_answers() = std::move(slots_.front().answer);
        slots_.pop_front();
        ++in_flight_;
      }
      steps.write = &response_;
    }
    if (!broken_ && !reading_ && !reads_done_ && slots_.size() + in_flight_ < kWindow) {
      reading_ = true;
      steps.read = true;
    }
    if (!finished_ && !reading_ && !writing_ && !handing_over_ && producing_ == 0 &&
        (broken_ || (reads_done_ && slots_.empty()))) {
      finished_ = true;
      if (broken_) {
        steps.finish = grpc::Status(grpc::StatusCode::CANCELLED, "stream closed");
      } else {
        steps.finish = unparsable_ ? grpc_util::ToGrpcStatus(*unparsable_) : grpc::Status::OK;
      }
    }
    return steps;
  }
  void Run(Steps steps) {
    while (true) {
      if (steps.write != nullptr) StartWrite(steps.write);
      if (steps.read) StartRead(&request_);
      if (steps.finish) Finish(*steps.finish);
      if (steps.hand_over.empty()) return;
      // Units queued meanwhile wait for this thread, so they reach the broker in order.
      for (Unit& unit : steps.hand_over) HandOver(unit);
      absl::MutexLock lock(&mu_);
      handing_over_ = false;
      steps = NextLocked();
    }
  }

  LogService* const service_;
  grpc::CallbackServerContext* const ctx_;
  // Written by the read that fills it and read by OnRead before the next read starts.
  pb::ProduceStreamRequest request_;
  // Topics this stream may write; like request_, used only by OnRead (one read at a time).
  std::vector<std::string> allowed_topics_;
  std::deque<Slot> slots_ ABSL_GUARDED_BY(mu_);  // unanswered or unwritten, in message order
  // The response being written (while writing_); in_flight_ counts its answers.
  pb::ProduceStreamResponse response_ ABSL_GUARDED_BY(mu_);
  // Messages checked and not yet answered (queued or handed over): their callbacks are to come.
  int64_t producing_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Unit> queued_ ABSL_GUARDED_BY(mu_);   // not yet handed over, in message order
  bool handing_over_ ABSL_GUARDED_BY(mu_) = false;  // a thread is handing units over
  int groups_in_flight_ ABSL_GUARDED_BY(mu_) = 0;   // handed-over groups not fully answered
  // Why reading stopped, when a message did not parse: the stream's end status.
  std::optional<absl::Status> unparsable_ ABSL_GUARDED_BY(mu_);
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* LogService::ParsedProduceStream(
    grpc::CallbackServerContext* ctx) {
  return new ProduceStreamReactor(this, ctx);
}

}  // namespace conduit::log_broker::api
