#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace conduit::testing {

// A TCP connection to 127.0.0.1:<port> with a receive timeout (seconds; 0: none): the socket,
// or -1 when it cannot connect.
inline int ConnectLoopback(int port, int receive_timeout_seconds = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (receive_timeout_seconds > 0) {
    timeval timeout{receive_timeout_seconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// GET http://127.0.0.1:<port>/metrics (HTTP/1.0, 5 s receive timeout): the response with its
// headers; empty when it fails.
inline std::string HttpGetMetrics(int port) {
  const int fd = ConnectLoopback(port, /*receive_timeout_seconds=*/5);
  if (fd < 0) return "";
  std::string out;
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buf[8192];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, n);
  }
  ::close(fd);
  return out;
}

}  // namespace conduit::testing
