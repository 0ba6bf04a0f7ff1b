#include "common/metrics/http_exposer.h"

#include <CivetServer.h>
#include <prometheus/text_serializer.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace conduit::metrics {

std::string ExpositionText(const prometheus::Collectable& source) {
  return prometheus::TextSerializer().Serialize(source.Collect());
}

class HttpExposer::Handler : public CivetHandler {
 public:
  explicit Handler(std::shared_ptr<prometheus::Collectable> source) : source_(std::move(source)) {}

  bool handleGet(CivetServer*, mg_connection* conn) override { return Answer(conn, true); }
  bool handleHead(CivetServer*, mg_connection* conn) override { return Answer(conn, false); }

 private:
  // HEAD gets the headers GET would, Content-Length included, and no body.
  bool Answer(mg_connection* conn, bool with_body) {
    const std::string body = ExpositionText(*source_);
    const std::string head =
        absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: ", kExpositionContentType,
                     "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n");
    mg_write(conn, head.data(), head.size());
    if (with_body) mg_write(conn, body.data(), body.size());
    return true;
  }

  const std::shared_ptr<prometheus::Collectable> source_;
};

HttpExposer::HttpExposer(std::unique_ptr<CivetServer> server, std::unique_ptr<Handler> handler,
                         int port)
    : server_(std::move(server)), handler_(std::move(handler)), port_(port) {}

HttpExposer::~HttpExposer() {
  server_->close();
  server_.reset();
}

absl::StatusOr<std::unique_ptr<HttpExposer>> HttpExposer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Collectable> source) {
  const std::vector<std::string> options = {"listening_ports", listen, "num_threads", "2"};
  std::unique_ptr<CivetServer> server;
  try {
    server = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on '", listen, "': ", e.what()));
  }
  const std::vector<int> ports = server->getListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on '", listen, "'"));
  }
  auto handler = std::make_unique<Handler>(std::move(source));
  server->addHandler("/metrics", handler.get());
  return std::unique_ptr<HttpExposer>(
      new HttpExposer(std::move(server), std::move(handler), ports.front()));
}

}  // namespace conduit::metrics
