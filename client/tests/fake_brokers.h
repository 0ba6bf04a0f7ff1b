#pragma once

// Fake LogService brokers on 127.0.0.1:0 for the client's routing rule. A fake, not a real
// cluster, because these tests unit-test what the client does with a not-leader answer and an
// unreachable leader — the contract in log.proto ("Routing in a cluster") — and each fake can be
// told to answer exactly that (a stale GetMetadata, a refusal naming another broker, a lost
// acknowledgement). The real broker's serving rules are tested with the broker; the client
// against a real single node in routing_test.cc.
//
// The fakes of one test share a FakeLog: one topic's partitions as a cluster's replicas agree
// on them, with the idempotent producer's sequence check, so a batch resent to a new leader
// after it landed on the old one is recognised there.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/server_runner.h"
#include "conduit/log/v1/log.grpc.pb.h"

namespace conduit::client::fakes {

namespace lpb = ::conduit::log::v1;

// One topic's records and producer sequences. Thread-safe.
class FakeLog {
 public:
  struct Batch {  // a Produce a broker took, in arrival order
    int32_t broker = 0;
    int32_t partition = 0;
    int32_t base_sequence = 0;
    int count = 0;
    bool duplicate = false;  // a resend of a batch already in the log: not appended again
  };

  FakeLog(std::string topic, int32_t partitions)
      : topic_(std::move(topic)), partitions_(partitions), logs_(partitions) {}
  const std::string& topic() const { return topic_; }
  int32_t partitions() const { return partitions_; }

  // Appends a one-partition idempotent batch as a broker would (ABORTED on a sequence gap).
  grpc::Status Append(int32_t broker, const lpb::ProduceRequest& req, lpb::ProduceResponse* resp) {
    if (req.records_size() == 0 || req.sequences_size() != 1 || req.sequences(0).partition() < 0 ||
        req.sequences(0).partition() >= partitions()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "one partition, idempotent");
    }
    const int32_t partition = req.sequences(0).partition();
    const int32_t base = req.sequences(0).base_sequence();
    absl::MutexLock lock(&mu_);
    const int32_t next = next_sequence_[partition];
    auto seen = first_offset_.find({partition, base});
    const bool duplicate = base < next && seen != first_offset_.end();
    if (!duplicate && base != next) {
      return grpc::Status(grpc::StatusCode::ABORTED, absl::StrCat("sequence gap at ", base));
    }
    const int64_t first = duplicate ? seen->second : static_cast<int64_t>(logs_[partition].size());
    for (int i = 0; i < req.records_size(); ++i) {
      if (!duplicate) logs_[partition].push_back(req.records(i).value());
      lpb::RecordPosition* p = resp->add_positions();
      p->set_partition(partition);
      p->set_offset(first + i);
      p->set_duplicate(duplicate);
    }
    if (!duplicate) {
      first_offset_[{partition, base}] = first;
      next_sequence_[partition] = base + req.records_size();
    }
    batches_.push_back(Batch{broker, partition, base, req.records_size(), duplicate});
    return grpc::Status::OK;
  }
  // Up to 100 records of the request's partition from its offset.
  void Read(const lpb::FetchRequest& req, lpb::FetchResponse* resp) {
    const std::vector<std::string> log = values(req.partition());
    int64_t offset = req.offset();
    for (; offset < static_cast<int64_t>(log.size()) && offset - req.offset() < 100; ++offset) {
      lpb::Record* r = resp->add_records();
      r->set_partition(req.partition());
      r->set_offset(offset);
      r->set_value(log[offset]);
    }
    resp->set_next_offset(offset);
    resp->set_high_watermark(static_cast<int64_t>(log.size()));
  }
  void Add(int32_t partition, const std::string& value) {
    absl::MutexLock lock(&mu_);
    logs_.at(partition).push_back(value);
  }
  std::vector<std::string> values(int32_t partition) {
    absl::MutexLock lock(&mu_);
    return logs_.at(partition);
  }
  std::vector<Batch> batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }

 private:
  const std::string topic_;
  const int32_t partitions_;
  absl::Mutex mu_;
  std::vector<std::vector<std::string>> logs_ ABSL_GUARDED_BY(mu_);
  std::map<int32_t, int32_t> next_sequence_ ABSL_GUARDED_BY(mu_);  // one producer per test
  std::map<std::pair<int32_t, int32_t>, int64_t> first_offset_ ABSL_GUARDED_BY(mu_);
  std::vector<Batch> batches_ ABSL_GUARDED_BY(mu_);
};

