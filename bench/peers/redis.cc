// Redis 7 Streams clients speaking RESP2 directly, so the comparison measures the server and
// not a client library.

#include <algorithm>
#include <chrono>
#include <charconv>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bench/peers/peer.h"
#include "bench/peers/socket.h"

namespace conduit::bench::peers {
namespace {

// Pre-fill sizing for the consume benchmarks: enough for 200k records/s (one record per round)
// or 500k records/s (batched rounds, ~300k/s seen on a 2-core host) over the run plus warm-up,
// capped in count and in memory so a long run cannot exhaust the machine.
constexpr double kPrefillRate = 200'000;
constexpr double kBatchPrefillRate = 500'000;
constexpr int64_t kMaxPrefill = 4'000'000;
constexpr int64_t kMaxPrefillBytes = int64_t{1} << 30;
constexpr int kPrefillBatch = 1000;
constexpr std::chrono::milliseconds kSettle{1000};

struct Reply {
  char type = 0;  // '+' simple, '-' error, ':' integer, '$' bulk, '*' array
  bool nil = false;
  int64_t integer = 0;
  std::string text;  // simple string, error or bulk payload
  std::vector<Reply> elements;
};

// Commands go out as arrays of bulk strings: binary-safe and what real clients send.
void AppendCommand(std::string* out, std::span<const std::string_view> args) {
  out->append("*").append(std::to_string(args.size())).append("\r\n");
  for (std::string_view arg : args) {
    out->append("$").append(std::to_string(arg.size())).append("\r\n");
    out->append(arg).append("\r\n");
  }
}

void AppendCommand(std::string* out, std::initializer_list<std::string_view> args) {
  AppendCommand(out, std::span(args.begin(), args.size()));
}

std::string Command(std::initializer_list<std::string_view> args) {
  std::string out;
  AppendCommand(&out, args);
  return out;
}

// Stores the reason for a failed set-up step; returns false so callers can `return Fail(...)`.
bool Fail(std::string* error, std::string text) {
  *error = std::move(text);
  return false;
}

bool ParseInt(std::string_view s, int64_t* v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

// Reads one reply. False only when the connection is broken or the stream is not RESP; an error
// reply ('-') is a successful read that the caller judges.
bool ReadReply(TcpClient& conn, Reply* r, std::string* line) {
  if (!conn.ReadLine(line) || line->empty()) return false;
  r->type = (*line)[0];
  r->nil = false;
  r->elements.clear();
  const std::string_view rest = std::string_view(*line).substr(1);
  switch (r->type) {
    case '+':
    case '-':
      r->text.assign(rest);
      return true;
    case ':':
      return ParseInt(rest, &r->integer);
    case '$':
    case '*': {
      int64_t n;
      if (!ParseInt(rest, &n)) return false;
      if (n < 0) {  // null bulk / null array
        r->nil = true;
        return true;
      }
      if (r->type == '$') {
        if (!conn.ReadExact(static_cast<size_t>(n) + 2, &r->text)) return false;
        r->text.resize(static_cast<size_t>(n));  // drop the trailing CRLF
        return true;
      }
      r->elements.resize(static_cast<size_t>(n));
      for (Reply& e : r->elements) {
        if (!ReadReply(conn, &e, line)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

std::string Describe(const Reply& r) {
  if (r.type == '-') return r.text;
  return std::string("unexpected reply type '") + r.type + "'" + (r.nil ? " (nil)" : "");
}

// Reads `count` replies and fails unless each is a (non-nil) bulk string, i.e. an XADD entry id.
bool ExpectIds(TcpClient& conn, int count, std::string* error) {
  Reply reply;
  std::string line;
  for (int k = 0; k < count; ++k) {
    if (!ReadReply(conn, &reply, &line)) return Fail(error, "read: " + conn.error());
    if (reply.type != '$' || reply.nil) return Fail(error, Describe(reply));
  }
  return true;
}

// Appends `count` records to `stream` (pipelined) and creates consumer group g at the start, so
// that `>` delivers every pre-filled record.
bool Prefill(int port, const std::string& stream, int64_t count, const std::string& value,
             std::string* error) {
  TcpClient conn;
  if (!conn.Connect(port, absl::Seconds(30))) return Fail(error, conn.error());
  std::string batch;
  for (int k = 0; k < kPrefillBatch; ++k) AppendCommand(&batch, {"XADD", stream, "*", "v", value});
  for (int64_t done = 0; done < count; done += kPrefillBatch) {
    if (!conn.WriteAll(batch)) return Fail(error, conn.error());
    if (!ExpectIds(conn, kPrefillBatch, error)) return false;
  }
  if (!conn.WriteAll(Command({"XGROUP", "CREATE", stream, "g", "0"}))) {
    return Fail(error, conn.error());
  }
  Reply reply;
  std::string line;
  if (!ReadReply(conn, &reply, &line)) return Fail(error, conn.error());
  if (reply.type != '+') return Fail(error, "XGROUP CREATE: " + Describe(reply));
  return true;
}

// Best effort: frees the memory a run used so later runs start from the same state (UNLINK
// frees in the background instead of stalling the server).
void DeleteStream(int port, const std::string& stream) {
  TcpClient conn;
  Reply reply;
  std::string line;
  if (conn.Connect(port, absl::Seconds(30)) && conn.WriteAll(Command({"UNLINK", stream}))) {
    ReadReply(conn, &reply, &line);
  }
}

// The entries of an XREADGROUP reply shaped [[stream, [[id, [field, value]], ...]]]; null if the
// reply has another shape or no entries.
const Reply* Entries(const Reply& reply) {
  if (reply.type != '*' || reply.elements.size() != 1 || reply.elements[0].elements.size() != 2) {
    return nullptr;
  }
  const Reply& entries = reply.elements[0].elements[1];
  if (entries.elements.empty()) return nullptr;
  for (const Reply& entry : entries.elements) {
    if (entry.elements.empty()) return nullptr;
  }
  return &entries;
}

// A consume run: pre-fills `stream` with `rate` records per second of the run (within the caps)
// and creates consumer group g, runs client(i, r) on `clients` threads (see RunClients), then
// deletes the stream.
Figures ConsumeRun(int port, const std::string& stream, int value_bytes, double rate, int clients,
                   absl::Duration run, const std::function<void(int, ClientRun&)>& client) {
  const std::string value(static_cast<size_t>(value_bytes), 'v');
  const double seconds = absl::ToDoubleSeconds(run) + 1.0;  // warm-up and slack
  int64_t count = static_cast<int64_t>(rate * seconds);
  count = std::min({count, kMaxPrefill, kMaxPrefillBytes / (value_bytes + 64)});
  count = std::max<int64_t>(count, kPrefillBatch);
  std::string error;
  if (!Prefill(port, stream, count, value, &error)) {
    DeleteStream(port, stream);
    return FailedFigures("prefill: " + error);
  }
  // The pre-fill leaves the server with a once-a-second fsync and file housekeeping to do; let
  // that land before the window so it is not charged to the consume cycle.
  std::this_thread::sleep_for(kSettle);
  Figures figures = RunClients(clients, run, client);
  DeleteStream(port, stream);
  return figures;
}

}  // namespace

Figures RedisXadd(int port, int clients, int pipeline, int value_bytes, absl::Duration run) {
  const std::string stream = UniqueName("bench-xadd");
  const std::string value(static_cast<size_t>(value_bytes), 'v');
  pipeline = std::max(pipeline, 1);
  Figures figures = RunClients(clients, run, [&](int, ClientRun& r) {
    TcpClient conn;
    if (!conn.Connect(port)) return r.Error(conn.error());
    std::string batch;  // a round is `pipeline` identical commands written at once
    for (int k = 0; k < pipeline; ++k) AppendCommand(&batch, {"XADD", stream, "*", "v", value});
    Reply reply;
    std::string line;
    while (r.running()) {
      const Clock::time_point t0 = Clock::now();
      if (!conn.WriteAll(batch)) return r.Error(conn.error());
      uint64_t ok = 0;
      for (int k = 0; k < pipeline; ++k) {
        if (!ReadReply(conn, &reply, &line)) return r.Error("read: " + conn.error());
        if (reply.type == '$' && !reply.nil) {
          ++ok;
        } else {
          r.Error(Describe(reply));
        }
      }
      if (ok > 0) r.Done(ok, t0);
    }
  });
  DeleteStream(port, stream);
  return figures;
}

Figures RedisReadAck(int port, int clients, int value_bytes, absl::Duration run) {
  return RedisReadAckBatch(port, clients, 1, value_bytes, run);  // COUNT 1, XACK of one id
}

Figures RedisReadAckBatch(int port, int clients, int batch, int value_bytes, absl::Duration run) {
  batch = std::max(batch, 1);
  const std::string stream = UniqueName("bench-readack");
  const auto client = [&](int i, ClientRun& r) {
    TcpClient conn;
    if (!conn.Connect(port)) return r.Error(conn.error());
    const std::string consumer = "c" + std::to_string(i), count = std::to_string(batch);
    const std::string read =
        Command({"XREADGROUP", "GROUP", "g", consumer, "COUNT", count, "STREAMS", stream, ">"});
    Reply reply;
    std::string line, ack;
    std::vector<std::string_view> args;
    while (r.running()) {
      const Clock::time_point t0 = Clock::now();
      if (!conn.WriteAll(read)) return r.Error(conn.error());
      if (!ReadReply(conn, &reply, &line)) return r.Error("read: " + conn.error());
      // Without BLOCK an empty group yields a null array: the pre-fill ran out.
      if (reply.type == '*' && reply.nil) return r.Error("pre-filled stream exhausted");
      const Reply* entries = Entries(reply);
      if (entries == nullptr || entries->elements.size() > static_cast<size_t>(batch)) {
        r.Error("XREADGROUP: " + Describe(reply));
        continue;
      }
      // One XACK for every id read; the command is built before `reply` is reused.
      args.assign({"XACK", stream, "g"});
      for (const Reply& entry : entries->elements) args.push_back(entry.elements[0].text);
      const auto read_count = static_cast<int64_t>(entries->elements.size());
      ack.clear();
      AppendCommand(&ack, args);
      if (!conn.WriteAll(ack)) return r.Error(conn.error());
      if (!ReadReply(conn, &reply, &line)) return r.Error("read: " + conn.error());
      if (reply.type == ':' && reply.integer == read_count) {
        r.Done(static_cast<uint64_t>(read_count), t0);
      } else {
        r.Error("XACK: " + Describe(reply));
      }
    }
  };
  return ConsumeRun(port, stream, value_bytes, batch == 1 ? kPrefillRate : kBatchPrefillRate,
                    clients, run, client);
}

}  // namespace conduit::bench::peers
