// A file rendezvous: rank 0 hands a few bytes (NCCL's unique id) to the other ranks through a file
// every rank can see, as torch.distributed's file:// init method, so the NCCL group needs no MPI.
// Rank 0 writes under a temporary name and renames it into place, so no rank reads half a file;
// the others poll until it appears. The file must not exist before the run: a stale one would
// hand out an id nobody listens on, so rank 0 refuses it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mdl::dist {

// Rank 0: writes bytes to path. Throws mdl::Error if path exists already or cannot be written.
void rendezvous_publish(const std::string& path, const std::vector<uint8_t>& bytes);

// The other ranks: waits until path holds what rank 0 published (exactly size bytes) and returns
// it; throws mdl::Error naming the file past timeout_seconds, or when the file is not a rendezvous
// file of that size.
std::vector<uint8_t> rendezvous_fetch(const std::string& path, size_t size, double timeout_seconds);

}  // namespace mdl::dist
