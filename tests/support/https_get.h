#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <unistd.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tests/support/http_metrics.h"

namespace conduit::testing {

// A scraper's request to an HTTPS /metrics port on 127.0.0.1: trusts only `ca`, presents
// `client_cert`/`client_key` when given, checks the server's certificate names 127.0.0.1, sends
// `method path` and reads until the server closes (10 s receive timeout). The whole response with
// its headers; UNAVAILABLE naming OpenSSL's reason when the connection or handshake fails.
inline absl::StatusOr<std::string> HttpsGet(int port, const std::string& ca,
                                            const std::string& client_cert = "",
                                            const std::string& client_key = "",
                                            const std::string& path = "/metrics",
                                            const std::string& method = "GET") {
  auto fail = [](absl::string_view what) {
    std::string reasons;
    while (unsigned long e = ERR_get_error()) {
      char buf[256];
      ERR_error_string_n(e, buf, sizeof(buf));
      absl::StrAppend(&reasons, " ", buf);
    }
    return absl::UnavailableError(absl::StrCat(what, reasons));
  };
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return fail("SSL_CTX_new");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1 ||
      (!client_cert.empty() &&
       (SSL_CTX_use_certificate_chain_file(ctx, client_cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, client_key.c_str(), SSL_FILETYPE_PEM) != 1))) {
    SSL_CTX_free(ctx);
    return fail("loading the client's files");
  }
  const int fd = ConnectLoopback(port, /*receive_timeout_seconds=*/10);
  if (fd < 0) {
    SSL_CTX_free(ctx);
    return absl::UnavailableError("connect failed");
  }
  SSL* ssl = SSL_new(ctx);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
  SSL_set_fd(ssl, fd);
  absl::StatusOr<std::string> result;
  if (SSL_connect(ssl) != 1) {
    result = fail("handshake failed:");
  } else {
    const std::string request =
        absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    std::string out;
    if (SSL_write(ssl, request.data(), static_cast<int>(request.size())) > 0) {
      char buf[16384];
      for (int n; (n = SSL_read(ssl, buf, sizeof(buf))) > 0;) out.append(buf, n);
    }
    // With TLS 1.3 a refused client certificate is reported after the client's handshake ended:
    // the first read fails instead.
    result = out.empty() ? fail("no response:") : absl::StatusOr<std::string>(out);
  }
  SSL_free(ssl);
  ::close(fd);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return result;
}

}  // namespace conduit::testing
