#pragma once

#include <prometheus/collectable.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

class CivetServer;

namespace conduit::metrics {

// GET and HEAD /metrics over plain HTTP (civetweb, the server prometheus-cpp's own Exposer
// uses): the text exposition format of one Collectable. Written over civetweb directly because
// prometheus::Exposer answers only GET (a HEAD, which load balancers and uptime checks send, got
// 404). Two serving threads; a scrape serialises what `source` collects at that moment.
class HttpExposer {
 public:
  // Listens on host:port (port 0 picks one). UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpExposer>> Start(
      const std::string& listen, std::shared_ptr<prometheus::Collectable> source);
  ~HttpExposer();  // stops serving

  HttpExposer(const HttpExposer&) = delete;
  HttpExposer& operator=(const HttpExposer&) = delete;

  int port() const { return port_; }

 private:
  class Handler;
  HttpExposer(std::unique_ptr<CivetServer> server, std::unique_ptr<Handler> handler, int port);

  std::unique_ptr<CivetServer> server_;  // stopped before the handler goes
  std::unique_ptr<Handler> handler_;
  int port_;
};

// The body and content type of a /metrics answer for what `source` collects now.
std::string ExpositionText(const prometheus::Collectable& source);
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace conduit::metrics
