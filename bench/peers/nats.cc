// NATS JetStream load loops over a minimal NATS text-protocol client (see peer.h for the
// contract). The client is written against the raw protocol rather than a client library so
// the peers are all driven the same way: blocking loopback sockets, one thread per connection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <latch>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/peers/peer.h"
#include "bench/peers/socket.h"

namespace conduit::bench::peers {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWarmup = std::chrono::milliseconds(200);
constexpr int kWorkBytes = 100;           // work-queue payload size (the signature has none)
constexpr int kPrefillWindow = 256;       // PubAcks outstanding while pre-filling
constexpr double kPrefillPerSec = 60000;  // > any cycle rate seen; a dry queue is reported

uint64_t Ns(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

uint64_t ParseU64(std::string_view s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// One MSG/HMSG. The views point into the connection's read buffer and stay valid only until
// the next Read, which spares a copy per message on the hot path.
struct Msg {
  std::string_view subject, reply, headers, payload;
  // Status from an HMSG header block such as "NATS/1.0 503\r\n\r\n" (0 for a plain message).
  int status() const {
    if (!headers.starts_with("NATS/1.0 ")) return 0;
    return static_cast<int>(ParseU64(headers.substr(9, 3)));
  }
};

class Conn {
 public:
  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() {
    if (fd_ >= 0) close(fd_);
  }

  // Connects, does the INFO/CONNECT handshake and subscribes to the wildcard inbox
  // "<inbox>.>" that carries every reply this connection asks for.
  bool Open(int port, std::string inbox, std::string* err) {
    inbox_ = std::move(inbox);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{5, 0};  // a stalled server turns into an error instead of a hung run
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      *err = std::string("connect: ") + strerror(errno);
      return false;
    }
    size_t eol;
    if (!LineEnd(&eol, err)) return false;  // INFO {...}
    begin_ += eol + 2;
    // verbose:false suppresses +OK per command; headers:true lets the server send status
    // messages (503 no responders, 404/408 on pulls) as HMSG instead of silently timing out.
    const std::string hello =
        R"(CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true})"
        "\r\nSUB " + inbox_ + ".> 1\r\nPING\r\n";
    if (!SendAll(hello, err)) return false;
    for (;;) {  // the PONG proves CONNECT and SUB were processed
      if (!LineEnd(&eol, err)) return false;
      std::string_view line(in_.data() + begin_, eol);
      begin_ += eol + 2;
      if (line == "PONG") return true;
      if (line.starts_with("-ERR")) return (*err = line, false);
    }
  }

  const std::string& inbox() const { return inbox_; }

  // Queues a PUB; nothing is sent until Flush, so a window of publishes costs one write.
  void Append(std::string_view subject, std::string_view reply, std::string_view payload) {
    out_.append("PUB ").append(subject).append(" ").append(reply).append(" ");
    out_.append(std::to_string(payload.size())).append("\r\n").append(payload).append("\r\n");
  }
  bool Flush(std::string* err) {
    bool ok = SendAll(out_, err);
    out_.clear();
    return ok;
  }

  // Next MSG/HMSG; answers server PINGs on the way. False on -ERR, EOF or timeout. With
  // wait=false only already-buffered bytes are parsed and "nothing complete yet" is false with
  // an empty *err: draining must not block behind a trailing server PING.
  bool Read(Msg* m, std::string* err, bool wait = true) {
    wait_ = wait;
    for (;;) {
      size_t eol;
      if (!LineEnd(&eol, err)) return false;
      std::string_view line(in_.data() + begin_, eol);
      const bool hmsg = line.starts_with("HMSG ");
      if (!hmsg && !line.starts_with("MSG ")) {
        begin_ += eol + 2;
        if (line == "PING" && !SendAll("PONG\r\n", err)) return false;
        if (line.starts_with("-ERR")) return (*err = line, false);
        continue;  // PONG, +OK, INFO updates
      }
      // MSG <subject> <sid> [reply] <total> / HMSG <subject> <sid> [reply] <hdr> <total>.
      // Token positions are kept as offsets because Need() may move the buffer.
      // Runs of spaces are skipped: 2.9 writes "MSG <subject> <sid>  <total>" (an empty reply).
      size_t off[7], len[7];
      int n = 0;
      for (size_t i = line.find_first_not_of(' '); i < line.size() && n < 7;) {
        size_t j = std::min(line.find(' ', i), line.size());
        off[n] = i, len[n++] = j - i;
        i = line.find_first_not_of(' ', j);
      }
      const int fixed = hmsg ? 5 : 4;  // tokens without the optional reply
      if (n != fixed && n != fixed + 1) return (*err = "bad line: " + std::string(line), false);
      const bool has_reply = n == fixed + 1;
      const uint64_t total = ParseU64(line.substr(off[n - 1], len[n - 1]));
      const uint64_t hdr = hmsg ? ParseU64(line.substr(off[n - 2], len[n - 2])) : 0;
      if (!Need(eol + 2 + total + 2, err)) return false;
      const char* base = in_.data() + begin_;
      m->subject = {base + off[1], len[1]};
      m->reply = has_reply ? std::string_view(base + off[3], len[3]) : std::string_view();
      m->headers = {base + eol + 2, hdr};
      m->payload = {base + eol + 2 + hdr, total - hdr};
      begin_ += eol + 2 + total + 2;
      return true;
    }
  }

  // Synchronous JetStream API call; the reply payload must not carry an "error" object.
  bool Request(const std::string& subject, std::string_view body, std::string* reply,
               std::string* err) {
    const std::string inbox = inbox_ + ".api" + std::to_string(++requests_);
    Append(subject, inbox, body);
    if (!Flush(err)) return false;
    Msg m;
    do {
      if (!Read(&m, err)) return false;
    } while (m.subject != inbox);
    if (m.status() == 503) return (*err = subject + ": no responders (is -js on?)", false);
    reply->assign(m.payload);
    if (reply->find("\"error\"") != std::string::npos)
      return (*err = subject + ": " + *reply, false);
    return true;
  }

 private:
  bool SendAll(std::string_view s, std::string* err) {
    while (!s.empty()) {
      ssize_t w = send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return (*err = std::string("send: ") + strerror(errno), false);
      s.remove_prefix(static_cast<size_t>(w));
    }
    return true;
  }
  // Reads more bytes, first moving the unread tail to the front (it is at most one partial
  // message, so the copy is small) and growing the buffer for payloads bigger than it.
  bool Fill(std::string* err) {
    if (!wait_) return (err->clear(), false);
    std::memmove(in_.data(), in_.data() + begin_, end_ - begin_);
    end_ -= begin_, begin_ = 0;
    if (end_ == in_.size()) in_.resize(in_.size() * 2);
    for (;;) {
      ssize_t r = recv(fd_, in_.data() + end_, in_.size() - end_, 0);
      if (r > 0) return (end_ += static_cast<size_t>(r), true);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return (*err = "connection closed by server", false);
      return (*err = errno == EAGAIN ? "read timeout (5 s)" : strerror(errno), false);
    }
  }
  bool Need(size_t n, std::string* err) {
    while (end_ - begin_ < n) {
      if (!Fill(err)) return false;
    }
    return true;
  }
  // Offset from begin_ of the "\r\n" that ends the next line.
  bool LineEnd(size_t* eol, std::string* err) {
    for (size_t scanned = 0;;) {
      std::string_view s(in_.data() + begin_, end_ - begin_);
      size_t p = s.find("\r\n", scanned);
      if (p != std::string_view::npos) return (*eol = p, true);
      scanned = s.empty() ? 0 : s.size() - 1;
      if (!Fill(err)) return false;
    }
  }

  int fd_ = -1;
  std::vector<char> in_ = std::vector<char>(64 << 10);
  size_t begin_ = 0, end_ = 0;
  bool wait_ = true;
  std::string out_;
  std::string inbox_;
  uint64_t requests_ = 0;
};

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

// Work-queue cycle: pull one message, AckSync it (the ack carries a reply subject and the server
// answers once the ack is processed, matching XACK/delete which also wait), repeat. Latency is
// per cycle; cycles completing in [from, until) count.
void CycleLoop(Conn& c, const std::string& next_subject, Clock::time_point from,
               Clock::time_point until, Figures* f, uint64_t* ops) {
  const std::string pull_inbox = c.inbox() + ".pull", ack_inbox = c.inbox() + ".ack";
  std::string err;
  Msg m;
  for (Clock::time_point t0 = Clock::now(); t0 < until; t0 = Clock::now()) {
    // expires (ns) bounds the wait; an empty queue answers 408 after it, never hangs.
    c.Append(next_subject, pull_inbox, R"({"batch":1,"expires":1000000000})");
    if (!c.Flush(&err) || !c.Read(&m, &err)) return Fail(f, err);
    if (m.status() == 404 || m.status() == 408) return Fail(f, "work queue ran dry");
    if (m.status() != 0 || m.reply.empty()) {
      return Fail(f, "pull: status " + std::to_string(m.status()));
    }
    c.Append(m.reply, ack_inbox, "");  // copies m.reply before the next Read invalidates it
    if (!c.Flush(&err) || !c.Read(&m, &err)) return Fail(f, err);
    if (m.subject != ack_inbox || m.status() != 0) return Fail(f, "ack: unexpected reply");
    const Clock::time_point t1 = Clock::now();
    if (t1 >= from && t1 < until) {
      f->latency.Record(Ns(t1 - t0));
      ++*ops;
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
Figures WithStream(int port, const char* kind, const char* retention, Body body) {
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
                         R"(","num_replicas":1})",
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

}  // namespace

Figures NatsPublish(int port, int clients, int window, int value_bytes, absl::Duration run) {
  const std::string payload(static_cast<size_t>(value_bytes), 'x');
  return WithStream(port, "PUB", "limits", [&](Conn&, const std::string& name) {
    const std::string subject = "bench." + name;
    return RunClients(port, name, clients, run,
                      [&](Conn& c, auto from, auto until, Figures* f, uint64_t* ops) {
                        PublishLoop(c, subject, payload, window, from, until, UINT64_MAX, f, ops);
                      });
  });
}

Figures NatsWorkQueueCycle(int port, int clients, absl::Duration run) {
  return WithStream(port, "WQ", "workqueue", [&](Conn& admin, const std::string& name) {
    // Pre-filled untimed; all clients then share the one durable consumer, as work-queue
    // workers do.
    Figures out;
    uint64_t unused = 0;
    const auto prefill =
        static_cast<uint64_t>(kPrefillPerSec * (absl::ToDoubleSeconds(run) + 0.2) + 1000);
    PublishLoop(admin, "bench." + name, std::string(kWorkBytes, 'x'), kPrefillWindow,
                Clock::time_point::max(), Clock::time_point::max(), prefill, &out, &unused);
    if (out.errors > 0) return out;
    const std::string next = "$JS.API.CONSUMER.MSG.NEXT." + name + ".w";
    return RunClients(port, name, clients, run,
                      [&](Conn& c, auto from, auto until, Figures* f, uint64_t* ops) {
                        CycleLoop(c, next, from, until, f, ops);
                      });
  });
}

}  // namespace conduit::bench::peers
