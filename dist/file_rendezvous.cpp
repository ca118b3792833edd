// The rendezvous file: a magic line, the payload's size as 8 little-endian bytes, the payload.
#include "dist/file_rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "tensor/error.h"

namespace mdl::dist {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[] = "mdl-rendezvous 1\n";
constexpr size_t kMagicLen = sizeof kMagic - 1;

std::vector<uint8_t> encode(const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> out(kMagic, kMagic + kMagicLen);
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(uint64_t(bytes.size()) >> (8 * i)));
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

}  // namespace

void rendezvous_publish(const std::string& path, const std::vector<uint8_t>& bytes) {
  MDL_CHECK(!path.empty(), "dist::rendezvous: the rendezvous file name is empty");
  std::error_code ec;
  MDL_CHECK(!fs::exists(path, ec), "dist::rendezvous: the file '", path,
            "' exists already (left by an earlier run?); remove it, or name a new one");
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const std::vector<uint8_t> data = encode(bytes);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    MDL_CHECK(f.good(), "dist::rendezvous: cannot write '", tmp, "'");
    f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
    f.close();
    MDL_CHECK(!f.fail(), "dist::rendezvous: writing '", tmp, "' failed");
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    MDL_FAIL("dist::rendezvous: cannot move the rendezvous file into place at '", path, "'");
  }
}

std::vector<uint8_t> rendezvous_fetch(const std::string& path, size_t size, double timeout_seconds) {
  MDL_CHECK(!path.empty(), "dist::rendezvous: the rendezvous file name is empty");
  MDL_CHECK(timeout_seconds > 0, "dist::rendezvous: timeout_seconds must be positive, got ", timeout_seconds);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      const std::vector<uint8_t> data{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
      const bool magic_ok = data.size() >= kMagicLen + 8 && std::equal(kMagic, kMagic + kMagicLen, data.begin());
      MDL_CHECK(magic_ok, "dist::rendezvous: '", path, "' is not a rendezvous file");
      uint64_t n = 0;
      for (int i = 0; i < 8; ++i) n |= uint64_t(data[kMagicLen + size_t(i)]) << (8 * i);
      MDL_CHECK(n == size && data.size() == kMagicLen + 8 + size, "dist::rendezvous: '", path, "' holds ", n,
                " bytes, expected ", size);
      return {data.begin() + std::ptrdiff_t(kMagicLen + 8), data.end()};
    }
    MDL_CHECK(std::chrono::steady_clock::now() < deadline, "dist::rendezvous: '", path, "' did not appear within ",
              timeout_seconds, " s (did rank 0 start, and do all ranks see the same file?)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace mdl::dist
