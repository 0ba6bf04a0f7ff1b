#pragma once

#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/cluster_router.h"
#include "common/grpc/dial.h"
#include "conduit/log/v1/log.grpc.pb.h"

namespace conduit::client {

struct ProducerOptions {
  // Bootstrap brokers, host:port: `address` (when set) first, then `bootstrap`. The first that
  // answers GetMetadata tells where every partition's leader is; batches go to the leaders.
  // A single broker (or conduit-standalone) is just `address`; either may hold a comma-separated
  // list.
  std::string address;
  std::vector<std::string> bootstrap;
  std::string topic;
  // A batch (one Produce request, one partition) is sent when it has this many records or
  // bytes, or when its first record has waited `linger`. For a steady stream of small records
  // a larger max_batch_records costs the brokers less CPU per record (2000 against 500: 10-20 %
  // less, docs/PERFORMANCE-NOTES.md); a caller that waits for its acks after every few hundred
  // sends would wait out the linger instead.
  int max_batch_records = 500;
  size_t max_batch_bytes = 1 << 20;
  absl::Duration linger = absl::Milliseconds(5);
  // Memory: the records sent without a result yet (their SizeOf plus kRecordOverhead each) hold
  // at most this much. Send blocks while another record would exceed it, for up to max_block;
  // then that record fails RESOURCE_EXHAUSTED (Kafka's buffer.memory and max.block.ms). A
  // record larger than the whole buffer goes once nothing else is buffered. Send from inside
  // this Producer's result callback never blocks: the room it would wait for is freed after
  // callbacks return. Any other thread's Send may block, a gRPC callback thread's (another
  // Producer's result, a server handler) included: do not Send from one with a full buffer.
  size_t max_buffered_bytes = 32 << 20;
  absl::Duration max_block = absl::Seconds(60);
  // Idempotent: InitProducer once, sequences per partition, so that a retried batch is
  // appended once. Off: plain Produce (a retry may duplicate).
  bool idempotent = true;
  std::string producer_name;  // optional stable name: the same name fences older instances
  // Retries of UNAVAILABLE / DEADLINE_EXCEEDED / RESOURCE_EXHAUSTED / ABORTED, with backoff,
  // and resends after a not-leader answer (each counts as one).
  int max_retries = 8;
  // Batches of one partition in flight at once, 1..5 (idempotent producers; a plain producer
  // sends one at a time, as nothing else would keep its order; the broker remembers the last 5
  // batches per partition, which bounds how far back a resend can be recognised). Order holds
  // across retries: a batch that reaches the broker ahead of an earlier one waits there for it
  // (up to 250 ms); one still early then is refused (ABORTED, a sequence gap) and resent after
  // that one, as Kafka's producer does with max.in.flight.requests.per.connection.
  int max_in_flight = 5;
  absl::Duration retry_backoff = absl::Milliseconds(50);
  absl::Duration request_timeout = absl::Seconds(10);
  // When a batch is answered: ACKS_ALL (replicated to the in-sync set) or ACKS_LEADER;
  // unspecified: the topic's setting.
  ::conduit::log::v1::Acks acks = ::conduit::log::v1::ACKS_UNSPECIFIED;
  // How to reach the servers: TLS, a client certificate, a bearer token
  // (grpc_util::DialSecurity); unset: the process default (grpc_util::SetDefaultDialSecurity).
  std::optional<grpc_util::DialSecurity> security;
};

struct ProducerRecord {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::optional<int32_t> partition;  // else the broker's partitioner: murmur2(key), or sticky
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<absl::Time> event_time;
  std::string event_id;
};

struct RecordPosition {
  int32_t partition = 0;
  int64_t offset = 0;
  bool duplicate = false;  // a retry (or an event id already appended): the original offset
};

// Batching, partitioning and retrying producer for one topic. Records of one partition are
// appended, and their callbacks run, in Send order, with up to `max_in_flight` batches per
// partition in flight (pipelined). If the broker refuses a batch outright (INVALID_ARGUMENT,
// NOT_FOUND), the later batches of its partition already in flight fail with it. Keyed records go
// where the broker would put them (Kafka's murmur2); keyless records stick to one partition per
// batch and rotate. Results arrive on the producer's threads. After an unclear failure of an
// idempotent batch (retries exhausted on a timeout: it may or may not be appended) the producer
// stops: later sends fail, and a new Producer (a new epoch) carries on. Thread-safe.
//
// Routing (ClusterRouter): each partition's batches go to its leader. A broker that does not
// lead the partition answers FAILED_PRECONDITION naming the leader (conduit-leader-* trailing
// metadata); the batch is resent there at once when that leader epoch is newer, else after a
// metadata refresh and a backoff, as is a batch whose broker is unreachable (UNAVAILABLE) or whose
// partition is offline. A resend is the same request — producer id, epoch and sequences — so a
// batch that did land before is recognised and not appended twice, and the partition's order
// holds as for any retry (one resend at a time, from the oldest unanswered batch).
class Producer {
 public:
  using Callback = std::function<void(absl::StatusOr<RecordPosition>)>;

