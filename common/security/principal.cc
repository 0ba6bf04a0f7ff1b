#include "common/security/principal.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace conduit::security {

absl::Status ValidatePrincipal(absl::string_view principal) {
  if (principal.empty()) return absl::InvalidArgumentError("principal is empty");
  if (principal.size() > kMaxPrincipalBytes) {
    return absl::InvalidArgumentError(absl::StrCat("principal is ", principal.size(),
                                                   " bytes, longer than ", kMaxPrincipalBytes));
  }
  for (char c : principal) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
        absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("principal '", absl::CHexEscape(principal),
                                                     "' contains whitespace or a control byte"));
    }
  }
  const size_t colon = principal.find(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == principal.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("principal '", principal, "' is not of the form <Type>:<name>"));
  }
  return absl::OkStatus();
}

}  // namespace conduit::security
