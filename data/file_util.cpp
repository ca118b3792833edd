// Whole-file reads (raw or gzip via zlib), file stamps for cache keys, FNV-1a hashing.
#include "data/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "data/dataset.h"
#include "tensor/error.h"

namespace mdl::data {

std::vector<uint8_t> read_file(const std::string& path, const char* who) {
  // O_NONBLOCK: a FIFO at the path is refused below instead of blocking the open until a writer comes.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  MDL_CHECK(fd >= 0, who, ": cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int err = errno;
    ::close(fd);
    MDL_FAIL(who, ": cannot read '", path, "': ", S_ISREG(st.st_mode) ? std::strerror(err) : "not a regular file");
  }
  std::vector<uint8_t> bytes(size_t(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      MDL_FAIL(who, ": cannot read '", path, "' at offset ", done, ": ",
               n == 0 ? "file shrank while reading" : std::strerror(err));
    }
    done += size_t(n);
  }
  ::close(fd);
  thread_bytes_read() += int64_t(bytes.size());
  return bytes;
}

namespace {

bool is_gzip(const std::vector<uint8_t>& raw) { return raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b; }

// Inflates gzip data. Past `limit` bytes: with `keep_head`, the first `limit` are returned and the
// rest is not inflated; otherwise an mdl::Error.
std::vector<uint8_t> inflate_gzip(std::vector<uint8_t>& raw, const std::string& path, const char* who, size_t limit,
                                  bool keep_head) {
  z_stream z{};
  MDL_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, who, ": zlib init failed for '", path, "'");
  auto fail = [&](const std::string& reason) {
    const size_t offset = size_t(z.next_in - raw.data());
    inflateEnd(&z);
    MDL_FAIL(who, ": cannot decompress '", path, "' at compressed offset ", offset, ": ", reason);
  };
  // zlib counts in 32-bit uInt: the input is fed and the output taken in chunks of at most 1 GiB.
  constexpr size_t kChunk = size_t(1) << 30;
  std::vector<uint8_t> out(std::min(limit, raw.size() * 4 + 1024));
  size_t produced = 0;
  z.next_in = raw.data();
  const uint8_t* const raw_end = raw.data() + raw.size();
  for (;;) {
    if (z.avail_in == 0) z.avail_in = uInt(std::min(kChunk, size_t(raw_end - z.next_in)));
    if (produced == out.size()) {
      if (out.size() >= limit) {
        if (keep_head) break;
        fail("it inflates past the limit of " + std::to_string(limit) +
             " bytes (a gzip bomb, or a file larger "
             "than any dataset this reader expects)");
      }
      out.resize(out.size() > limit / 2 ? limit : out.size() * 2);
    }
    z.next_out = out.data() + produced;
    z.avail_out = uInt(std::min(kChunk, out.size() - produced));
    const uInt room = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    produced += room - z.avail_out;
    if (rc == Z_STREAM_END) {
      if (z.next_in == raw_end) break;
      if (inflateReset(&z) != Z_OK) fail("zlib reset failed");  // concatenated gzip members
      continue;
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && z.next_in == raw_end) fail("truncated gzip stream");
    if (rc != Z_OK && rc != Z_BUF_ERROR) fail(z.msg ? z.msg : "corrupt gzip stream");
  }
  out.resize(produced);
  inflateEnd(&z);
  return out;
}

}  // namespace

std::vector<uint8_t> read_maybe_gzip(const std::string& path, const char* who, size_t max_bytes) {
  std::vector<uint8_t> raw = read_file(path, who);
  return is_gzip(raw) ? inflate_gzip(raw, path, who, max_bytes, false) : raw;
}

std::vector<uint8_t> content_head(std::vector<uint8_t>& raw, const std::string& path, const char* who, size_t n) {
  if (!is_gzip(raw)) return {raw.begin(), raw.begin() + std::ptrdiff_t(std::min(n, raw.size()))};
  return n <= kMaxInflatedBytes ? inflate_gzip(raw, path, who, n, true)
                                : inflate_gzip(raw, path, who, kMaxInflatedBytes, false);
}

std::vector<uint8_t> read_maybe_gzip_head(const std::string& path, const char* who, size_t n) {
  std::vector<uint8_t> raw = read_file(path, who);
  return content_head(raw, path, who, n);
}

std::string file_stamp(const std::string& path, const char* who) {
  struct stat st {};
  MDL_CHECK(::stat(path.c_str(), &st) == 0, who, ": cannot stat '", path, "': ", std::strerror(errno));
  return path + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
}

uint64_t fnv1a(std::string_view bytes, uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string hex64(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = digits[v & 15];
  return s;
}

}  // namespace mdl::data