  // Reads the cluster's metadata from the first bootstrap broker that answers (the partition
  // count) and, when idempotent, asks it for a producer id. INVALID_ARGUMENT for bad options;
  // NOT_FOUND for an unknown topic; UNAVAILABLE when no bootstrap broker answers.
  static absl::StatusOr<std::unique_ptr<Producer>> Create(ProducerOptions options);
  ~Producer();  // Flush, then stop

  // What one buffered record counts beyond its bytes (its share of the queues and requests).
  static constexpr size_t kRecordOverhead = 64;

  // May block: see ProducerOptions::max_buffered_bytes.
  void Send(ProducerRecord record, Callback done);
  std::future<absl::StatusOr<RecordPosition>> Send(ProducerRecord record);
  // Waits until every record sent so far has its result; the first error seen since the last
  // Flush, if any.
  absl::Status Flush();

  int32_t partitions() const { return partitions_; }

 private:
  struct Pending {
    ProducerRecord record;
    Callback done;
    size_t size = 0;  // SizeOf(record), taken before the record is moved into a request
  };
  struct Batch {
    Batch();
    std::vector<Pending> records;
    // On an arena: a batch's hundreds of records, their strings moved in, are freed at once
    // (per-record allocations were a third of a producing process's CPU). The records are moved
    // into `request` by the sending thread, without mu_, before the first attempt (FillRequest);
    // nothing else touches them or `request` until its call ends.
    google::protobuf::Arena arena;
    conduit::log::v1::ProduceRequest& request;
    int attempts = 0;
    absl::Time retry_at = absl::InfinitePast();  // else waiting to be resent then
    bool answered = false;  // `result` is final; completed once every earlier batch is
    // Behind a refused batch and still in flight: it cannot be appended (its sequences leave a
    // gap) and fails with `result` once its call returns.
    bool doomed = false;
    absl::Status result;
    std::vector<RecordPosition> positions;
  };
  using BatchPtr = std::shared_ptr<Batch>;  // shared with the call that carries it
  struct PartitionQueue {
    std::deque<Pending> queued;
    size_t bytes = 0;
    absl::Time first_queued;
    int32_t next_sequence = 0;
    // Started batches in sequence order: in flight, answered out of turn, or waiting to be
    // resent. A waiting batch is resent only once every batch before it is answered.
    std::deque<BatchPtr> in_flight;
  };

  Producer(ProducerOptions options, int32_t partitions, int64_t producer_id, int32_t epoch);
  static size_t SizeOf(const ProducerRecord& r);  // the bytes max_batch_bytes counts
  // Marks the thread as running this producer's result callbacks (RunCompletions): Send does
  // not wait for room there.
  class CompletingHere {
   public:
    explicit CompletingHere(const Producer* p) : previous_(current) { current = p; }
    ~CompletingHere() { current = previous_; }
    CompletingHere(const CompletingHere&) = delete;
    CompletingHere& operator=(const CompletingHere&) = delete;
    static inline thread_local const Producer* current = nullptr;

