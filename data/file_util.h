// File helpers the datasets share: whole-file reads (raw or gzip) with errors naming the file,
// a file's size and mtime for cache keys, and a 64-bit FNV-1a hash.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mdl::data {

// Reads the whole file; throws mdl::Error naming `who`, the file and the OS's reason, or saying it
// is not a regular file (a FIFO, a device, a directory: refused without blocking).
std::vector<uint8_t> read_file(const std::string& path, const char* who);
// Same, inflating gzip files (detected by their magic bytes; concatenated members are joined);
// plain files pass through. Inflating stops with an mdl::Error past `max_bytes`.
constexpr size_t kMaxInflatedBytes = size_t(1) << 31;
std::vector<uint8_t> read_maybe_gzip(const std::string& path, const char* who, size_t max_bytes = kMaxInflatedBytes);
// The first `n` bytes of what read_maybe_gzip returns (all of it when shorter), inflating no more
// than that, so a header can be checked before its payload is inflated; an `n` past
// kMaxInflatedBytes stops with an mdl::Error there, as read_maybe_gzip does.
std::vector<uint8_t> read_maybe_gzip_head(const std::string& path, const char* who, size_t n);
// The same from a file's bytes already read (read_file's result; path names it in errors), so a
// reader that checks a header before the rest reads the file from disk once.
std::vector<uint8_t> content_head(std::vector<uint8_t>& raw, const std::string& path, const char* who, size_t n);
// "path:size:mtime_ns", or throws naming `who` when the file cannot be stat'ed.
std::string file_stamp(const std::string& path, const char* who);

uint64_t fnv1a(std::string_view bytes, uint64_t h = 0xcbf29ce484222325ull);
std::string hex64(uint64_t v);

}  // namespace mdl::data
