// conduit dlq list|show|redrive|discard: the dead-letter lane of a work queue.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
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

void AddDlqList(CLI::App* dlq, const Globals& g, Action* run, std::shared_ptr<std::string> name,
                std::shared_ptr<Filter> filter) {
  auto* cmd = Command(dlq, "list", "dead jobs, newest first", run, [&g, name, filter] {
    return [&g, name, filter] {
      qpb::ListDeadLettersRequest req;
      req.set_queue(*name);
      filter->Fill(req.mutable_filter());
      req.set_page_size(1000);
      return Call<qpb::ListDeadLettersRequest, qpb::ListDeadLettersResponse>(
          g.Queue(), &Stub::ListDeadLetters, req, [](const qpb::ListDeadLettersResponse& r) {
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
          g.Queue(), &Stub::GetDeadLetter, req, [](const qpb::GetDeadLetterResponse& r) {
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
              g.Queue(), &Stub::RedriveDeadLetters, req,
              [](const qpb::RedriveDeadLettersResponse& r) {
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
              g.Queue(), &Stub::DiscardDeadLetters, req,
              [](const qpb::DiscardDeadLettersResponse& r) {
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

void AddDlqCommands(CLI::App& app, const Globals& g, Action* run) {
  CLI::App* dlq = app.add_subcommand("dlq", "dead-letter lane: list, show, redrive, discard");
  dlq->require_subcommand(1);
  auto name = std::make_shared<std::string>();
  auto filter = std::make_shared<Filter>();
  auto ids = std::make_shared<std::vector<uint64_t>>();
  auto execute = std::make_shared<bool>(false);
  AddDlqList(dlq, g, run, name, filter);
  AddDlqShow(dlq, g, run, name);
  AddDlqRedrive(dlq, g, run, name, filter, ids, execute);
  AddDlqDiscard(dlq, g, run, name, filter, ids, execute);
}

}  // namespace conduit::cli