   private:
    const Producer* const previous_;
  };
  // Send's wait for room in the buffer (max_buffered_bytes): false when max_block ran out.
  bool AwaitRoomLocked(size_t cost) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A record of `cost` fits now (or nothing else is buffered, or the producer has failed).
  bool RoomLocked(size_t cost) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The sender thread: starts batches that are full or whose linger or backoff is over, and
  // refreshes metadata when a call asked for it. It sleeps until the next such time or until
  // woken (Send wakes it for a batch that fills up); the next batch after an answer goes from
  // the thread that got it (OnResponse).
  void Loop();
  // Moves ready batches out of the queues, and batches due to be resent, to outbox_; true when
  // any.
  bool ReadyLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When the sender thread next has timed work: the earliest end of a linger (for a partition
  // that may start a batch) or of a resend backoff; InfiniteFuture when none.
  absl::Time NextDueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the sender thread if it sleeps past `due` (always, with InfinitePast).
  void WakeSenderLocked(absl::Time due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ReadyLocked, then wakes the sender thread if its timed work moved earlier (or a metadata
  // refresh is wanted). Send the outbox afterwards (SendOutbox, without mu_).
  bool PumpLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t InFlightLimit() const;  // batches of one partition in flight at once
  // The partition's queued records fill a batch (max_batch_records or max_batch_bytes).
  bool FullLocked(const PartitionQueue& q) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Behind a refused batch, calls still to return: nothing new starts until they have.
  static bool AwaitsDoomedCalls(const PartitionQueue& q);
  // A batch waits to be resent: only it goes next, when its backoff is over.
  static bool Resending(const PartitionQueue& q);
  // Starts the calls in outbox_, unless another thread is at it.
  void SendOutbox();
  // Takes the partition's next records into a batch (and its sequences); the request's records
  // are filled later, without the lock that Send waits for.
  BatchPtr StartBatchLocked(int32_t partition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void FillRequest(int32_t partition, Batch& batch);
  void SendAsync(int32_t partition, BatchPtr batch);
  // `sent`/`ctx`: the route the call took and its context; null when it could not be sent (no
  // leader known). The call's last touch of this object is EndCall, after it.
  void OnResponse(int32_t partition, const BatchPtr& batch, const grpc::Status& status,
                  const conduit::log::v1::ProduceResponse& response,
                  const ClusterRouter::Route* sent, const grpc::ClientContext* ctx);
  void EndCall();  // a call is over: the destructor may go on once none is left
  // What a failed call says of its partition's leader (taken into the router outside mu_).
  struct RouteNews {
    bool not_leader = false;  // refused by a broker that does not lead the partition
    bool moved = false;       // the route moved past the one the call took: resend at once
  };
  RouteNews TakeRouteNews(int32_t partition, const grpc::Status& status,
                          const ClusterRouter::Route* sent, const grpc::ClientContext* ctx);
  // Sets a failed batch up to be resent when its failure and its attempts allow; false if not.
  bool ScheduleResendLocked(PartitionQueue& q, const BatchPtr& batch, const grpc::Status& status,
                            RouteNews news) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the callbacks of settled batches, unless another thread is at it.
  void RunCompletions();
  // Records `status` as the batch's result, and what follows from it for the partition.
  void SettleLocked(PartitionQueue& q, Batch& batch, const grpc::Status& status,
                    const conduit::log::v1::ProduceResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After fatal_: every queued record and every batch waiting to be resent fails with it.
  void FailPendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves each partition's answered batches at the front to completions_.
  void CollectAnsweredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ProducerOptions options_;
  const int32_t partitions_;
  const int64_t producer_id_;
  const int32_t producer_epoch_;
  std::unique_ptr<ClusterRouter> router_;

  absl::Mutex mu_;
  std::map<int32_t, PartitionQueue> queues_ ABSL_GUARDED_BY(mu_);
  int32_t sticky_partition_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // records without a result yet
  size_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // theirs, as max_buffered_bytes counts
  int64_t live_calls_ ABSL_GUARDED_BY(mu_) = 0;   // Produce calls whose callback has not ended
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;
  // A call failed in a way that asks for fresh metadata; the sender thread reads it.
  bool refresh_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The sender thread sleeps on sender_cv_ until sender_sleeps_until_ unless woken.
  absl::CondVar sender_cv_;
  bool sender_woken_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time sender_sleeps_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  // Batches to send, in the order ReadyLocked chose them; one thread at a time sends them.
  std::deque<std::pair<int32_t, BatchPtr>> outbox_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  // Settled batches whose callbacks are due, in order; one thread at a time runs them.
  std::deque<BatchPtr> completions_ ABSL_GUARDED_BY(mu_);
  bool completing_ ABSL_GUARDED_BY(mu_) = false;
  // Set after an unclear failure of an idempotent batch: later records fail with it.
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  std::thread sender_;
};

}  // namespace conduit::client
