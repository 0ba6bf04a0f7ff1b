// conduit queue create|list|stats|enqueue|lease|ack|nack and conduit dlq list|show|redrive|discard
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc/proto_time.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tools/conduit/cli.h"

namespace conduit::cli {
namespace {

namespace qpb = ::conduit::queue::v1;
using Stub = qpb::WorkQueue::Stub;

struct Filter {
  std::string reason_contains, tenant;
  void Add(CLI::App* cmd) {
    cmd->add_option("--reason-contains", reason_contains, "why it died contains this text");
    cmd->add_option("--tenant", tenant, "only this tenant");
  }
  void Fill(qpb::DeadLetterFilter* f) const {
    f->set_reason_contains(reason_contains);
    if (!tenant.empty()) f->set_tenant(tenant);
  }
};

std::string Age(const google::protobuf::Duration& d) {
  return DurationText(grpc_util::FromDuration(d));
}

void AddQueueCreate(CLI::App* queue, const Globals& g, Action* run,
                    std::shared_ptr<std::string> name) {
  auto visibility = std::make_shared<std::string>();
  auto attempts = std::make_shared<int>(0);
  auto* cmd = Command(queue, "create", "create a queue", run, [&g, name, visibility, attempts] {
    return [&g, name, visibility, attempts] {
      qpb::CreateQueueRequest req;
      req.set_name(*name);
      if (!visibility->empty()) {
        absl::Duration d;
        if (!ParseDuration(*visibility, &d)) return UsageError("bad --visibility-timeout");
        grpc_util::SetDuration(d, req.mutable_config()->mutable_visibility_timeout());
      }
      if (*attempts > 0) req.mutable_config()->set_max_attempts(*attempts);
      return Call<qpb::CreateQueueRequest, qpb::CreateQueueResponse>(
          g, &Stub::CreateQueue, req,
          [&](const auto&) { std::printf("created queue %s\n", name->c_str()); });
    };
  });
  cmd->add_option("name", *name, "queue name")->required();
  cmd->add_option("--visibility-timeout", *visibility, "lease length, e.g. 30s");
  cmd->add_option("--max-attempts", *attempts, "failed attempts before the dead-letter lane");
}

void AddQueueList(CLI::App* queue, const Globals& g, Action* run) {
  Command(queue, "list", "list queues", run, [&g] {
    return [&g] {
      return Call<qpb::ListQueuesRequest, qpb::ListQueuesResponse>(
          g, &Stub::ListQueues, {}, [](const qpb::ListQueuesResponse& r) {
            Table t({"QUEUE", "VISIBILITY", "MAX-ATTEMPTS"});
            for (const auto& q : r.queues()) {
              t.Add({q.name(), Age(q.config().visibility_timeout()),
                     std::to_string(q.config().max_attempts())});
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
          g, &Stub::GetQueueStats, req, [](const qpb::GetQueueStatsResponse& s) {
            Table t({"READY", "DELAYED", "LEASED", "DEAD", "OLDEST-READY", "OLDEST-DEAD",
                     "ENQUEUE/S", "ACK/S"});
            t.Add({std::to_string(s.ready()), std::to_string(s.delayed()),
                   std::to_string(s.leased()), std::to_string(s.dead()),
                   Age(s.oldest_ready_age()), Age(s.oldest_dead_age()),
                   absl::StrCat(s.enqueue_rate()), absl::StrCat(s.ack_rate())});
            t.Print();
          });
    };
  })->add_option("name", *name, "queue name")->required();
}

void AddQueueEnqueue(CLI::App* queue, const Globals& g, Action* run,
                     std::shared_ptr<std::string> name) {
  auto payloads = std::make_shared<std::vector<std::string>>();
  auto* cmd = Command(
      queue, "enqueue", "enqueue jobs (arguments, or stdin lines)", run, [&g, name, payloads] {
        return [&g, name, payloads] {
          qpb::EnqueueRequest req;
          req.set_queue(*name);
          std::vector<std::string> jobs = *payloads;
          if (jobs.empty()) {
            for (std::string line; std::getline(std::cin, line);) jobs.push_back(line);
          }
          for (const std::string& p : jobs) req.add_jobs()->set_payload(p);
          return Call<qpb::EnqueueRequest, qpb::EnqueueResponse>(
              g, &Stub::Enqueue, req, [](const qpb::EnqueueResponse& r) {
                for (const auto& j : r.jobs()) {
                  std::printf("job %llu%s\n", static_cast<unsigned long long>(j.job_id()),
                              j.duplicate() ? " (duplicate)" : "");
                }
              });
        };
      });
  cmd->add_option("name", *name, "queue name")->required();
  cmd->add_option("payload", *payloads, "job payloads");
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
              g, &Stub::Lease, req, [](const qpb::LeaseResponse& r) {
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

void AddQueueAck(CLI::App* queue, const Globals& g, Action* run, std::shared_ptr<std::string> name,
                 std::shared_ptr<uint64_t> job, std::shared_ptr<std::string> token) {
  auto* ack = Command(queue, "ack", "acknowledge a leased job (done)", run, [&g, name, job, token] {
    return [&g, name, job, token] {
      qpb::AckRequest req;
      req.set_queue(*name);
      req.set_job_id(*job);
      req.set_lease_token(*token);
      return Call<qpb::AckRequest, qpb::AckResponse>(g, &Stub::Ack, req, [&](const auto&) {
        std::printf("acked job %llu\n", static_cast<unsigned long long>(*job));
      });
    };
  });
  ack->add_option("name", *name, "queue name")->required();
  ack->add_option("job", *job, "job id")->required();
  ack->add_option("token", *token, "lease token")->required();
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
              g, &Stub::Nack, req, [&](const qpb::NackResponse& r) {
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

void AddDlqList(CLI::App* dlq, const Globals& g, Action* run, std::shared_ptr<std::string> name,
                std::shared_ptr<Filter> filter) {
  auto* cmd = Command(dlq, "list", "dead jobs, newest first", run, [&g, name, filter] {
    return [&g, name, filter] {
      qpb::ListDeadLettersRequest req;
      req.set_queue(*name);
      filter->Fill(req.mutable_filter());
      req.set_page_size(1000);
      return Call<qpb::ListDeadLettersRequest, qpb::ListDeadLettersResponse>(
          g, &Stub::ListDeadLetters, req, [](const qpb::ListDeadLettersResponse& r) {
            Table t({"JOB", "ATTEMPTS", "TENANT", "REASON"});
            for (const auto& d : r.dead_letters()) {
              t.Add({std::to_string(d.job_id()), std::to_string(d.attempts_size()),
                     d.tenant().empty() ? "-" : d.tenant(), d.reason()});
            }
            t.Print();
          });
    };
  });
  cmd->add_option("name", *name, "queue name")->required();
  filter->Add(cmd);
}

void AddDlqShow(CLI::App* dlq, const Globals& g, Action* run, std::shared_ptr<std::string> name) {
  auto job = std::make_shared<uint64_t>(0);
  auto* cmd = Command(dlq, "show", "one dead job with every attempt", run, [&g, name, job] {
    return [&g, name, job] {
      qpb::GetDeadLetterRequest req;
      req.set_queue(*name);
      req.set_job_id(*job);
      return Call<qpb::GetDeadLetterRequest, qpb::GetDeadLetterResponse>(
          g, &Stub::GetDeadLetter, req, [](const qpb::GetDeadLetterResponse& r) {
            const auto& d = r.dead_letter();
            std::printf("job %llu: %s\npayload: %s\n", static_cast<unsigned long long>(d.job_id()),
                        d.reason().c_str(), d.payload().c_str());
            Table t({"ATTEMPT", "WORKER", "OUTCOME", "REASON"});
            int n = 0;
            for (const auto& a : d.attempts()) {
              t.Add(
                  {std::to_string(++n), a.worker_id(), qpb::Outcome_Name(a.outcome()), a.reason()});
            }
            t.Print();
          });
    };
  });
  cmd->add_option("name", *name, "queue name")->required();
  cmd->add_option("job", *job, "job id")->required();
}

void AddDlqRedrive(CLI::App* dlq, const Globals& g, Action* run, std::shared_ptr<std::string> name,
                   std::shared_ptr<Filter> filter, std::shared_ptr<std::vector<uint64_t>> ids,
                   std::shared_ptr<bool> execute) {
  auto rate = std::make_shared<double>(0);
  auto to_topic = std::make_shared<std::optional<std::string>>();
  auto* cmd = Command(
      dlq, "redrive", "send dead jobs back (a dry run unless --execute)", run,
      [&g, name, filter, ids, execute, rate, to_topic] {
        return [&g, name, filter, ids, execute, rate, to_topic] {
          qpb::RedriveDeadLettersRequest req;
          req.set_queue(*name);
          if (*to_topic) req.mutable_to_topic()->set_topic(**to_topic);
          for (uint64_t id : *ids) req.add_job_ids(id);
          filter->Fill(req.mutable_filter());
          req.set_dry_run(!*execute);
          req.set_rate(*rate);
          return Call<qpb::RedriveDeadLettersRequest, qpb::RedriveDeadLettersResponse>(
              g, &Stub::RedriveDeadLetters, req, [](const qpb::RedriveDeadLettersResponse& r) {
                std::printf("%s %d jobs: %s\n", r.dry_run() ? "would redrive" : "redrove",
                            r.job_ids_size(), absl::StrJoin(r.job_ids(), ",").c_str());
                if (r.refused_job_ids_size() > 0) {
                  std::printf("refused (redriven too often): %s\n",
                              absl::StrJoin(r.refused_job_ids(), ",").c_str());
                }
              });
        };
      });
  cmd->add_option("name", *name, "queue name")->required();
  cmd->add_option("--ids", *ids, "job ids")->delimiter(',');
  cmd->add_option_function<std::string>(
      "--to-topic", [to_topic](const std::string& t) { *to_topic = t; },
      "re-produce to this topic instead of the queue (same key and event id)");
  cmd->add_flag_function(
      "--to-source-topic", [to_topic](int64_t) { *to_topic = ""; },
      "re-produce each letter to the topic it came from (a log consumer's dead letters)");
  filter->Add(cmd);
  cmd->add_flag("--execute", *execute, "apply (default: dry run)");
  cmd->add_option("--rate", *rate, "jobs per second at most");
}

void AddDlqDiscard(CLI::App* dlq, const Globals& g, Action* run, std::shared_ptr<std::string> name,
                   std::shared_ptr<Filter> filter, std::shared_ptr<std::vector<uint64_t>> ids,
                   std::shared_ptr<bool> execute) {
  auto reason = std::make_shared<std::string>();
  auto* cmd = Command(
      dlq, "discard", "drop dead jobs for good (a dry run unless --execute)", run,
      [&g, name, filter, ids, execute, reason] {
        return [&g, name, filter, ids, execute, reason] {
          qpb::DiscardDeadLettersRequest req;
          req.set_queue(*name);
          for (uint64_t id : *ids) req.add_job_ids(id);
          filter->Fill(req.mutable_filter());
          req.set_reason(*reason);
          req.set_dry_run(!*execute);
          return Call<qpb::DiscardDeadLettersRequest, qpb::DiscardDeadLettersResponse>(
              g, &Stub::DiscardDeadLetters, req, [](const qpb::DiscardDeadLettersResponse& r) {
                std::printf("%s %d jobs: %s\n", r.dry_run() ? "would discard" : "discarded",
                            r.job_ids_size(), absl::StrJoin(r.job_ids(), ",").c_str());
              });
        };
      });
  cmd->add_option("name", *name, "queue name")->required();
  cmd->add_option("--ids", *ids, "job ids")->delimiter(',');
  filter->Add(cmd);
  cmd->add_option("--reason", *reason, "why (recorded in the audit)")->required();
  cmd->add_flag("--execute", *execute, "apply (default: dry run)");
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

  CLI::App* dlq = app.add_subcommand("dlq", "dead-letter lane: list, show, redrive, discard");
  dlq->require_subcommand(1);
  auto filter = std::make_shared<Filter>();
  auto ids = std::make_shared<std::vector<uint64_t>>();
  auto execute = std::make_shared<bool>(false);
  AddDlqList(dlq, g, run, name, filter);
  AddDlqShow(dlq, g, run, name);
  AddDlqRedrive(dlq, g, run, name, filter, ids, execute);
  AddDlqDiscard(dlq, g, run, name, filter, ids, execute);
}

}  // namespace conduit::cli
