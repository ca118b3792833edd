// The examples' positional arguments: each a whole number in its range, or absent; anything else
// (a word, trailing characters, a value out of range, an extra argument) is a usage error.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace examples {

struct Args {
  int argc;
  char** argv;
  const char* program;    // "own_cnn"
  const char* arguments;  // "[EPOCHS] [SAMPLES]", for the usage line printed with every error

  // Exits with status 2 when more than `most` arguments follow the program name.
  void at_most(int most) const {
    if (argc - 1 > most) fail("too many arguments (" + std::to_string(argc - 1) + ")");
  }

  // argv[i] as a whole number in [min, max]; `fallback` when there are fewer arguments.
  int64_t count(int i, const char* name, int64_t fallback, int64_t min, int64_t max) const {
    if (i >= argc) return fallback;
    const std::string text = argv[i];
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < min || n > max)
      fail(std::string(name) + " must be a whole number in [" + std::to_string(min) + ", " + std::to_string(max) +
           "], got '" + text + "'");
    return n;
  }

  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\nusage: %s %s\n", program, why.c_str(), program, arguments);
    std::exit(2);
  }
};

}  // namespace examples
