#include "bench/peers/nats_protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

namespace conduit::bench::peers::nats {

uint64_t ParseU64(std::string_view s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

Conn::~Conn() {
  if (fd_ >= 0) close(fd_);
}

bool Conn::Open(int port, std::string inbox, std::string* err, int timeout_ms) {
  inbox_ = std::move(inbox);
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
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

void Conn::Append(std::string_view subject, std::string_view reply, std::string_view payload) {
  out_.append("PUB ").append(subject).append(" ").append(reply).append(" ");
  out_.append(std::to_string(payload.size())).append("\r\n").append(payload).append("\r\n");
}

bool Conn::Flush(std::string* err) {
  bool ok = SendAll(out_, err);
  out_.clear();
  return ok;
}

bool Conn::Read(Msg* m, std::string* err, bool wait) {
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

bool Conn::Request(const std::string& subject, std::string_view body, std::string* reply,
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
  if (reply->find("\"error\"") != std::string::npos) return (*err = subject + ": " + *reply, false);
  return true;
}

bool Conn::SendAll(std::string_view s, std::string* err) {
  while (!s.empty()) {
    ssize_t w = send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return (*err = std::string("send: ") + strerror(errno), false);
    s.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

bool Conn::Fill(std::string* err) {
  if (!wait_) return (err->clear(), false);
  std::memmove(in_.data(), in_.data() + begin_, end_ - begin_);
  end_ -= begin_, begin_ = 0;
  if (end_ == in_.size()) in_.resize(in_.size() * 2);
  for (;;) {
    ssize_t r = recv(fd_, in_.data() + end_, in_.size() - end_, 0);
    if (r > 0) return (end_ += static_cast<size_t>(r), true);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return (*err = "connection closed by server", false);
    return (*err = errno == EAGAIN ? "read timeout" : strerror(errno), false);
  }
}

bool Conn::Need(size_t n, std::string* err) {
  while (end_ - begin_ < n) {
    if (!Fill(err)) return false;
  }
  return true;
}

bool Conn::LineEnd(size_t* eol, std::string* err) {
  for (size_t scanned = 0;;) {
    std::string_view s(in_.data() + begin_, end_ - begin_);
    size_t p = s.find("\r\n", scanned);
    if (p != std::string_view::npos) return (*eol = p, true);
    scanned = s.empty() ? 0 : s.size() - 1;
    if (!Fill(err)) return false;
  }
}

}  // namespace conduit::bench::peers::nats
