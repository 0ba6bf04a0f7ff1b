// The source of conduit_test_pch (cmake/conduit.cmake): the target exists to build the
// precompiled header every test binary reuses; this file adds nothing to it.
