// beanstalkd clients speaking its text protocol directly, so the comparison measures the server
// and not a client library.

#include <algorithm>
#include <chrono>
#include <charconv>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bench/peers/peer.h"
#include "bench/peers/socket.h"

namespace conduit::bench::peers {
namespace {

constexpr int kPriority = 1024;   // beanstalkd's conventional default priority
constexpr int kTtrSeconds = 60;   // far above a reserve→delete cycle, so jobs never time out
constexpr int kJobBytes = 100;    // reserve/delete job body; matches queue_bench payloads
// Jobs per second of run the pre-fill provides for: over twice the best reserve/delete rate seen
// on a 2-core host (~45k/s; ~70k/s with 100-job pipelined rounds), while keeping pre-fill and
// drain (each job costs both) short. Running out is reported as an error, not silently.
constexpr double kPrefillRate = 100'000;
constexpr double kBatchPrefillRate = 150'000;
constexpr int64_t kMaxPrefill = 2'000'000;
constexpr int kBatch = 256;  // pipelined commands per round in pre-fill and drain
constexpr std::chrono::milliseconds kSettle{1000};

bool Fail(std::string* error, std::string text) {
  *error = std::move(text);
  return false;
}

std::string PutCommand(int bytes) {
  return "put " + std::to_string(kPriority) + " 0 " + std::to_string(kTtrSeconds) + " " +
         std::to_string(bytes) + "\r\n" + std::string(static_cast<size_t>(bytes), 'j') + "\r\n";
}

// Writes a command line and checks that its one-line reply starts with `expect`.
bool Call(TcpClient& conn, std::string_view command, std::string_view expect, std::string* error) {
  std::string line;
  if (!conn.WriteAll(command) || !conn.ReadLine(&line)) return Fail(error, conn.error());
  if (!line.starts_with(expect)) {
    command.remove_suffix(2);  // the CRLF
    return Fail(error, std::string(command) + " -> " + line);
  }
  return true;
}

// Connects and selects `tube`: for producing `use` it; for consuming watch it and ignore the
// default tube, so a reserve can only ever return this run's jobs.
bool Open(TcpClient& conn, int port, const std::string& tube, bool consume, std::string* error) {
  if (!conn.Connect(port, absl::Seconds(30))) return Fail(error, conn.error());
  if (!consume) return Call(conn, "use " + tube + "\r\n", "USING ", error);
  return Call(conn, "watch " + tube + "\r\n", "WATCHING ", error) &&
         Call(conn, "ignore default\r\n", "WATCHING 1", error);
}

// Parses "RESERVED <id> <bytes>" into id (kept as text, it is only echoed back) and body size.
bool ParseReserved(std::string_view line, std::string_view* id, size_t* bytes) {
  constexpr std::string_view kPrefix = "RESERVED ";
  if (!line.starts_with(kPrefix)) return false;
  line.remove_prefix(kPrefix.size());
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return false;
  *id = line.substr(0, space);
  const std::string_view size = line.substr(space + 1);
  const auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), *bytes);
  return ec == std::errc() && end == size.data() + size.size();
}

bool Prefill(int port, const std::string& tube, int64_t count, std::string* error) {
  TcpClient conn;
  if (!Open(conn, port, tube, /*consume=*/false, error)) return false;
  std::string batch;
  for (int k = 0; k < kBatch; ++k) batch += PutCommand(kJobBytes);
  std::string line;
  for (int64_t done = 0; done < count; done += kBatch) {
    if (!conn.WriteAll(batch)) return Fail(error, conn.error());
    for (int k = 0; k < kBatch; ++k) {
      if (!conn.ReadLine(&line)) return Fail(error, conn.error());
      if (!line.starts_with("INSERTED ")) return Fail(error, "put -> " + line);
    }
  }
  return true;
}

// Best effort, bounded in time: deletes what a run left in its tube. beanstalkd cannot drop a
// tube, and leftovers would keep memory and binlog files alive for every later run.
void Drain(int port, const std::string& tube) {
  TcpClient conn;
  std::string error, line, body, deletes;
  if (!Open(conn, port, tube, /*consume=*/true, &error)) return;
  std::string reserves;
  for (int k = 0; k < kBatch; ++k) reserves += "reserve-with-timeout 0\r\n";
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  for (bool empty = false; !empty && Clock::now() < deadline;) {
    if (!conn.WriteAll(reserves)) return;
    deletes.clear();
    int pending = 0;
    for (int k = 0; k < kBatch; ++k) {
      std::string_view id;
      size_t bytes;
      if (!conn.ReadLine(&line)) return;
      if (!ParseReserved(line, &id, &bytes)) {
        empty = true;  // TIMED_OUT: nothing ready
        continue;
      }
      deletes.append("delete ").append(id).append("\r\n");
      ++pending;
      if (!conn.ReadExact(bytes + 2, &body)) return;
    }
    if (!conn.WriteAll(deletes)) return;
    for (; pending > 0; --pending) {
      if (!conn.ReadLine(&line)) return;
    }
  }
}

