// conduit queue create|list|stats|enqueue|lease|ack|nack (the dead-letter lane: dlq_commands.cc)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tools/conduit/batching.h"
#include "tools/conduit/cli.h"

namespace conduit::cli {
namespace {

namespace qpb = ::conduit::queue::v1;
using Stub = qpb::WorkQueue::Stub;

std::string Age(const google::protobuf::Duration& d) {
  return DurationText(grpc_util::FromDuration(d));
}

void AddQueueCreate(CLI::App* queue, const Globals& g, Action* run,
                    std::shared_ptr<std::string> name) {
  struct Options {
    std::string visibility, durability;
    int attempts = 0;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = Command(queue, "create", "create a queue", run, [&g, name, o] {
    return [&g, name, o] {
      qpb::CreateQueueRequest req;
      req.set_name(*name);
      if (!o->visibility.empty()) {
        absl::Duration d;
        if (!ParseDuration(o->visibility, &d)) return UsageError("bad --visibility-timeout");
        grpc_util::SetDuration(d, req.mutable_config()->mutable_visibility_timeout());
      }
      if (o->attempts > 0) req.mutable_config()->set_max_attempts(o->attempts);
      if (!o->durability.empty()) {
        req.mutable_config()->set_durability(o->durability == "interval"
                                                 ? qpb::QUEUE_DURABILITY_INTERVAL
                                                 : qpb::QUEUE_DURABILITY_SYNC);
      }
      return Call<qpb::CreateQueueRequest, qpb::CreateQueueResponse>(
          g.Queue(), &Stub::CreateQueue, req,
          [&](const auto&) { std::printf("created queue %s\n", name->c_str()); });
    };
  });
  cmd->add_option("name", *name, "queue name")->required();
  cmd->add_option("--visibility-timeout", o->visibility, "lease length, e.g. 30s");
  cmd->add_option("--max-attempts", o->attempts, "failed attempts before the dead-letter lane");
  cmd->add_option("--durability", o->durability,
                  "sync (each change fsynced before its answer) | interval (WAL fsynced every "
                  "100 ms)")
      ->check(CLI::IsMember({"sync", "interval"}));
}

void AddQueueList(CLI::App* queue, const Globals& g, Action* run) {
  Command(queue, "list", "list queues", run, [&g] {
    return [&g] {
      return Call<qpb::ListQueuesRequest, qpb::ListQueuesResponse>(
          g.Queue(), &Stub::ListQueues, {}, [](const qpb::ListQueuesResponse& r) {
            Table t({"QUEUE", "VISIBILITY", "MAX-ATTEMPTS", "DURABILITY"});
            for (const auto& q : r.queues()) {
              t.Add({q.name(), Age(q.config().visibility_timeout()),
                     std::to_string(q.config().max_attempts()),
                     q.config().durability() == qpb::QUEUE_DURABILITY_INTERVAL ? "interval"
                                                                               : "sync"});
            }
            t.Print();
          });
    };
  });
}

void AddQueueStats(CLI::App* queue, const Globals& g, Action* run,
                   std::shared_ptr<std::string> name) {
  Command(queue, "stats", "depth, ages and rates", run, [&g, name] {
    return [&g, name] {
      qpb::GetQueueStatsRequest req;
      req.set_queue(*name);
      return Call<qpb::GetQueueStatsRequest, qpb::GetQueueStatsResponse>(
          g.Queue(), &Stub::GetQueueStats, req, [](const qpb::GetQueueStatsResponse& s) {
            Table t({"READY", "DELAYED", "LEASED", "DEAD", "OLDEST-READY", "OLDEST-DEAD",
                     "ENQUEUE/S", "ACK/S"});
            t.Add({std::to_string(s.ready()), std::to_string(s.delayed()),
                   std::to_string(s.leased()), std::to_string(s.dead()), Age(s.oldest_ready_age()),
                   Age(s.oldest_dead_age()), RateText(s.enqueue_rate()), RateText(s.ack_rate())});
            t.Print();
          });
    };
  })->add_option("name", *name, "queue name")->required();
}

struct EnqueueFlags {
  std::string file;
  std::vector<std::string> payloads;
};

// Enqueues the payloads given as arguments, or each line of --file or stdin as one job, in
// batches bounded by records and bytes (BatchLimits). One batch at a time, so that job ids follow
// the input order (FIFO within a priority). Prints "job ID" per job (-o json: one EnqueueResponse
// of them all) and a summary, with a progress line on stderr. A failed batch stops the command:
// the jobs before it stay enqueued and the error says how many. The exit code.
int Enqueue(const Globals& g, const std::string& queue, const EnqueueFlags& f) {
  std::ifstream file;
  std::istream* in = nullptr;
  if (f.payloads.empty()) {
    in = OpenInput(f.file, &file);
    if (in == nullptr) return UsageError("cannot read " + f.file);
  }
  Stub stub(g.Queue().Channel());
  qpb::EnqueueRequest batch;
  batch.set_queue(queue);
  qpb::EnqueueResponse all;  // -o json: every job, printed once at the end
  BatchCutter cutter(BatchLimits{});
  Progress progress("jobs");
  grpc::Status status;
  auto send = [&] {  // the open batch; false when it failed
    qpb::EnqueueResponse resp;
    status = stub.Enqueue(g.Context().get(), batch, &resp);
    if (!status.ok()) return false;
    if (g.json()) {
      all.mutable_jobs()->MergeFrom(resp.jobs());
    } else {
      for (const auto& j : resp.jobs()) {
        std::printf("job %llu%s\n", static_cast<unsigned long long>(j.job_id()),
                    j.duplicate() ? " (duplicate)" : "");
      }
    }
    progress.Add(resp.jobs_size());
    batch.clear_jobs();
    cutter.Reset();
    return true;
  };
  auto add = [&](std::string payload) {
    if (cutter.Full(payload.size()) && !send()) return false;
    cutter.Add(payload.size());
    batch.add_jobs()->set_payload(std::move(payload));
    return true;
  };
  bool ok = true;
  if (in != nullptr) {
    for (std::string line; ok && std::getline(*in, line);) ok = add(std::move(line));
  } else {
    for (size_t i = 0; ok && i < f.payloads.size(); ++i) ok = add(f.payloads[i]);
  }
  // The last batch. An empty input sends an empty one: the server says why that is refused.
  if (ok && (batch.jobs_size() > 0 || progress.sent() == 0)) ok = send();
  const double secs = progress.Finish();
  const int64_t done = progress.sent();
  if (ok || done > 0) {
    if (g.json()) {
      PrintJson(all);
    } else {
      std::printf("enqueued %lld job%s to %s in %.2f s (%.0f/s)\n", static_cast<long long>(done),
                  done == 1 ? "" : "s", queue.c_str(), secs, done / secs);
    }
  }
  if (ok) return kExitOk;
  if (done == 0) return Fail(status);
  const char* what = in != nullptr ? "lines" : "payloads";
  return Fail(grpc::Status(
      status.error_code(),
      absl::StrCat("enqueued the first ", done, " ", what, "; ", what, " ", done + 1, "..",
                   done + batch.jobs_size(), " failed and nothing after them was sent: ",
                   status.error_message())));
}

void AddQueueEnqueue(CLI::App* queue, const Globals& g, Action* run,
                     std::shared_ptr<std::string> name) {
  auto f = std::make_shared<EnqueueFlags>();
  auto* cmd = Command(queue, "enqueue",
                      "enqueue jobs: the arguments, or each line of stdin (or --file), sent in "
                      "batches in input order",
                      run, [&g, name, f] { return [&g, name, f] { return Enqueue(g, *name, *f); }; });
  cmd->add_option("name", *name, "queue name")->required();
  auto* payloads = cmd->add_option("payload", f->payloads, "job payloads");
  cmd->add_option("--file,-f", f->file, "read payloads from this file, one per line")
      ->excludes(payloads);
}

void AddQueueLease(CLI::App* queue, const Globals& g, Action* run,
                   std::shared_ptr<std::string> name) {
  auto max = std::make_shared<int>(1);
  auto wait = std::make_shared<std::string>("0s");
  auto* cmd = Command(
      queue, "lease", "lease jobs (prints job id and lease token)", run, [&g, name, max, wait] {
        return [&g, name, max, wait] {
          qpb::LeaseRequest req;
          req.set_queue(*name);
          req.set_worker_id("conduit-cli");
          req.set_max_jobs(*max);
          absl::Duration d;
          if (!ParseDuration(*wait, &d)) return UsageError("bad --wait");
          grpc_util::SetDuration(d, req.mutable_max_wait());
          return Call<qpb::LeaseRequest, qpb::LeaseResponse>(
              g.Queue(), &Stub::Lease, req, [](const qpb::LeaseResponse& r) {
                Table t({"JOB", "TOKEN", "ATTEMPT", "DEADLINE", "PAYLOAD"});
                for (const auto& j : r.jobs()) {
                  t.Add({std::to_string(j.job_id()), j.lease_token(), std::to_string(j.attempt()),
                         TimeText(grpc_util::FromTimestamp(j.deadline())), j.payload()});
                }
                t.Print();
              });
        };
      });
  cmd->add_option("name", *name, "queue name")->required();
  cmd->add_option("--max", *max, "jobs at most")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--wait", *wait, "wait this long for a job")->capture_default_str();
}

// A job to ack and its lease token.
using AckPair = std::pair<uint64_t, std::string>;

// Acks `jobs` with AckBatch (up to kMaxAckBatch a call, in order); prints "acked job ID" per acked
// job, "error: CODE: message" on stderr per job that was not (-o json: one AckBatchResponse), and
// with several jobs a summary. The exit code: 1 when any job was not acked.
int Ack(const Globals& g, const std::string& queue, const std::vector<AckPair>& jobs) {
  constexpr size_t kMaxAckBatch = 1000;  // the server's limit (queue.proto, AckBatch)
  Stub stub(g.Queue().Channel());
  qpb::AckBatchResponse all;  // -o json
  int64_t acked = 0, refused = 0;
  for (size_t first = 0; first < jobs.size(); first += kMaxAckBatch) {
    const size_t end = std::min(jobs.size(), first + kMaxAckBatch);
    qpb::AckBatchRequest req;
    req.set_queue(queue);
    for (size_t i = first; i < end; ++i) {
      qpb::AckBatchRequest::Entry* e = req.add_jobs();
      e->set_job_id(jobs[i].first);
      e->set_lease_token(jobs[i].second);
    }
    qpb::AckBatchResponse resp;
    if (auto s = stub.AckBatch(g.Context().get(), req, &resp); !s.ok()) {
      if (first == 0) return Fail(s);
      return Fail(grpc::Status(
          s.error_code(), absl::StrCat("the AckBatch of jobs ", first + 1, "..", end, " (of ",
                                       jobs.size(), ") failed; none after it was sent: ",
                                       s.error_message())));
    }
    for (const auto& r : resp.results()) {
      if (r.code() == 0) {
        ++acked;
        if (!g.json()) std::printf("acked job %llu\n", static_cast<unsigned long long>(r.job_id()));
      } else {
        ++refused;
        (void)Fail(absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()));
      }
    }
    all.mutable_results()->MergeFrom(resp.results());
  }
  if (g.json()) {
    PrintJson(all);
  } else if (jobs.size() > 1) {
    std::printf("acked %lld of %zu jobs\n", static_cast<long long>(acked), jobs.size());
  }
  return refused == 0 ? kExitOk : kExitError;
}

// JOB TOKEN, then `more` as further JOB TOKEN pairs; a usage message when they do not pair up,
// a job id is not a number or a job is listed twice.
std::string AckPairs(uint64_t job, const std::string& token, const std::vector<std::string>& more,
                     std::vector<AckPair>* out) {
  out->emplace_back(job, token);
  for (size_t i = 0; i < more.size(); i += 2) {
    uint64_t id;
    if (!absl::SimpleAtoi(more[i], &id)) return "bad job id '" + more[i] + "'";
    if (i + 1 == more.size()) return "job " + more[i] + " has no lease token";
    out->emplace_back(id, more[i + 1]);
  }
  absl::flat_hash_set<uint64_t> seen;
  for (const auto& [id, t] : *out) {
    if (!seen.insert(id).second) return absl::StrCat("job ", id, " is listed twice");
  }
  return "";
}

void AddQueueAck(CLI::App* queue, const Globals& g, Action* run, std::shared_ptr<std::string> name,
                 std::shared_ptr<uint64_t> job, std::shared_ptr<std::string> token) {
  auto more = std::make_shared<std::vector<std::string>>();
  auto* ack = Command(queue, "ack",
                      "acknowledge leased jobs (done): JOB TOKEN, or several JOB TOKEN pairs "
                      "acked together (AckBatch)",
                      run, [&g, name, job, token, more] {
                        return [&g, name, job, token, more] {
                          std::vector<AckPair> jobs;
                          if (std::string err = AckPairs(*job, *token, *more, &jobs);
                              !err.empty()) {
                            return UsageError(err);
                          }
                          return Ack(g, *name, jobs);
                        };
                      });
  ack->add_option("name", *name, "queue name")->required();
  ack->add_option("job", *job, "job id")->required();
  ack->add_option("token", *token, "lease token")->required();
  ack->add_option("more", *more, "further JOB TOKEN pairs");
}

void AddQueueNack(CLI::App* queue, const Globals& g, Action* run, std::shared_ptr<std::string> name,
                  std::shared_ptr<uint64_t> job, std::shared_ptr<std::string> token) {
  auto reason = std::make_shared<std::string>();
  auto permanent = std::make_shared<bool>(false);
  auto* nack = Command(
      queue, "nack", "report a failed attempt", run, [&g, name, job, token, reason, permanent] {
        return [&g, name, job, token, reason, permanent] {
          qpb::NackRequest req;
          req.set_queue(*name);
          req.set_job_id(*job);
          req.set_lease_token(*token);
          req.set_reason(*reason);
          req.set_failure_class(*permanent ? qpb::FAILURE_CLASS_PERMANENT
                                           : qpb::FAILURE_CLASS_TRANSIENT);
          return Call<qpb::NackRequest, qpb::NackResponse>(
              g.Queue(), &Stub::Nack, req, [&](const qpb::NackResponse& r) {
                if (r.dead()) {
                  std::printf("job %llu is in the dead-letter lane\n",
                              static_cast<unsigned long long>(*job));
                } else {
                  std::printf("job %llu retries at %s\n", static_cast<unsigned long long>(*job),
                              TimeText(grpc_util::FromTimestamp(r.retry_at())).c_str());
                }
              });
        };
      });
  nack->add_option("name", *name, "queue name")->required();
  nack->add_option("job", *job, "job id")->required();
  nack->add_option("token", *token, "lease token")->required();
  nack->add_option("--reason", *reason, "what went wrong")->required();
  nack->add_flag("--permanent", *permanent, "no retry: straight to the dead-letter lane");
}

}  // namespace

void AddQueueCommands(CLI::App& app, const Globals& g, Action* run) {
  CLI::App* queue = app.add_subcommand("queue", "work queues: create, list, stats, jobs");
  queue->require_subcommand(1);
  auto name = std::make_shared<std::string>();
  AddQueueCreate(queue, g, run, name);
  AddQueueList(queue, g, run);
  AddQueueStats(queue, g, run, name);
  AddQueueEnqueue(queue, g, run, name);
  AddQueueLease(queue, g, run, name);
  auto job = std::make_shared<uint64_t>(0);
  auto token = std::make_shared<std::string>();
  AddQueueAck(queue, g, run, name, job, token);
  AddQueueNack(queue, g, run, name, job, token);
}

}  // namespace conduit::cli
