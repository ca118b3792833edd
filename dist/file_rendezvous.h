// A file rendezvous: rank 0 hands a few bytes (NCCL's unique id) to the other ranks through a file
// every rank can see, as torch.distributed's file:// init method, so the NCCL group needs no MPI.
// Rank 0 writes under a temporary name and renames it into place, so no rank reads half a file;
// the others poll until it appears. The file must not exist before the run: a stale one would
// hand out an id nobody listens on. So every call names the run (a run id, the same on every rank
// of a run and new for each run, such as the batch system's job id): rank 0 refuses a file that
// exists already, and the other ranks refuse a file written for another run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mdl::dist {

// Rank 0: writes bytes for run_id to path. Throws mdl::Error if path exists already or cannot be
// written, or run_id is empty.
void rendezvous_publish(const std::string& path, const std::string& run_id, const std::vector<uint8_t>& bytes);

// The other ranks: waits until path holds what rank 0 of run_id published (exactly size bytes)
// and returns it; throws mdl::Error naming the file past timeout_seconds, when the file was
// written for another run, or when it is not a rendezvous file of that size.
std::vector<uint8_t> rendezvous_fetch(const std::string& path, const std::string& run_id, size_t size,
                                      double timeout_seconds);

}  // namespace mdl::dist