// A consume run: pre-fills `tube` with `rate` jobs per second of the run (within the cap), runs
// client(i, r) on `clients` threads (see RunClients), then drains what is left.
Figures ConsumeRun(int port, const std::string& tube, double rate, int clients, absl::Duration run,
                   const std::function<void(int, ClientRun&)>& client) {
  const double seconds = absl::ToDoubleSeconds(run) + 1.0;  // warm-up and slack
  const int64_t count = std::clamp<int64_t>(static_cast<int64_t>(rate * seconds), kBatch,
                                            kMaxPrefill);
  std::string error;
  if (!Prefill(port, tube, count, &error)) {
    Drain(port, tube);
    return FailedFigures("prefill: " + error);
  }
  // The pre-fill leaves the server with a once-a-second fsync and file housekeeping to do; let
  // that land before the window so it is not charged to the consume cycle.
  std::this_thread::sleep_for(kSettle);
  Figures figures = RunClients(clients, run, client);
  Drain(port, tube);
  return figures;
}

}  // namespace

Figures BeanstalkPut(int port, int clients, int value_bytes, absl::Duration run) {
  const std::string tube = UniqueName("bench-put");
  const std::string put = PutCommand(value_bytes);
  Figures figures = RunClients(clients, run, [&](int, ClientRun& r) {
    TcpClient conn;
    std::string error, line;
    if (!Open(conn, port, tube, /*consume=*/false, &error)) return r.Error(error);
    while (r.running()) {
      const Clock::time_point t0 = Clock::now();
      if (!conn.WriteAll(put) || !conn.ReadLine(&line)) return r.Error(conn.error());
      // BURIED means the server ran out of memory for its ready queue: the job is not usable.
      if (line.starts_with("INSERTED ")) {
        r.Done(1, t0);
      } else {
        r.Error("put -> " + line);
      }
    }
  });
  Drain(port, tube);
  return figures;
}

Figures BeanstalkReserveDelete(int port, int clients, absl::Duration run, double prefill_rate) {
  const std::string tube = UniqueName("bench-reserve");
  const double rate = prefill_rate > 0 ? prefill_rate : kPrefillRate;
  return ConsumeRun(port, tube, rate, clients, run, [&](int, ClientRun& r) {
    TcpClient conn;
    std::string open_error, line, body, del;
    if (!Open(conn, port, tube, /*consume=*/true, &open_error)) return r.Error(open_error);
    while (r.running()) {
      const Clock::time_point t0 = Clock::now();
      if (!conn.WriteAll("reserve-with-timeout 1\r\n") || !conn.ReadLine(&line)) {
        return r.Error(conn.error());
      }
      std::string_view id;
      size_t bytes;
      if (line == "TIMED_OUT") return r.Error("pre-filled tube exhausted");
      if (!ParseReserved(line, &id, &bytes)) {
        r.Error("reserve -> " + line);
        continue;
      }
      del.assign("delete ").append(id).append("\r\n");
      if (!conn.ReadExact(bytes + 2, &body)) return r.Error(conn.error());
      if (!conn.WriteAll(del) || !conn.ReadLine(&line)) return r.Error(conn.error());
      if (line == "DELETED") {
        r.Done(1, t0);
      } else {
        r.Error("delete -> " + line);
      }
    }
  });
}

Figures BeanstalkReserveDeleteBatch(int port, int clients, int batch, absl::Duration run,
                                    double prefill_rate) {
  const std::string tube = UniqueName("bench-reserve");
  batch = std::max(batch, 1);
  std::string reserves;
  for (int k = 0; k < batch; ++k) reserves += "reserve-with-timeout 0\r\n";
  const double rate = prefill_rate > 0 ? prefill_rate : kBatchPrefillRate;
  return ConsumeRun(port, tube, rate, clients, run, [&](int, ClientRun& r) {
    TcpClient conn;
    std::string open_error, line, body, deletes;
    if (!Open(conn, port, tube, /*consume=*/true, &open_error)) return r.Error(open_error);
    while (r.running()) {
      const Clock::time_point t0 = Clock::now();
      if (!conn.WriteAll(reserves)) return r.Error(conn.error());
      // Every reserve is answered, in order; a job is RESERVED <id> <bytes> plus its body.
      deletes.clear();
      int reserved = 0, timed_out = 0;
      for (int k = 0; k < batch; ++k) {
        if (!conn.ReadLine(&line)) return r.Error(conn.error());
        std::string_view id;
        size_t bytes;
        if (line == "TIMED_OUT") {
          ++timed_out;
        } else if (!ParseReserved(line, &id, &bytes)) {
          return r.Error("reserve -> " + line);  // the replies can no longer be paired up
        } else {
          deletes.append("delete ").append(id).append("\r\n");
          ++reserved;
          if (!conn.ReadExact(bytes + 2, &body)) return r.Error(conn.error());
        }
      }
      // What was reserved is deleted even when the tube ran out, so nothing stays reserved.
      if (reserved > 0 && !conn.WriteAll(deletes)) return r.Error(conn.error());
      uint64_t deleted = 0;
      for (int k = 0; k < reserved; ++k) {
        if (!conn.ReadLine(&line)) return r.Error(conn.error());
        if (line == "DELETED") {
          ++deleted;
        } else {
          r.Error("delete -> " + line);
        }
      }
      if (deleted > 0) r.Done(deleted, t0);
      if (timed_out > 0) return r.Error("pre-filled tube exhausted");
    }
  });
}

}  // namespace conduit::bench::peers
