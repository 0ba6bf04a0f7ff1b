#include "common/metrics/tls_exposer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/metrics/http_exposer.h"
#include "common/tls/pem.h"

namespace conduit::metrics {
namespace {

using Clock = std::chrono::steady_clock;
// From accept to the last byte written, per connection.
constexpr auto kConnectionBudget = std::chrono::seconds(5);
// Far above "GET /metrics HTTP/1.1" and a scraper's headers.
constexpr size_t kMaxRequestBytes = 8192;

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

struct stat StatOrZero(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return {};
  return st;
}

// Waits until `fd` is readable or writable as `events` asks, within the connection's budget.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return false;
  pollfd p{.fd = fd, .events = events, .revents = 0};
  return ::poll(&p, 1, static_cast<int>(left.count())) == 1;
}

// Runs one non-blocking OpenSSL call until it completes, waiting for the socket as it asks.
template <typename Op>
int Drive(SSL* ssl, int fd, Clock::time_point deadline, Op op) {
  for (;;) {
    const int rc = op();
    if (rc > 0) return rc;
    const int err = SSL_get_error(ssl, rc);
    if (err == SSL_ERROR_WANT_READ) {
      if (!WaitFor(fd, POLLIN, deadline)) return -1;
    } else if (err == SSL_ERROR_WANT_WRITE) {
      if (!WaitFor(fd, POLLOUT, deadline)) return -1;
    } else {
      return rc;
    }
  }
}

absl::StatusOr<std::pair<std::string, std::string>> SplitHostPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen '", listen, "' is not host:port"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, listen.substr(colon + 1));
}

// A listening socket on host:port and the port it got.
absl::StatusOr<std::pair<int, int>> Listen(const std::string& listen) {
  auto host_port = SplitHostPort(listen);
  if (!host_port.ok()) return host_port.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const char* host = host_port->first.empty() ? nullptr : host_port->first.c_str();
  if (int rc = ::getaddrinfo(host, host_port->second.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen '", listen, "': ", gai_strerror(rc)));
  }
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 16) == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof(bound);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      const int port =
          ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      ::freeaddrinfo(found);
      return std::make_pair(fd, port);
    }
    error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return absl::UnavailableError(absl::StrCat("cannot serve metrics on '", listen, "': ", error));
}

std::string HttpResponse(absl::string_view status, absl::string_view content_type,
                         absl::string_view body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

void TlsExposer::CtxFree::operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }

