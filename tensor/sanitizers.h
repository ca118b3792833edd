// Which sanitizers the library was compiled under, as its own compile saw them. A program compiled
// without them that drives an instrumented library (the test suites under AddressSanitizer) asks here.
#pragma once

namespace mdl {

bool built_with_address_sanitizer();
bool built_with_thread_sanitizer();

}  // namespace mdl
