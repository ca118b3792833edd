// The headers nearly every suite includes: doctest, mdl.h, test_util.h and the standard library's
// most used. g++ builds them once per build folder into a precompiled header that each suite's
// compile loads (the Makefile's TEST_PCH) instead of parsing them again, which saves 10-20% of a
// suite's compile time under AddressSanitizer.
#ifndef MDL_TESTS_SUITE_HEADERS_H
#define MDL_TESTS_SUITE_HEADERS_H

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "switches/list/toggles.h"
#include "tests/support/test_util.h"

#endif
