#include "common/security/tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/security/principal.h"
#include "common/security/text_file.h"

namespace conduit::security {
namespace {

absl::Status LineError(size_t line, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
}

bool ParseHexDigest(absl::string_view hex, Sha256Digest* out) {
  if (hex.size() != 2 * out->size()) return false;
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  const std::string bytes = absl::HexStringToBytes(hex);
  std::copy(bytes.begin(), bytes.end(), out->begin());
  return true;
}

}  // namespace

Sha256Digest Sha256(absl::string_view data) {
  Sha256Digest digest{};
  unsigned int length = 0;
  // EVP_Digest fails only when OpenSSL cannot allocate or lacks SHA-256: a broken install.
  if (EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1 ||
      length != digest.size()) {
    std::abort();
  }
  return digest;
}

std::string Sha256Hex(absl::string_view data) {
  const Sha256Digest digest = Sha256(data);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view text) {
  std::vector<TokenEntry> entries;
  absl::flat_hash_map<std::string, size_t> line_of_hash;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) {
      return LineError(line_number, absl::StrCat("expected 2 fields (sha256-hex principal), got ",
                                                 fields.size()));
    }
    TokenEntry entry;
    if (!ParseHexDigest(fields[0], &entry.token_sha256)) {
      return LineError(line_number, "the token hash is not 64 hex digits (a SHA-256)");
    }
    if (absl::Status s = ValidatePrincipal(fields[1]); !s.ok()) {
      return LineError(line_number, s.message());
    }
    entry.principal = std::string(fields[1]);
    const auto [it, inserted] = line_of_hash.emplace(absl::AsciiStrToLower(fields[0]), line_number);
    if (!inserted) {
      return LineError(line_number, absl::StrCat("the token hash is already on line ", it->second));
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::Status TokenStore::Reload(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "token file");
  if (!text.ok()) return text.status();
  if (absl::Status s = ReplaceFromText(*text); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("token file '", path, "' ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status TokenStore::ReplaceFromText(absl::string_view text) {
  absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(text);
  if (!entries.ok()) return entries.status();
  absl::MutexLock lock(&mu_);
  entries_ = *std::move(entries);
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenStore::Lookup(absl::string_view presented) const {
  if (presented.empty()) return absl::UnauthenticatedError("bearer token is empty");
  const Sha256Digest digest = Sha256(presented);
  absl::ReaderMutexLock lock(&mu_);
  // Branch-free selection: every entry is compared, and which one matched changes no branch.
  constexpr size_t kNone = ~size_t{0};
  size_t match = kNone;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const int differs =
        CRYPTO_memcmp(digest.data(), entries_[i].token_sha256.data(), digest.size());
    const size_t mask = size_t{0} - static_cast<size_t>(differs == 0);  // all ones on a match
    match = (match & ~mask) | (i & mask);
  }
  if (match == kNone) return absl::UnauthenticatedError("bearer token is not recognised");
  return entries_[match].principal;
}

size_t TokenStore::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace conduit::security
