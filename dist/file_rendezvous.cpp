// The rendezvous file: a magic line, the run id's size as 8 little-endian bytes, the run id, the
// payload's size as 8 little-endian bytes, the payload.
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
constexpr char kMagic[] = "mdl-rendezvous 2\n";
constexpr size_t kMagicLen = sizeof kMagic - 1;

void append_sized(std::vector<uint8_t>& out, const uint8_t* data, size_t n) {
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(uint64_t(n) >> (8 * i)));
  out.insert(out.end(), data, data + n);
}

std::vector<uint8_t> encode(const std::string& run_id, const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> out(kMagic, kMagic + kMagicLen);
  append_sized(out, reinterpret_cast<const uint8_t*>(run_id.data()), run_id.size());
  append_sized(out, bytes.data(), bytes.size());
  return out;
}

// Reads a size-prefixed field at pos (advanced past it); false when the data ends first.
bool read_sized(const std::vector<uint8_t>& data, size_t& pos, std::vector<uint8_t>& field) {
  if (data.size() - pos < 8) return false;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(data[pos + size_t(i)]) << (8 * i);
  pos += 8;
  if (data.size() - pos < n) return false;
  field.assign(data.begin() + std::ptrdiff_t(pos), data.begin() + std::ptrdiff_t(pos + n));
  pos += n;
  return true;
}

std::vector<uint8_t> read_all(const std::string& path, std::ifstream& f) {
  try {
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  } catch (const std::exception& e) {
    MDL_FAIL("dist::rendezvous: cannot read '", path, "': ", e.what());
  }
}

// The payload of a complete rendezvous file written for run_id.
std::vector<uint8_t> decode(const std::string& path, const std::vector<uint8_t>& data, const std::string& run_id,
                            size_t size) {
  MDL_CHECK(data.size() >= kMagicLen && std::equal(kMagic, kMagic + kMagicLen, data.begin()), "dist::rendezvous: '",
            path, "' is not a rendezvous file");
  size_t pos = kMagicLen;
  std::vector<uint8_t> their_run, payload;
  MDL_CHECK(read_sized(data, pos, their_run) && read_sized(data, pos, payload) && pos == data.size(),
            "dist::rendezvous: '", path, "' is cut short or too long");
  const std::string theirs(their_run.begin(), their_run.end());
  MDL_CHECK(theirs == run_id, "dist::rendezvous: '", path, "' was written for run '", theirs, "', not this run '",
            run_id, "' (left by an earlier run?); remove it, or name a new one");
  MDL_CHECK(payload.size() == size, "dist::rendezvous: '", path, "' holds ", payload.size(), " bytes, expected ", size);
  return payload;
}

}  // namespace

void rendezvous_publish(const std::string& path, const std::string& run_id, const std::vector<uint8_t>& bytes) {
  MDL_CHECK(!path.empty(), "dist::rendezvous: the rendezvous file name is empty");
  MDL_CHECK(!run_id.empty(), "dist::rendezvous: the run id is empty (give every rank of a run the same, new one)");
  std::error_code ec;
  MDL_CHECK(!fs::exists(path, ec), "dist::rendezvous: the file '", path,
            "' exists already (left by an earlier run?); remove it, or name a new one");
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const std::vector<uint8_t> data = encode(run_id, bytes);
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

std::vector<uint8_t> rendezvous_fetch(const std::string& path, const std::string& run_id, size_t size,
                                      double timeout_seconds) {
  MDL_CHECK(!path.empty(), "dist::rendezvous: the rendezvous file name is empty");
  MDL_CHECK(!run_id.empty(), "dist::rendezvous: the run id is empty (give every rank of a run the same, new one)");
  MDL_CHECK(timeout_seconds > 0, "dist::rendezvous: timeout_seconds must be positive, got ", timeout_seconds);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::error_code ec;
    MDL_CHECK(!fs::is_directory(path, ec), "dist::rendezvous: '", path, "' is a directory, not a rendezvous file");
    std::ifstream f(path, std::ios::binary);
    if (f) return decode(path, read_all(path, f), run_id, size);
    MDL_CHECK(std::chrono::steady_clock::now() < deadline, "dist::rendezvous: '", path, "' did not appear within ",
              timeout_seconds, " s (did rank 0 start, and do all ranks see the same file?)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace mdl::dist
