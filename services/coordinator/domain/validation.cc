#include "services/coordinator/domain/validation.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conduit::coordinator {

absl::Status ValidateId(absl::string_view what, absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (id.size() > kMaxIdLength) {
    return absl::InvalidArgumentError(absl::StrFormat("%s is %d bytes; the limit is %d",
                                                      std::string(what), id.size(), kMaxIdLength));
  }
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", absl::CHexEscape(id),
                       "' contains a control character"));
    }
  }
  return absl::OkStatus();
}

}  // namespace conduit::coordinator