// GetMetadata's answer: `brokers` (id → address), every partition led by `leader` at `epoch`.
inline lpb::GetMetadataResponse FakeMetadata(const FakeLog& log,
                                             const std::map<int32_t, std::string>& brokers,
                                             int32_t leader, int32_t epoch) {
  lpb::GetMetadataResponse m;
  for (const auto& [id, address] : brokers) {
    lpb::BrokerMetadata* b = m.add_brokers();
    b->set_id(id);
    b->set_address(address);
  }
  lpb::TopicMetadata* t = m.add_topics();
  t->set_name(log.topic());
  t->set_topic_id(1);
  for (int32_t p = 0; p < log.partitions(); ++p) {
    lpb::PartitionMetadata* pm = t->add_partitions();
    pm->set_partition(p);
    pm->set_leader(leader);
    pm->set_leader_epoch(epoch);
  }
  return m;
}

// A broker that answers GetMetadata with what it is told, and Produce, Fetch and ListOffsets by
// serving them from the shared log, or by refusing them as not the leader (naming another), or
// as down (UNAVAILABLE). Counts the calls it gets. Thread-safe.
class FakeBroker final : public lpb::LogService::CallbackService {
 public:
  FakeBroker(int32_t id, FakeLog* log) : id_(id), log_(log) {
    server_ = *grpc_util::StartServer({}, {this});  // aborts the test binary if it cannot bind
  }
  ~FakeBroker() override { Shutdown(); }

