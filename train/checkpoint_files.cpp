// Checkpoint files: names, digests, durable renames and the clean-up of abandoned ones.
#include "train/checkpoint_files.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "tensor/error.h"

namespace mdl::train::checkpoint_files {
namespace {

namespace fs = std::filesystem;

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The writers' process ids in `name` when it is `stem` followed by ".new.PID", ".tmp.PID" or
// ".new.PID.tmp.PID"; empty otherwise.
std::vector<long> writer_ids(std::string_view name, std::string_view stem) {
  if (name.substr(0, stem.size()) != stem) return {};
  std::string_view rest = name.substr(stem.size());
  std::vector<long> pids;
  auto take = [&](std::string_view tag) {
    if (rest.substr(0, tag.size()) != tag) return false;
    const std::string_view digits = rest.substr(tag.size(), rest.find('.', tag.size()) - tag.size());
    if (!all_digits(digits)) return false;
    pids.push_back(std::stol(std::string(digits)));
    rest.remove_prefix(tag.size() + digits.size());
    return true;
  };
  const bool matched = take(".tmp.") ? rest.empty()
                                     : take(".new.") && (rest.empty() || (take(".tmp.") && rest.empty()));
  return matched ? pids : std::vector<long>{};
}

bool writer_gone(long pid) {
  if (pid <= 0 || pid == long(::getpid())) return false;
  return ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

void sync_directory(const fs::path& file) {
  const std::string dir = file.parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

fs::path directory_of(const std::string& file) {
  const fs::path dir = fs::path(file).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

}  // namespace

std::string state_path(const std::string& checkpoint) { return checkpoint + ".train.safetensors"; }

FileDigest digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MDL_CHECK(in.good(), "checkpoint: cannot open '", path, "'");
  FileDigest d;
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    const std::streamsize n = in.gcount();
    crc = crc32(crc, reinterpret_cast<const Bytef*>(chunk.data()), uInt(n));
    d.bytes += uint64_t(n);
  }
  MDL_CHECK(in.eof(), "checkpoint: reading '", path, "' failed");
  d.crc = uint32_t(crc);
  return d;
}

std::string hex(uint32_t v) {
  char b[9];
  std::snprintf(b, sizeof b, "%08x", v);
  return b;
}

std::string staged_path(const std::string& file) { return file + ".new." + std::to_string(::getpid()); }

std::vector<std::string> staged_versions(const std::string& file) {
  std::vector<std::string> found;
  const std::string prefix = fs::path(file).filename().string() + ".new.";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(directory_of(file), ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
        all_digits(std::string_view(name).substr(prefix.size())))
      found.push_back((fs::path(file).parent_path() / name).string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void rename_durably(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int e = errno;
    MDL_FAIL("checkpoint: cannot rename '", from, "' over '", to, "': ", std::strerror(e));
  }
  sync_directory(to);
}

void remove_abandoned(const std::string& checkpoint) {
  const std::string stems[] = {fs::path(state_path(checkpoint)).filename().string(),
                               fs::path(checkpoint).filename().string()};
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(directory_of(checkpoint), ec)) {
    const std::string name = e.path().filename().string();
    for (const std::string& stem : stems) {
      const std::vector<long> pids = writer_ids(name, stem);
      if (pids.empty()) continue;
      if (std::all_of(pids.begin(), pids.end(), writer_gone)) fs::remove(e.path(), ec);
      break;
    }
  }
}

}  // namespace mdl::train::checkpoint_files
