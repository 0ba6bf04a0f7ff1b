// Shared plumbing for the peer-system clients: a blocking loopback TCP connection with a read
// buffer, and a load runner so every peer is measured over exactly the same kind of window.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "bench/peers/peer.h"

namespace conduit::bench::peers {

using Clock = std::chrono::steady_clock;

// A blocking TCP connection to 127.0.0.1. Every call returns false on failure and leaves the
// reason in error(); after a failure the connection is unusable (the protocols are stateful, so
// there is no way to resynchronise).
class TcpClient {
 public:
  TcpClient() = default;
  TcpClient(const TcpClient&) = delete;
  TcpClient& operator=(const TcpClient&) = delete;
  ~TcpClient();

  // TCP_NODELAY because the benchmarks are small-write request/response loops where Nagle would
  // add delay; the I/O timeout keeps a stalled peer from hanging a run forever.
  bool Connect(int port, absl::Duration io_timeout = absl::Seconds(5));
  bool WriteAll(std::string_view data);
  // Reads through the next "\r\n" (Redis, beanstalkd and NATS all frame lines that way); `line`
  // receives the text without the terminator.
  bool ReadLine(std::string* line);
  // Reads exactly n bytes (e.g. a payload announced by a preceding line).
  bool ReadExact(size_t n, std::string* out);

  const std::string& error() const { return error_; }

 private:
  bool Fill();  // appends at least one byte to the buffer
  bool Fail(std::string text);

  int fd_ = -1;
  std::vector<char> buf_ = std::vector<char>(64 << 10);
  size_t head_ = 0;  // first unread byte
  size_t tail_ = 0;  // one past the last buffered byte
  std::string error_;
};

// Per-thread measurement state handed to a client loop by RunClients. Not thread-safe: each
// thread gets its own and they are merged after the run.
class ClientRun {
 public:
  bool running() const { return !stop_->load(std::memory_order_relaxed); }
  // `ops` operations completed now, the round having started at t0: one latency sample. Only
  // completions inside the measurement window count, so warm-up and shutdown are excluded.
  void Done(uint64_t ops, Clock::time_point t0);
  // Counts an error; the first text is kept for the report.
  void Error(std::string_view text);

 private:
  friend Figures RunClients(int, absl::Duration, const std::function<void(int, ClientRun&)>&);
  const std::atomic<bool>* stop_ = nullptr;
  Clock::time_point window_start_, window_end_;
  uint64_t ops_ = 0;
  uint64_t errors_ = 0;
  std::string error_;
  LatencyHistogram latency_;
};

// Runs client(i, run) on `clients` threads (i = 0..clients-1). Each loops while run.running():
// a ~200 ms warm-up (connection set-up, server caches) is followed by the measured window of
// length `run`, after which the threads are told to stop and the figures merged.
Figures RunClients(int clients, absl::Duration run,
                   const std::function<void(int, ClientRun&)>& client);

// A stream/tube/subject name unique per call and per process, so successive runs against the
// same long-lived server never see each other's data.
std::string UniqueName(std::string_view prefix);

// Figures for a run that could not start (e.g. pre-fill failed).
Figures FailedFigures(std::string error);

}  // namespace conduit::bench::peers