  int32_t id() const { return id_; }
  std::string address() const { return server_->address(); }
  // Stops listening: the broker is down (connection refused from here on). Held calls are
  // answered UNAVAILABLE first.
  void Shutdown() {
    for (Held& h : TakeHeld(Mode::kDown)) h.reactor->Finish(Unavailable());
    server_->Shutdown();
  }
  // From now on Produce calls wait unanswered (a broker that is slow to make them durable),
  // until ReleaseHeld.
  void HoldProduce() {
    absl::MutexLock lock(&mu_);
    mode_ = Mode::kHold;
  }
  // Appends and answers the held calls in arrival order, and serves from now on.
  void ReleaseHeld() {
    for (Held& h : TakeHeld(Mode::kServe)) h.reactor->Finish(log_->Append(id_, *h.req, h.resp));
  }
  // Refuses the held calls outright (INVALID_ARGUMENT, nothing appended), and serves from now on.
  void RefuseHeld() {
    for (Held& h : TakeHeld(Mode::kServe)) {
      h.reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "refused by the test"));
    }
  }

  void AnswerMetadata(lpb::GetMetadataResponse m) {
    absl::MutexLock lock(&mu_);
    metadata_ = std::move(m);
  }
  // From now on refuses data calls: not the leader, naming broker `leader` at `address`, `epoch`.
  void RefuseNamingLeader(int32_t leader, const std::string& address, int32_t epoch) {
    absl::MutexLock lock(&mu_);
    mode_ = Mode::kRefuse;
    hint_ = {std::to_string(leader), address, std::to_string(epoch)};
  }
  void Serve() {
    absl::MutexLock lock(&mu_);
    mode_ = Mode::kServe;
  }
  // Appends the next Produce but answers it UNAVAILABLE (the acknowledgement is lost), and
  // answers every call after it UNAVAILABLE, as a broker that died just after appending.
  void LoseNextAckThenFail() {
    absl::MutexLock lock(&mu_);
    mode_ = Mode::kLoseAck;
  }
  int produce_calls() {
    absl::MutexLock lock(&mu_);
    return produce_calls_;
  }
  int fetch_calls() {  // Fetch and ListOffsets
    absl::MutexLock lock(&mu_);
    return fetch_calls_;
  }
  int metadata_calls() {
    absl::MutexLock lock(&mu_);
    return metadata_calls_;
  }
  int lost_acks() {
    absl::MutexLock lock(&mu_);
    return lost_acks_;
  }

  grpc::ServerUnaryReactor* GetMetadata(grpc::CallbackServerContext* ctx,
                                        const lpb::GetMetadataRequest*,
                                        lpb::GetMetadataResponse* resp) override {
    absl::MutexLock lock(&mu_);
    ++metadata_calls_;
    if (mode_ == Mode::kDown) return Finish(ctx, Unavailable());
    *resp = metadata_;
    resp->set_answered_by(id_);
    return Finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* InitProducer(grpc::CallbackServerContext* ctx,
                                         const lpb::InitProducerRequest*,
                                         lpb::InitProducerResponse* resp) override {
    resp->set_producer_id(42);
    resp->set_producer_epoch(3);
    return Finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* Produce(grpc::CallbackServerContext* ctx,
                                    const lpb::ProduceRequest* req,
                                    lpb::ProduceResponse* resp) override {
    absl::MutexLock lock(&mu_);
    ++produce_calls_;
    if (mode_ == Mode::kLoseAck) {
      lpb::ProduceResponse lost;
      grpc::Status appended = log_->Append(id_, *req, &lost);
      if (appended.ok()) ++lost_acks_;
      mode_ = Mode::kDown;
      return Finish(ctx, Unavailable());
    }
    if (mode_ == Mode::kHold) {
      held_.push_back(Held{ctx->DefaultReactor(), req, resp});
      return held_.back().reactor;
    }
    if (mode_ != Mode::kServe) return Refuse(ctx);
    return Finish(ctx, log_->Append(id_, *req, resp));
  }
  grpc::ServerUnaryReactor* Fetch(grpc::CallbackServerContext* ctx, const lpb::FetchRequest* req,
                                  lpb::FetchResponse* resp) override {
    {
      absl::MutexLock lock(&mu_);
      ++fetch_calls_;
      if (mode_ != Mode::kServe) return Refuse(ctx);
    }
    log_->Read(*req, resp);
    // A short stand-in for the long poll, so that an idle consumer does not spin.
    if (resp->records_size() == 0 && req->has_max_wait()) absl::SleepFor(absl::Milliseconds(10));
    return Finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ListOffsets(grpc::CallbackServerContext* ctx,
                                        const lpb::ListOffsetsRequest* req,
                                        lpb::ListOffsetsResponse* resp) override {
    absl::MutexLock lock(&mu_);
    ++fetch_calls_;
    if (mode_ != Mode::kServe) return Refuse(ctx);
    for (int32_t p : req->partitions()) {
      lpb::PartitionOffset* o = resp->add_offsets();
      o->set_partition(p);
      o->set_offset(req->spec() == lpb::OFFSET_SPEC_LATEST
                        ? static_cast<int64_t>(log_->values(p).size())
                        : 0);
    }
    return Finish(ctx, grpc::Status::OK);
  }

 private:
  enum class Mode { kServe, kRefuse, kLoseAck, kDown, kHold };
  struct Hint {
    std::string id, address, epoch;
  };
  struct Held {
    grpc::ServerUnaryReactor* reactor;
    const lpb::ProduceRequest* req;
    lpb::ProduceResponse* resp;
  };

  // Switches to `next` and returns the calls held until now, to be answered without mu_.
  std::vector<Held> TakeHeld(Mode next) {
    absl::MutexLock lock(&mu_);
    mode_ = next;
    return std::exchange(held_, {});
  }

  static grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx, grpc::Status s) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(std::move(s));
    return reactor;
  }
  static grpc::Status Unavailable() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "broker is down");
  }
  grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (mode_ == Mode::kDown) return Finish(ctx, Unavailable());
    ctx->AddTrailingMetadata("conduit-leader-id", hint_.id);
    ctx->AddTrailingMetadata("conduit-leader-address", hint_.address);
    ctx->AddTrailingMetadata("conduit-leader-epoch", hint_.epoch);
    return Finish(ctx, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                    absl::StrCat("broker ", id_, " does not lead; broker ",
                                                 hint_.id, " at ", hint_.address, " does")));
  }
  const int32_t id_;
  FakeLog* const log_;
  absl::Mutex mu_;
  lpb::GetMetadataResponse metadata_ ABSL_GUARDED_BY(mu_);
  Mode mode_ ABSL_GUARDED_BY(mu_) = Mode::kServe;
  Hint hint_ ABSL_GUARDED_BY(mu_);
  int produce_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int fetch_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int metadata_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int lost_acks_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc_util::RunningServer> server_;  // last: serves once the rest is built
};

}  // namespace conduit::client::fakes
