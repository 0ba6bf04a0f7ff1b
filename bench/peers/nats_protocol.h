// A minimal NATS text-protocol client for the JetStream load loops in nats.cc. It is written
// against the raw protocol rather than a client library so the peers are all driven the same
// way: blocking loopback sockets, one thread per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::bench::peers::nats {

// Decimal digits at the start of s (0 when there are none).
uint64_t ParseU64(std::string_view s);

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
  ~Conn();

  // Connects, does the INFO/CONNECT handshake and subscribes to the wildcard inbox
  // "<inbox>.>" that carries every reply this connection asks for. A read that waits longer
  // than `timeout_ms` fails (a stalled or killed server becomes an error, not a hung run).
  bool Open(int port, std::string inbox, std::string* err, int timeout_ms = 5000);

  const std::string& inbox() const { return inbox_; }

  // Queues a PUB; nothing is sent until Flush, so a window of publishes costs one write.
  void Append(std::string_view subject, std::string_view reply, std::string_view payload);
  bool Flush(std::string* err);

  // Next MSG/HMSG; answers server PINGs on the way. False on -ERR, EOF or timeout. With
  // wait=false only already-buffered bytes are parsed and "nothing complete yet" is false with
  // an empty *err: draining must not block behind a trailing server PING.
  bool Read(Msg* m, std::string* err, bool wait = true);

  // Synchronous JetStream API call; the reply payload must not carry an "error" object.
  bool Request(const std::string& subject, std::string_view body, std::string* reply,
               std::string* err);

 private:
  bool SendAll(std::string_view s, std::string* err);
  // Reads more bytes, first moving the unread tail to the front (it is at most one partial
  // message, so the copy is small) and growing the buffer for payloads bigger than it.
  bool Fill(std::string* err);
  bool Need(size_t n, std::string* err);
  // Offset from begin_ of the "\r\n" that ends the next line.
  bool LineEnd(size_t* eol, std::string* err);

  int fd_ = -1;
  std::vector<char> in_ = std::vector<char>(64 << 10);
  size_t begin_ = 0, end_ = 0;
  bool wait_ = true;
  std::string out_;
  std::string inbox_;
  uint64_t requests_ = 0;
};

}  // namespace conduit::bench::peers::nats
