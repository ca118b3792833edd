// What the harnesses share: a temporary folder per process (made once, removed at exit), files
// written into it, and a byte reader that splits one input into the parts a harness needs.
#pragma once
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace mdl::fuzz {

// Never destroyed, so that the exit handler that removes the folder can still read its name.
inline const std::string& temp_dir() {
  static const std::string* dir = [] {
    char pattern[] = "/tmp/mdl-fuzz-XXXXXX";
    if (!::mkdtemp(pattern)) std::abort();
    auto* name = new std::string(pattern);
    std::atexit([] { std::filesystem::remove_all(temp_dir()); });
    return name;
  }();
  return *dir;
}

inline std::string write_temp(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

// Consumes an input from the front: fixed-width fields first, the rest as a file's bytes.
struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t u8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  uint16_t u16() { return uint16_t(u8() | u8() << 8); }
  // Up to `count` bytes (fewer when the input ends first).
  Bytes take(size_t count) {
    const size_t k = count < n ? count : n;
    Bytes head{p, k};
    p += k;
    n -= k;
    return head;
  }
};

}  // namespace mdl::fuzz