absl::StatusOr<TlsExposer::CtxPtr> TlsExposer::LoadContext(const MetricsTlsFiles& files) {
  if (files.cert_path.empty() || files.key_path.empty()) {
    return absl::InvalidArgumentError(files.cert_path.empty()
                                          ? "--metrics-tls-key and --metrics-tls-client-ca need "
                                            "--metrics-tls-cert too"
                                          : "--metrics-tls-cert is set without --metrics-tls-key");
  }
  auto pair =
      tls::LoadKeyPair("--metrics-tls-cert", files.cert_path, "--metrics-tls-key", files.key_path);
  if (!pair.ok()) return pair.status();
  std::vector<tls::X509Ptr> client_cas;
  if (!files.client_ca_path.empty()) {
    auto cas = tls::LoadCertificates("--metrics-tls-client-ca", files.client_ca_path);
    if (!cas.ok()) return cas.status();
    client_cas = std::move(*cas);
  }
  CtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx == nullptr) return absl::InternalError(OpenSslErrors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  bool ok = SSL_CTX_use_certificate(ctx.get(), pair->chain.front().get()) == 1 &&
            SSL_CTX_use_PrivateKey(ctx.get(), pair->key.get()) == 1;
  for (size_t i = 1; ok && i < pair->chain.size(); ++i) {
    ok = SSL_CTX_add1_chain_cert(ctx.get(), pair->chain[i].get()) == 1;
  }
  if (!client_cas.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    for (const auto& ca : client_cas) {
      ok = ok && X509_STORE_add_cert(store, ca.get()) == 1;
      sk_X509_NAME_push(names, X509_NAME_dup(X509_get_subject_name(ca.get())));
    }
    SSL_CTX_set_client_CA_list(ctx.get(), names);  // takes the list
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  if (!ok) return absl::InternalError(absl::StrCat("TLS setup failed: ", OpenSslErrors()));
  return ctx;
}

absl::StatusOr<std::unique_ptr<TlsExposer>> TlsExposer::Start(
    const std::string& listen, const MetricsTlsFiles& files,
    std::shared_ptr<prometheus::Collectable> source) {
  const FileStamp stamp = StampOf(files);
  auto ctx = LoadContext(files);
  if (!ctx.ok()) return ctx.status();
  auto socket = Listen(listen);
  if (!socket.ok()) return socket.status();
  int stop[2];
  if (::pipe2(stop, O_CLOEXEC) != 0) {
    ::close(socket->first);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::unique_ptr<TlsExposer> exposer(new TlsExposer(
      files, std::move(source), socket->first, socket->second, stop[0], stop[1], std::move(*ctx)));
  exposer->loaded_ = stamp;
  exposer->thread_ = std::thread([e = exposer.get()] { e->Run(); });
  return exposer;
}

TlsExposer::TlsExposer(MetricsTlsFiles files, std::shared_ptr<prometheus::Collectable> source,
                       int listen_fd, int port, int stop_read, int stop_write, CtxPtr ctx)
    : files_(std::move(files)),
      source_(std::move(source)),
      listen_fd_(listen_fd),
      port_(port),
      stop_read_(stop_read),
      stop_write_(stop_write),
      ctx_(std::move(ctx)) {}

TlsExposer::~TlsExposer() {
  const char byte = 0;
  (void)!::write(stop_write_, &byte, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(stop_read_);
  ::close(stop_write_);
}

TlsExposer::FileStamp TlsExposer::StampOf(const MetricsTlsFiles& files) {
  return FileStamp{.cert = StatOrZero(files.cert_path),
                   .key = StatOrZero(files.key_path),
                   .ca = StatOrZero(files.client_ca_path)};
}

void TlsExposer::ReloadIfChanged() {
  const FileStamp now = StampOf(files_);
  if (SameFile(now.cert, loaded_.cert) && SameFile(now.key, loaded_.key) &&
      SameFile(now.ca, loaded_.ca)) {
    return;
  }
  auto ctx = LoadContext(files_);
  loaded_ = now;  // a change that fails to load is reported once, not on every scrape
  if (!ctx.ok()) {
    spdlog::warn("metrics TLS files changed but do not load, keeping the previous ones: {}",
                 ctx.status().ToString());
    return;
  }
  ctx_ = std::move(*ctx);
  spdlog::info("metrics TLS files reloaded");
}

void TlsExposer::Run() {
  // A scraper that hangs up mid-answer must not kill the process: SIGPIPE from this thread's
  // writes is blocked here (the write fails with EPIPE instead) and discarded after each
  // connection. It is thread-directed, so no other thread sees it.
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);
  const timespec no_wait{0, 0};
  pollfd fds[2] = {{.fd = listen_fd_, .events = POLLIN, .revents = 0},
                   {.fd = stop_read_, .events = POLLIN, .revents = 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("metrics TLS: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // Out of descriptors: the connection stays in the backlog, so wait rather than spin.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        ::poll(&fds[1], 1, 100);
      }
      continue;
    }
    ReloadIfChanged();
    Serve(fd);
    ::close(fd);
    while (::sigtimedwait(&sigpipe, nullptr, &no_wait) > 0) {
    }
  }
}

void TlsExposer::Serve(int fd) {
  const Clock::time_point deadline = Clock::now() + kConnectionBudget;
  SSL* ssl = SSL_new(ctx_.get());
  if (ssl == nullptr) return;
  SSL_set_fd(ssl, fd);
  if (Drive(ssl, fd, deadline, [&] { return SSL_accept(ssl); }) <= 0) {
    spdlog::debug("metrics TLS handshake failed: {}", OpenSslErrors());
    ERR_clear_error();
    SSL_free(ssl);
    return;
  }
  std::string request;
  char buf[2048];
  while (!absl::StrContains(request, "\r\n\r\n") && request.size() < kMaxRequestBytes) {
    const int n = Drive(ssl, fd, deadline, [&] { return SSL_read(ssl, buf, sizeof(buf)); });
    if (n <= 0) break;
    request.append(buf, n);
  }
  const std::string response = Respond(request);
  for (size_t sent = 0; sent < response.size();) {
    const int n = Drive(ssl, fd, deadline, [&] {
      return SSL_write(ssl, response.data() + sent, static_cast<int>(response.size() - sent));
    });
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  SSL_shutdown(ssl);
  ERR_clear_error();
  SSL_free(ssl);
}

std::string TlsExposer::Respond(const std::string& request) const {
  const absl::string_view first_line = absl::string_view(request).substr(0, request.find("\r\n"));
  std::vector<absl::string_view> parts = absl::StrSplit(first_line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    return HttpResponse("400 Bad Request", "text/plain", "bad request\n");
  }
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") return HttpResponse("404 Not Found", "text/plain", "not found\n");
  if (parts[0] != "GET" && parts[0] != "HEAD") {
    return HttpResponse("405 Method Not Allowed", "text/plain", "GET /metrics\n");
  }
  const std::string body = ExpositionText(*source_);
  std::string response = HttpResponse("200 OK", kExpositionContentType, body);
  if (parts[0] == "HEAD") response.resize(response.size() - body.size());
  return response;
}

}  // namespace conduit::metrics
