// The CPU allocator's cache of large blocks. glibc returns blocks above its mmap threshold
// (up to 32 MiB) to the kernel on free, and trims the top of its heap once the free space there
// passes its trim threshold, so a large op output or kernel scratch is often fresh memory whose
// first touch page-faults; with the cache, a freed block of 64 KiB or more is kept and handed to
// the next request of the same rounded size, as the CUDA caching allocator does on the GPU.
// The cpu_block_cache toggle (switches/list/toggles.h); off in AddressSanitizer builds, where
// reusing memory would hide use-after-free. Turning it off returns what the cache holds.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mdl::cpu_cache {

struct Stats {
  int64_t cached_bytes = 0;  // held in free lists now
  int64_t hits = 0;          // large requests served from the cache
  int64_t misses = 0;        // large requests that went to the system allocator
};
Stats stats();
void empty();  // returns every cached block to the system

// For the CPU allocator. block_size: the bytes actually held for a request of `rounded` bytes
// (64-byte multiple). take: a cached block of exactly that size, or null. give: keeps a freed
// block; false when the caller must free it.
size_t block_size(size_t rounded);
void* take(size_t block);
bool give(void* p, size_t block);

}  // namespace mdl::cpu_cache
