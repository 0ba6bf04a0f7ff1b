// NATS JetStream load loops over the minimal NATS text-protocol client in nats_protocol.h (see
// peer.h for the contract).
#include <algorithm>
#include <chrono>
#include <latch>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/peers/nats_protocol.h"
#include "bench/peers/peer.h"
#include "bench/peers/socket.h"

namespace conduit::bench::peers {
namespace {

using nats::Conn;
using nats::Msg;
using nats::ParseU64;
using Clock = std::chrono::steady_clock;
constexpr auto kWarmup = std::chrono::milliseconds(200);
constexpr int kWorkBytes = 100;                 // work-queue payload size (the signature has none)
constexpr int kPrefillWindow = 256;             // PubAcks outstanding while pre-filling
constexpr double kPrefillPerSec = 60000;        // > any cycle rate seen; a dry queue is reported
constexpr double kBatchPrefillPerSec = 200000;  // the same for batched cycles (~100k/s seen)

uint64_t Ns(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

void Fail(Figures* f, const std::string& what) {
  if (f->errors++ == 0) f->error = what;
}

// Publishes to `subject` keeping up to `window` PubAcks outstanding; with window 1 this is the
// synchronous publish. Latency is per message, publish to PubAck. The reply subject
// "<inbox>.<n>" names the message; PubAcks for one stream come back in publish order, so slot
// n % window is free again by the time n is reused. Acks that arrive in [from, until) are counted;
// sending stops at `until` or after `limit` messages, and what is in flight is drained.
void PublishLoop(Conn& c, const std::string& subject, std::string_view payload, int window,
                 Clock::time_point from, Clock::time_point until, uint64_t limit, Figures* f,
                 uint64_t* ops) {
  window = std::max(window, 1);
  std::vector<Clock::time_point> sent_at(static_cast<size_t>(window));
  const std::string prefix = c.inbox() + ".";
  uint64_t sent = 0, acked = 0;
  std::string err;
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now < until && sent < limit) {
      for (; sent - acked < static_cast<uint64_t>(window) && sent < limit; ++sent) {
        sent_at[sent % window] = now;
        c.Append(subject, prefix + std::to_string(sent), payload);
      }
      if (!c.Flush(&err)) return Fail(f, err);
    } else if (acked == sent) {
      return;
    }
    // At least one ack, then whatever else already arrived, before refilling the window.
    for (bool first = true;; first = false) {
      Msg m;
      if (!c.Read(&m, &err, first)) {
        if (err.empty()) break;
        return Fail(f, err);
      }
      if (!m.subject.starts_with(prefix)) continue;
      ++acked;
      const Clock::time_point t = Clock::now();
      if (m.status() != 0) {
        Fail(f, "publish: status " + std::to_string(m.status()));
      } else if (m.payload.find("\"error\"") != std::string_view::npos) {
        Fail(f, "publish: " + std::string(m.payload));
      } else if (t >= from && t < until) {
        f->latency.Record(Ns(t - sent_at[ParseU64(m.subject.substr(prefix.size())) % window]));
        ++*ops;
      }
    }
  }
}

// Work-queue cycle: pull up to `batch` messages with one request, AckSync each (the ack carries
// a reply subject and the server answers once the ack is processed, matching XACK/delete which
// also wait), repeat. The acks of a round go out in one write and their answers are read after.
// Latency is per round; the messages of rounds completing in [from, until) count.
void CycleLoop(Conn& c, const std::string& next_subject, int batch, Clock::time_point from,
               Clock::time_point until, Figures* f, uint64_t* ops) {
  const std::string pull_inbox = c.inbox() + ".pull", ack_inbox = c.inbox() + ".ack";
  // expires (ns) bounds the wait; a queue that cannot fill the batch answers 408 after it (with
  // whatever it had before), never hangs. The pre-fill is sized so that means it ran dry.
  const std::string pull = R"({"batch":)" + std::to_string(batch) + R"(,"expires":1000000000})";
  std::string err;
  Msg m;
  for (Clock::time_point t0 = Clock::now(); t0 < until; t0 = Clock::now()) {
    c.Append(next_subject, pull_inbox, pull);
    if (!c.Flush(&err)) return Fail(f, err);
    for (int k = 0; k < batch; ++k) {
      if (!c.Read(&m, &err)) return Fail(f, err);
      if (m.status() == 404 || m.status() == 408) return Fail(f, "work queue ran dry");
      if (m.status() != 0 || m.reply.empty()) {
        return Fail(f, "pull: status " + std::to_string(m.status()));
      }
      c.Append(m.reply, ack_inbox, "");  // copies m.reply before the next Read invalidates it
    }
    if (!c.Flush(&err)) return Fail(f, err);
    for (int k = 0; k < batch; ++k) {
      if (!c.Read(&m, &err)) return Fail(f, err);
      if (m.subject != ack_inbox || m.status() != 0) return Fail(f, "ack: unexpected reply");
    }
    const Clock::time_point t1 = Clock::now();
    if (t1 >= from && t1 < until) {
      f->latency.Record(Ns(t1 - t0));
      *ops += static_cast<uint64_t>(batch);
    }
  }
}

// Runs `loop(conn, from, until, figures, ops)` on `clients` connections, one thread each. All
// threads connect first and then share one start instant, so the window is the same for all.
template <typename Loop>
Figures RunClients(int port, const std::string& name, int clients, absl::Duration run, Loop loop) {
  std::vector<Figures> figures(static_cast<size_t>(clients));
  std::vector<uint64_t> ops(static_cast<size_t>(clients), 0);
  std::latch connected(clients), go(1);
  Clock::time_point start;
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      Conn c;
      std::string err;
      const bool ok = c.Open(port, "_INBOX." + name + "." + std::to_string(i), &err);
      connected.count_down();
      go.wait();
      if (!ok) return Fail(&figures[i], err);
      const Clock::time_point from = start + kWarmup;
      loop(c, from, from + absl::ToChronoNanoseconds(run), &figures[i], &ops[i]);
    });
  }
  connected.wait();
  start = Clock::now();
  go.count_down();
  for (auto& t : threads) t.join();
  Figures out;
  uint64_t total = 0;
  for (int i = 0; i < clients; ++i) {
    out.latency.Merge(figures[i].latency);
    if (out.error.empty()) out.error = figures[i].error;
    out.errors += figures[i].errors;
    total += ops[i];
  }
  out.ops_per_s = static_cast<double>(total) / absl::ToDoubleSeconds(run);
  return out;
}

