#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace conduit::security {

// base64url without padding (RFC 4648 §5, as JWS uses it, RFC 7515 §2).

// `data` encoded: alphabet A-Z a-z 0-9 - _, no '=' padding.
std::string Base64UrlEncode(absl::string_view data);

// The bytes `text` encodes, or nullopt unless `text` is canonical unpadded base64url: only the
// alphabet above (no '=', no whitespace, no '+' or '/'), a length that is not 1 more than a
// multiple of 4, and zero bits left over in the last character (so each byte string has
// exactly one accepted encoding).
std::optional<std::string> Base64UrlDecode(absl::string_view text);

}  // namespace conduit::security
