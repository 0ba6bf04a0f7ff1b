#pragma once

#include <prometheus/collectable.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace conduit::metrics {

// The PEM files of a TLS /metrics port (--metrics-tls-cert, --metrics-tls-key,
// --metrics-tls-client-ca).
struct MetricsTlsFiles {
  std::string cert_path;       // certificate chain, leaf first
  std::string key_path;        // the leaf's private key (unencrypted)
  std::string client_ca_path;  // set: scrapers must present a certificate that chains to it

  bool enabled() const {
    return !cert_path.empty() || !key_path.empty() || !client_ca_path.empty();
  }
};

// GET and HEAD /metrics over HTTPS (TLS 1.2 and 1.3, OpenSSL) for one Collectable: the text
// exposition format HttpExposer serves over plain HTTP.
//
// Why not the Exposer with civetweb's TLS: Debian 12's civetweb loads libssl by name at run time
// and wants SSL_get_peer_certificate, which OpenSSL 3 no longer exports (it is a macro now), so
// its TLS start fails and every handshake is reset.
//
// One thread accepts and answers connections one at a time, one request each (then close); a
// connection gets 5 s from accept to the last byte, so a stalled client delays a scrape by at
// most that (Prometheus scrapes one target every few seconds). The files are looked at (stat) on
// every connection: a change, made by replacing them with a rename, is used from the next
// handshake; a change that does not load (a key not matching its certificate) keeps the files
// before it and is logged.
class TlsExposer {
 public:
  // Listens on host:port (port 0 picks one; [v6]:port) and serves. INVALID_ARGUMENT for a bad
  // address or TLS files (naming the --metrics-tls-* flag: a cert without a key, a file that is
  // not PEM of its kind, a key of another certificate), NOT_FOUND or PERMISSION_DENIED for a file
  // that cannot be read, UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<TlsExposer>> Start(
      const std::string& listen, const MetricsTlsFiles& files,
      std::shared_ptr<prometheus::Collectable> source);
  ~TlsExposer();  // stops serving and joins the thread

  TlsExposer(const TlsExposer&) = delete;
  TlsExposer& operator=(const TlsExposer&) = delete;

  int port() const { return port_; }

 private:
  struct FileStamp {
    struct stat cert {};
    struct stat key {};
    struct stat ca {};
  };
  struct CtxFree {
    void operator()(SSL_CTX* ctx) const;
  };
  using CtxPtr = std::unique_ptr<SSL_CTX, CtxFree>;

  TlsExposer(MetricsTlsFiles files, std::shared_ptr<prometheus::Collectable> source, int listen_fd,
             int port, int stop_read, int stop_write, CtxPtr ctx);

  static absl::StatusOr<CtxPtr> LoadContext(const MetricsTlsFiles& files);
  static FileStamp StampOf(const MetricsTlsFiles& files);
  // Loads the files again when their stamp changed since the last load.
  void ReloadIfChanged();
  void Run();
  void Serve(int fd);
  std::string Respond(const std::string& request) const;

  const MetricsTlsFiles files_;
  const std::shared_ptr<prometheus::Collectable> source_;
  const int listen_fd_;
  const int port_;
  const int stop_read_;
  const int stop_write_;
  // Only the serving thread touches these after Start.
  CtxPtr ctx_;
  FileStamp loaded_;
  std::thread thread_;
};

}  // namespace conduit::metrics
