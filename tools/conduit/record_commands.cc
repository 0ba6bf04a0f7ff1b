// conduit produce TOPIC / conduit consume TOPIC: records go to and come from each partition's
// leader (the client library's ClusterRouter, from the --addr list).
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/cluster_router.h"
#include "client/group_consumer.h"
#include "client/producer.h"
#include "client/rate_limiter.h"
#include "common/grpc/proto_time.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "tools/conduit/batching.h"
#include "tools/conduit/cli.h"

namespace conduit::cli {
namespace {

namespace lpb = ::conduit::log::v1;

struct ProduceFlags {
  std::string topic, file, key_separator, acks;
  int partition = -1;
  std::vector<std::string> headers;
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// Parses --header key=value flags into `out`; an error message for a bad one.
std::string ParseHeaders(const std::vector<std::string>& flags, Headers* out) {
  for (const std::string& h : flags) {
    std::pair<std::string, std::string> kv = absl::StrSplit(h, absl::MaxSplits('=', 1));
    if (h.find('=') == std::string::npos) return "--header wants key=value: " + h;
    out->push_back(std::move(kv));
  }
  return "";
}

// The record one input line becomes: key and value split at --key-separator when given.
client::ProducerRecord LineRecord(const std::string& line, const ProduceFlags& f,
                                  const Headers& headers) {
  client::ProducerRecord r;
  r.value = line;
  if (!f.key_separator.empty()) {
    size_t at = line.find(f.key_separator);
    if (at != std::string::npos) {
      r.key = line.substr(0, at);
      r.value = line.substr(at + f.key_separator.size());
    }
  }
  if (f.partition >= 0) r.partition = f.partition;
  r.headers = headers;
  return r;
}

void PrintProduceSummary(const Globals& g, const std::string& topic, int64_t sent, int64_t failed,
                         double secs) {
  if (g.json()) {
    std::printf("{\"topic\": \"%s\", \"sent\": %lld, \"produced\": %lld, \"failed\": %lld}\n",
                topic.c_str(), static_cast<long long>(sent), static_cast<long long>(sent - failed),
                static_cast<long long>(failed));
  } else {
    const int64_t produced = sent - failed;
    std::printf("produced %lld record%s to %s in %.2f s (%.0f/s)\n",
                static_cast<long long>(produced), produced == 1 ? "" : "s", topic.c_str(), secs,
                produced / secs);
  }
}

int Produce(const Globals& g, const ProduceFlags& f) {
  Headers headers;
  if (std::string err = ParseHeaders(f.headers, &headers); !err.empty()) return UsageError(err);
  std::ifstream file;
  std::istream* in = OpenInput(f.file, &file);
  if (in == nullptr) return UsageError("cannot read " + f.file);
  auto producer = client::Producer::Create({.bootstrap = g.Bootstrap(),
                                            .topic = f.topic,
                                            .request_timeout = absl::Seconds(g.timeout_seconds),
                                            .acks = f.acks.empty()    ? lpb::ACKS_UNSPECIFIED
                                                    : f.acks == "all" ? lpb::ACKS_ALL
                                                                      : lpb::ACKS_LEADER});
  if (!producer.ok()) {
    return Fail(producer.status());
  }
  std::atomic<int64_t> failed{0};
  Progress progress("records");  // the Producer batches; this counts what it was handed
  std::string line;
  while (std::getline(*in, line)) {
    (*producer)->Send(LineRecord(line, f, headers),
                      [&failed](absl::StatusOr<client::RecordPosition> p) {
                        if (!p.ok()) failed.fetch_add(1);
                      });
    progress.Add(1);
  }
  absl::Status flushed = (*producer)->Flush();
  const double secs = progress.Finish();
  PrintProduceSummary(g, f.topic, progress.sent(), failed.load(), secs);
  if (!flushed.ok() || failed.load() > 0) {
    return Fail(absl::Status(flushed.ok() ? absl::StatusCode::kUnknown : flushed.code(),
                             absl::StrCat(failed.load(), " records failed; first error: ",
                                          flushed.message())));
  }
  return kExitOk;
}

struct ConsumeFlags {
  std::string topic, group, from_time, format = "%p\t%o\t%T\t%k\t%v";
  int partition = -1;
  int64_t offset = -1;
  bool follow = false;
  int64_t max = -1;
  double rate = 0;  // records a second; 0: unlimited
};

std::string Render(const ConsumeFlags& f, const std::string& topic, int32_t partition,
                   int64_t offset, const std::optional<std::string>& key,
                   const std::optional<std::string>& value, absl::Time appended,
                   std::optional<absl::Time> event_time) {
  return absl::StrReplaceAll(
      f.format, {{"%t", topic},
                 {"%p", std::to_string(partition)},
                 {"%o", std::to_string(offset)},
                 {"%k", key.value_or("")},
                 {"%v", value.value_or("")},
                 {"%T", TimeText(appended)},
                 {"%E", event_time ? TimeText(*event_time) : "-"},
                 {"\\t", "\t"}});
}

lpb::Record ToProto(const client::ConsumedRecord& r) {
  lpb::Record out;
  out.set_partition(r.partition);
  out.set_offset(r.offset);
  if (r.key) out.set_key(*r.key);
  if (r.value) out.set_value(*r.value);
  for (const auto& [k, v] : r.headers) {
    lpb::Header* h = out.add_headers();
    h->set_key(k);
    h->set_value(v);
  }
  grpc_util::SetTimestamp(r.append_time, out.mutable_append_time());
  if (r.event_time) grpc_util::SetTimestamp(*r.event_time, out.mutable_event_time());
  return out;
}

int ConsumeGroup(const Globals& g, const ConsumeFlags& f) {
  auto consumer =
      client::GroupConsumer::Create({.bootstrap = g.Bootstrap(),
                                     .coordinator_address = g.coordinator,
                                     .group = f.group,
                                     .topics = {f.topic},
                                     .client_id = "conduit-cli",
                                     .max_records_per_second = f.rate,
                                     .request_timeout = absl::Seconds(g.timeout_seconds)});
  if (!consumer.ok()) {
    return Fail(consumer.status());
  }
  // An empty Poll means caught up: with --rate below 1/s it must outlast the wait for a token.
  const absl::Duration poll_timeout =
      f.rate > 0 ? std::max(absl::Seconds(1), absl::Seconds(1.5 / f.rate)) : absl::Seconds(1);
  int64_t printed = 0;
  while (f.max < 0 || printed < f.max) {
    auto records = (*consumer)->Poll(poll_timeout);
    if (!records.ok()) {
      return Fail(records.status());
    }
    if (records->empty() && !f.follow) break;  // caught up
    std::map<client::TopicPartition, int64_t> done;  // next offset after what was printed
    for (const client::ConsumedRecord& r : *records) {
      if (f.max >= 0 && printed >= f.max) break;
      if (g.json()) {
        PrintJson(ToProto(r));
      } else {
        std::puts(Render(f, r.topic, r.partition, r.offset, r.key, r.value, r.append_time,
                         r.event_time).c_str());
      }
      done[{r.topic, r.partition}] = r.offset + 1;
      ++printed;
    }
    std::fflush(stdout);
    // Commit what was printed, and only that: with --max the rest of the batch stays unread.
    if (absl::Status s = (*consumer)->Commit(done); !s.ok()) {
      (*consumer)->Close();
      return Fail(absl::Status(s.code(), absl::StrCat("commit of what was printed failed (it "
                                                      "will be delivered again): ",
                                                      s.message())));
    }
  }
  (*consumer)->Close();
  return kExitOk;
}

using Positions = std::vector<std::pair<int32_t, int64_t>>;  // partition → next offset

// Moves each position to the first record appended at or after --from-time (asking each
// partition's leader); the exit code.
int SeekToTime(client::ClusterRouter& router, const ConsumeFlags& f, Positions* positions) {
  absl::Time t;
  if (!ParseTime(f.from_time, &t))
    return UsageError(absl::StrCat("bad --from-time ", f.from_time, ": give ", kTimeFormats));
  for (auto& [partition, offset] : *positions) {
    lpb::ListOffsetsRequest req;
    req.set_topic(f.topic);
    req.add_partitions(partition);
    req.set_spec(lpb::OFFSET_SPEC_TIMESTAMP);
    grpc_util::SetTimestamp(t, req.mutable_timestamp());
    lpb::ListOffsetsResponse resp;
    grpc::Status s = router.CallLeader(
        f.topic, partition, [&](client::ClusterRouter::Stub& stub, grpc::ClientContext& ctx) {
          resp.Clear();
          return stub.ListOffsets(&ctx, req, &resp);
        });
    if (!s.ok()) return Fail(s);
    if (resp.offsets_size() != 1) {
      return Fail(absl::InternalError("ListOffsets: one offset expected"));
    }
    offset = resp.offsets(0).offset();
  }
  return kExitOk;
}

void PrintFetched(const Globals& g, const ConsumeFlags& f, int32_t partition,
                  const lpb::Record& r) {
  if (g.json()) {
    PrintJson(r);
    return;
  }
  std::optional<std::string> key, value;
  if (r.has_key()) key = r.key();
  if (r.has_value()) value = r.value();
  std::optional<absl::Time> event;
  if (r.has_event_time()) event = grpc_util::FromTimestamp(r.event_time());
  std::puts(Render(f, f.topic, partition, r.offset(), key, value,
                   grpc_util::FromTimestamp(r.append_time()), event)
                .c_str());
}

// A Fetch error that a new leader ends: the leader is gone (UNAVAILABLE, DEADLINE_EXCEEDED) or
// the partition has none yet, or is led elsewhere (FAILED_PRECONDITION).
bool LeaderMayReturn(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
}

// Fetches from each partition's leader and prints, to the end or (--follow) on; the exit code.
int FetchAndPrint(client::ClusterRouter& router, const Globals& g, const ConsumeFlags& f,
                  Positions& positions) {
  std::optional<client::RateLimiter> limiter;  // --rate, as GroupConsumer applies it
  if (f.rate > 0) limiter.emplace(f.rate, f.rate, time::SystemClock::Get());
  int64_t printed = 0;
  absl::flat_hash_set<int32_t> waiting;  // --follow: partitions whose leader does not answer
  while (f.max < 0 || printed < f.max) {
    bool any = false, all_caught_up = true;
    for (auto& [partition, offset] : positions) {
      int64_t budget = 500;
      if (limiter) {
        absl::SleepFor(limiter->TimeUntilAvailable(1));
        budget = std::min(budget, limiter->Available());
      }
      lpb::FetchRequest req;
      req.set_topic(f.topic);
      req.set_partition(partition);
      req.set_offset(offset);
      req.set_max_records(static_cast<int32_t>(budget));
      if (f.follow && positions.size() == 1) {
        grpc_util::SetDuration(absl::Seconds(1), req.mutable_max_wait());
      }
      lpb::FetchResponse resp;
      grpc::Status s = router.CallLeader(
          f.topic, partition, [&](client::ClusterRouter::Stub& stub, grpc::ClientContext& ctx) {
            resp.Clear();
            return stub.Fetch(&ctx, req, &resp);
          });
      if (!s.ok() && f.follow && LeaderMayReturn(s)) {
        // --follow outlives a leader: the router finds the next one once the cluster has moved
        // the partition (a lease TTL or so); until then, say so once and keep asking.
        if (!waiting.contains(partition)) {
          std::fprintf(stderr, "partition %d: no leader answers (%s); following on\n", partition,
                       s.error_message().c_str());
          waiting.insert(partition);
        }
        absl::SleepFor(absl::Milliseconds(500));
        all_caught_up = false;
        continue;
      }
      if (!s.ok()) return Fail(s);
      if (waiting.erase(partition) > 0) {
        std::fprintf(stderr, "partition %d: reading again\n", partition);
      }
      if (limiter) limiter->Take(resp.records_size());
      for (const lpb::Record& r : resp.records()) {
        if (f.max >= 0 && printed >= f.max) break;
        PrintFetched(g, f, partition, r);
        ++printed;
        any = true;
      }
      offset = resp.next_offset();
      if (offset < resp.high_watermark()) all_caught_up = false;
    }
    std::fflush(stdout);
    if (!f.follow && all_caught_up) break;
    if (!any && f.follow && positions.size() > 1) absl::SleepFor(absl::Milliseconds(200));
  }
  return kExitOk;
}

int ConsumePartitions(const Globals& g, const ConsumeFlags& f) {
  auto router = client::ClusterRouter::Create(
      {.bootstrap = g.Bootstrap(), .request_timeout = absl::Seconds(g.timeout_seconds)});
  if (!router.ok()) return Fail(router.status());
  lpb::DescribeTopicRequest dreq;
  dreq.set_name(f.topic);
  lpb::DescribeTopicResponse topic;
  if (auto s = (*router)->AnyBroker()->DescribeTopic(g.Context().get(), dreq, &topic); !s.ok()) {
    return Fail(s);
  }
  if (f.offset >= 0 && f.partition < 0 && topic.partitions_size() > 1) {
    return UsageError("--offset needs --partition: topic " + f.topic + " has " +
                      std::to_string(topic.partitions_size()) + " partitions");
  }
  Positions positions;
  for (const auto& p : topic.partitions()) {
    if (f.partition >= 0 && p.partition() != f.partition) continue;
    positions.emplace_back(p.partition(), f.offset >= 0 ? f.offset : p.log_start_offset());
  }
  if (positions.empty()) {
    return UsageError(absl::StrCat("topic ", f.topic, " has no partition ", f.partition));
  }
  if (!f.from_time.empty()) {
    if (int code = SeekToTime(**router, f, &positions); code != kExitOk) return code;
  }
  return FetchAndPrint(**router, g, f, positions);
}

}  // namespace

void AddRecordCommands(CLI::App& app, const Globals& g, Action* run) {
  {
    auto f = std::make_shared<ProduceFlags>();
    auto* cmd = app.add_subcommand("produce", "append stdin lines (or --file) as records");
    cmd->add_option("topic", f->topic, "topic")->required();
    cmd->add_option("--file,-f", f->file, "read records from this file, one per line");
    cmd->add_option("--key-separator,-K", f->key_separator,
                    "split each line into key and value at the first occurrence");
    cmd->add_option("--partition", f->partition, "write to this partition");
    cmd->add_option("--header,-H", f->headers, "key=value header on every record");
    cmd->add_option("--acks", f->acks, "all | leader (default: the topic's setting)")
        ->check(CLI::IsMember({"all", "leader"}));
    cmd->callback([&g, run, f] { *run = [&g, f] { return Produce(g, *f); }; });
  }
  {
    auto f = std::make_shared<ConsumeFlags>();
    auto* cmd = app.add_subcommand("consume", "print records (to the end, or --follow)");
    cmd->add_option("topic", f->topic, "topic")->required();
    auto* group = cmd->add_option("--group,-g", f->group, "consume as a member of this group");
    cmd->add_option("--partition", f->partition, "only this partition")->excludes(group);
    cmd->add_option("--offset", f->offset, "start offset (default: the log start)")
        ->excludes(group);
    cmd->add_option("--from-time", f->from_time, "start at the first record appended then")
        ->excludes(group);
    cmd->add_flag("--follow", f->follow, "wait for new records");
    cmd->add_option("--max,-n", f->max, "stop after this many records");
    cmd->add_option("--rate", f->rate, "at most this many records a second (default: unlimited)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--format", f->format,
                    "%t topic %p partition %o offset %k key %v value %T append time %E event time")
        ->capture_default_str();
    cmd->callback([&g, run, f] {
      *run = [&g, f] { return f->group.empty() ? ConsumePartitions(g, *f) : ConsumeGroup(g, *f); };
    });
  }
}

}  // namespace conduit::cli
