// The source of the precompiled-header targets (cmake/conduit.cmake, conduit_pch): they exist to
// build a header others reuse; this file adds nothing.
