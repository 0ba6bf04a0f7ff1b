#include "bench/peers/socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/time/clock.h"

namespace conduit::bench::peers {

TcpClient::~TcpClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool TcpClient::Fail(std::string text) {
  if (error_.empty()) error_ = std::move(text);
  return false;
}

bool TcpClient::Connect(int port, absl::Duration io_timeout) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return Fail(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const timeval tv = absl::ToTimeval(io_timeout);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fail("connect 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno));
  }
  return true;
}

bool TcpClient::WriteAll(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Fail(errno == EAGAIN ? "write timed out" : std::string("write: ") + std::strerror(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool TcpClient::Fill() {
  // Slide unread bytes to the front; grow only when a single frame outsizes the buffer.
  if (head_ > 0) {
    std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  if (tail_ == buf_.size()) buf_.resize(buf_.size() * 2);
  ssize_t n;
  do {
    n = ::recv(fd_, buf_.data() + tail_, buf_.size() - tail_, 0);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return Fail("connection closed by peer");
  if (n < 0) {
    return Fail(errno == EAGAIN ? "read timed out" : std::string("read: ") + std::strerror(errno));
  }
  tail_ += static_cast<size_t>(n);
  return true;
}

bool TcpClient::ReadLine(std::string* line) {
  size_t scanned = head_;  // lines are short, but do not rescan on every Fill anyway
  while (true) {
    const char* begin = buf_.data();
    for (size_t i = std::max(scanned, head_ + 1); i < tail_; ++i) {
      if (begin[i] == '\n' && begin[i - 1] == '\r') {
        line->assign(begin + head_, i - 1 - head_);
        head_ = i + 1;
        return true;
      }
    }
    scanned = tail_ - head_;  // Fill moves the unread bytes to offset 0
    if (!Fill()) return false;
  }
}

bool TcpClient::ReadExact(size_t n, std::string* out) {
  while (tail_ - head_ < n) {
    if (buf_.size() < n) buf_.resize(n);
    if (!Fill()) return false;
  }
  out->assign(buf_.data() + head_, n);
  head_ += n;
  return true;
}

void ClientRun::Done(uint64_t ops, Clock::time_point t0) {
  const Clock::time_point t1 = Clock::now();
  if (t1 < window_start_ || t1 >= window_end_) return;
  ops_ += ops;
  latency_.Record(static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
}

void ClientRun::Error(std::string_view text) {
  if (errors_++ == 0) error_ = text;
}

Figures RunClients(int clients, absl::Duration run,
                   const std::function<void(int, ClientRun&)>& client) {
  std::atomic<bool> stop{false};
  // The window is fixed before any thread starts so that all clients count the same interval.
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(200);
  const Clock::time_point end = start + absl::ToChronoNanoseconds(run);
  std::vector<ClientRun> runs(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    ClientRun& r = runs[static_cast<size_t>(i)];
    r.stop_ = &stop;
    r.window_start_ = start;
    r.window_end_ = end;
    threads.emplace_back([&client, &r, i] { client(i, r); });
  }
  std::this_thread::sleep_until(end);
  stop.store(true);
  for (std::thread& t : threads) t.join();

  Figures figures;
  uint64_t ops = 0;
  for (const ClientRun& r : runs) {
    ops += r.ops_;
    figures.latency.Merge(r.latency_);
    figures.errors += r.errors_;
    if (figures.error.empty()) figures.error = r.error_;
  }
  figures.ops_per_s = static_cast<double>(ops) / absl::ToDoubleSeconds(run);
  return figures;
}

std::string UniqueName(std::string_view prefix) {
  static std::atomic<int> counter{0};
  return std::string(prefix) + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(absl::ToUnixMillis(absl::Now()) % 100000000) + "-" +
         std::to_string(counter.fetch_add(1));
}

Figures FailedFigures(std::string error) {
  Figures figures;
  figures.errors = 1;
  figures.error = std::move(error);
  return figures;
}

}  // namespace conduit::bench::peers