// Creates a fresh stream (and for a work queue its durable consumer "w"), runs `body`, then
// deletes the stream so repeated runs do not accumulate data on disk.
template <typename Body>
Figures WithStream(int port, const char* kind, const char* retention, int replicas, Body body) {
  Figures out;
  Conn admin;
  std::string err, reply;
  // Fresh per call so runs never see each other's messages, consumers or leftover state.
  const std::string name = UniqueName(std::string("CB_") + kind);
  const bool workqueue = std::string_view(retention) == "workqueue";
  if (!admin.Open(port, "_INBOX." + name + ".admin", &err) ||
      !admin.Request("$JS.API.STREAM.CREATE." + name,
                     R"({"name":")" + name + R"(","subjects":["bench.)" + name +
                         R"("],"storage":"file","retention":")" + retention +
                         R"(","num_replicas":)" + std::to_string(replicas) + "}",
                     &reply, &err) ||
      (workqueue &&
       !admin.Request("$JS.API.CONSUMER.DURABLE.CREATE." + name + ".w",
                      R"({"stream_name":")" + name +
                          R"(","config":{"durable_name":"w","ack_policy":"explicit"}})",
                      &reply, &err))) {
    Fail(&out, err);
    return out;
  }
  out = body(admin, name);
  admin.Request("$JS.API.STREAM.DELETE." + name, "", &reply, &err);
  return out;
}

// Pre-fills a fresh work-queue stream, untimed, with `per_sec` messages for each second of the
// run; all clients then share its one durable consumer, as work-queue workers do.
Figures WorkQueueCycle(int port, int clients, int batch, double per_sec, absl::Duration run) {
  return WithStream(port, "WQ", "workqueue", 1, [&](Conn& admin, const std::string& name) {
    Figures out;
    uint64_t unused = 0;
    const auto prefill =
        static_cast<uint64_t>(per_sec * (absl::ToDoubleSeconds(run) + 0.2) + 1000);
    PublishLoop(admin, "bench." + name, std::string(kWorkBytes, 'x'), kPrefillWindow,
                Clock::time_point::max(), Clock::time_point::max(), prefill, &out, &unused);
    if (out.errors > 0) return out;
    const std::string next = "$JS.API.CONSUMER.MSG.NEXT." + name + ".w";
    return RunClients(port, name, clients, run,
                      [&](Conn& c, auto from, auto until, Figures* f, uint64_t* ops) {
                        CycleLoop(c, next, batch, from, until, f, ops);
                      });
  });
}

}  // namespace

Figures NatsPublish(int port, int clients, int window, int value_bytes, absl::Duration run,
                    int replicas) {
  const std::string payload(static_cast<size_t>(value_bytes), 'x');
  return WithStream(port, "PUB", "limits", replicas, [&](Conn&, const std::string& name) {
    const std::string subject = "bench." + name;
    return RunClients(port, name, clients, run,
                      [&](Conn& c, auto from, auto until, Figures* f, uint64_t* ops) {
                        PublishLoop(c, subject, payload, window, from, until, UINT64_MAX, f, ops);
                      });
  });
}

Figures NatsWorkQueueCycle(int port, int clients, absl::Duration run) {
  return WorkQueueCycle(port, clients, 1, kPrefillPerSec, run);
}

Figures NatsWorkQueueCycleBatch(int port, int clients, int batch, absl::Duration run) {
  return WorkQueueCycle(port, clients, std::max(batch, 1), kBatchPrefillPerSec, run);
}

}  // namespace conduit::bench::peers
