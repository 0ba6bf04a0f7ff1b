#pragma once

// The two status macros this codebase uses (Abseil 20220623 ships none).
//
//   CONDUIT_RETURN_IF_ERROR(DoThing());
//   CONDUIT_ASSIGN_OR_RETURN(auto value, ComputeValue());

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CONDUIT_STATUS_CONCAT_INNER_(a, b) a##b
#define CONDUIT_STATUS_CONCAT_(a, b) CONDUIT_STATUS_CONCAT_INNER_(a, b)

#define CONDUIT_RETURN_IF_ERROR(expr)                \
  do {                                               \
    ::absl::Status conduit_status_ = (expr);         \
    if (!conduit_status_.ok()) return conduit_status_; \
  } while (0)

#define CONDUIT_ASSIGN_OR_RETURN(lhs, expr) \
  CONDUIT_ASSIGN_OR_RETURN_IMPL_(CONDUIT_STATUS_CONCAT_(conduit_statusor_, __LINE__), lhs, expr)

#define CONDUIT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()
