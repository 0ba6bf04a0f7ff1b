#include "examples/price_change/fake_provider.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace conduit::examples {
namespace {

// Reads one HTTP/1.1 request (headers and a Content-Length body) from `fd`.
bool ReadRequest(int fd, std::string* head, std::string* body) {
  std::string data;
  char buf[4096];
  size_t header_end = std::string::npos;
  size_t length = 0;
  while (true) {
    if (header_end == std::string::npos) {
      header_end = data.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        *head = data.substr(0, header_end);
        for (absl::string_view line : absl::StrSplit(*head, "\r\n")) {
          if (absl::StartsWithIgnoreCase(line, "content-length:")) {
            (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &length);
          }
        }
      }
    }
    if (header_end != std::string::npos && data.size() >= header_end + 4 + length) {
      *body = data.substr(header_end + 4, length);
      return true;
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    data.append(buf, n);
  }
}

std::string HeaderValue(const std::string& head, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    if (absl::StartsWithIgnoreCase(line, name) && line.size() > name.size() &&
        line[name.size()] == ':') {
      return std::string(absl::StripAsciiWhitespace(line.substr(name.size() + 1)));
    }
  }
  return "";
}

void WriteAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) return;
    done += n;
  }
}

}  // namespace

FakeEmailProvider::~FakeEmailProvider() { Stop(); }

absl::Status FakeEmailProvider::Start() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::UnavailableError("fake email provider: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
  return absl::OkStatus();
}

void FakeEmailProvider::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

std::string FakeEmailProvider::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::map<std::string, FakeEmailProvider::Delivery> FakeEmailProvider::deliveries() {
  absl::MutexLock lock(&mu_);
  return deliveries_;
}

void FakeEmailProvider::Serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    ::close(fd);
  }
}

void FakeEmailProvider::Answer(int fd) {
  std::string head, body;
  if (!ReadRequest(fd, &head, &body)) return;
  const std::string key = HeaderValue(head, "Idempotency-Key");
  std::string status = "200 OK", reply;
  if (!absl::StartsWith(head, "POST /send ") || key.empty()) {
    status = "400 Bad Request";
    reply = "{\"error\":\"POST /send with an Idempotency-Key\"}";
  } else {
    absl::MutexLock lock(&mu_);
    auto [it, first] = deliveries_.try_emplace(key, Delivery{body, 0});
    ++it->second.requests;
    reply = absl::StrCat("{\"message_id\":\"msg-", key,
                         "\",\"duplicate\":", first ? "false" : "true", "}");
  }
  WriteAll(fd,
           absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: application/json\r\n",
                        "Content-Length: ", reply.size(), "\r\nConnection: close\r\n\r\n", reply));
}

absl::Status SendEmail(const std::string& address, const std::string& idempotency_key,
                       const std::string& body) {
  const std::vector<std::string> parts = absl::StrSplit(address, ':');
  int port = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) {
    return absl::InvalidArgumentError(absl::StrCat("provider address ", address));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, parts[0].c_str(), &addr.sin_addr);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(absl::StrCat("email provider at ", address, " unreachable"));
  }
  WriteAll(
      fd, absl::StrCat("POST /send HTTP/1.1\r\nHost: ", address,
                       "\r\nContent-Type: application/json\r\nIdempotency-Key: ", idempotency_key,
                       "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body));
  std::string response;
  char buf[1024];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) response.append(buf, n);
  ::close(fd);
  if (absl::StartsWith(response, "HTTP/1.1 200")) return absl::OkStatus();
  if (response.empty()) return absl::UnavailableError("email provider closed the connection");
  return absl::InvalidArgumentError(
      absl::StrCat("email provider refused: ", response.substr(0, response.find("\r\n"))));
}

}  // namespace conduit::examples
