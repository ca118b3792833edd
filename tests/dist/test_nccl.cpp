// dist/ without mpirun: the file rendezvous that hands NCCL's unique id to the other ranks (two
// threads stand in for two processes), and the NCCL group at world size 1 on one GPU. Compiled
// where dist/ is built (MPI or NCCL); the NCCL cases where NCCL is, the GPU ones only with a GPU.
#include <doctest/doctest.h>

#ifdef MDL_WITH_DIST
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dist/file_rendezvous.h"
#include "tensor/error.h"

using namespace mdl;
namespace fs = std::filesystem;

namespace {

std::string fresh_path(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() / ("mdl_rdv_" + tag + "_" + std::to_string(getpid()));
  fs::remove(p);
  return p.string();
}

}  // namespace

TEST_CASE("dist: file rendezvous hands rank 0's bytes to a rank that started first") {
  const std::string path = fresh_path("ok");
  const std::vector<uint8_t> id{1, 2, 3, 250, 0, 7};
  std::vector<uint8_t> got;
  std::thread other([&] { got = dist::rendezvous_fetch(path, "run1", id.size(), 10); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the reader polls before the file exists
  dist::rendezvous_publish(path, "run1", id);
  other.join();
  CHECK(got == id);
  CHECK(dist::rendezvous_fetch(path, "run1", id.size(), 1) == id);  // a late rank reads it too
  CHECK_THROWS_WITH_AS(dist::rendezvous_publish(path, "run1", id), doctest::Contains("exists already"), Error);
  CHECK_THROWS_WITH_AS(dist::rendezvous_fetch(path, "run1", id.size() + 1, 1),
                       doctest::Contains("holds 6 bytes, expected 7"), Error);
  fs::remove(path);
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))  // no temporary left behind
    CHECK(e.path().filename().string().find("mdl_rdv_ok_" + std::to_string(getpid()) + ".tmp") == std::string::npos);
}

TEST_CASE("dist: file rendezvous times out, naming the file, when rank 0 never comes") {
  const std::string path = fresh_path("late");
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(dist::rendezvous_fetch(path, "run1", 4, 0.2), doctest::Contains("did not appear within 0.2 s"),
                       Error);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK_THROWS_WITH_AS(dist::rendezvous_fetch(path, "run1", 4, 0),
                       doctest::Contains("timeout_seconds must be positive"), Error);
  CHECK_THROWS_WITH_AS(dist::rendezvous_fetch("", "run1", 4, 1), doctest::Contains("file name is empty"), Error);
  CHECK_THROWS_WITH_AS(dist::rendezvous_fetch(path, "", 4, 1), doctest::Contains("run id is empty"), Error);
  CHECK_THROWS_WITH_AS(dist::rendezvous_publish(path, "", {1}), doctest::Contains("run id is empty"), Error);
}

// A file an earlier run left behind: rank 0 of the next run refuses to overwrite it, and the
// other ranks refuse it too instead of joining a communicator nobody listens on.
TEST_CASE("dist: file rendezvous: every rank of a new run refuses a stale file") {
  const std::string path = fresh_path("stale");
  const std::vector<uint8_t> old_id{1, 2, 3, 4};
  dist::rendezvous_publish(path, "run1", old_id);
  CHECK_THROWS_WITH_AS(dist::rendezvous_publish(path, "run2", {5, 6, 7, 8}), doctest::Contains("exists already"),
                       Error);
  const std::string stale = "'" + path + "' was written for run 'run1', not this run 'run2'";
  CHECK_THROWS_WITH_AS(dist::rendezvous_fetch(path, "run2", old_id.size(), 1), doctest::Contains(stale.c_str()), Error);
  fs::remove(path);
}

TEST_CASE("dist: file rendezvous names a directory given as the file") {
  const std::string dir = fs::temp_directory_path().string();
  const std::string named = "'" + dir + "' is a directory, not a rendezvous file";
  CHECK_THROWS_WITH_AS(dist::rendezvous_fetch(dir, "run1", 4, 1), doctest::Contains(named.c_str()), Error);
}

TEST_CASE("dist: file rendezvous refuses a file it did not write") {
  const std::string path = fresh_path("foreign");
  std::ofstream(path) << "hello";
  CHECK_THROWS_WITH_AS(dist::rendezvous_fetch(path, "run1", 4, 1), doctest::Contains("is not a rendezvous file"),
                       Error);
  fs::remove(path);
  CHECK_THROWS_WITH_AS(dist::rendezvous_publish("/nonexistent_dir_mdl/id", "run1", {1}),
                       doctest::Contains("cannot write"), Error);
}

#ifdef MDL_WITH_NCCL
#include "tests/support/test_util.h"
#include "dist/ddp.h"
#include "dist/nccl_group.h"
#include "nn/layers.h"
#include "ops/native/factory.h"
#include "ops/ops.h"

TEST_CASE("dist: NCCL group names a bad rank, a missing rendezvous file and a missing GPU") {
  CHECK_THROWS_WITH_AS(dist::NcclProcessGroup(0, 2), doctest::Contains("needs NcclOptions::rendezvous_file"), Error);
  CHECK_THROWS_WITH_AS(dist::NcclProcessGroup(0, 2, {.rendezvous_file = "/tmp/x", .rendezvous_run_id = ""}),
                       doctest::Contains("needs NcclOptions::rendezvous_run_id"), Error);
  CHECK_THROWS_WITH_AS(dist::NcclProcessGroup(2, 2, {.rendezvous_file = "/tmp/x", .rendezvous_run_id = "r"}),
                       doctest::Contains("rank 2 is not in a world of 2"), Error);
  CHECK_THROWS_WITH_AS(dist::NcclProcessGroup(0, 0), doctest::Contains("world_size must be at least 1"), Error);
  dist::NcclOptions no_time;
  no_time.timeout_seconds = 0;
  CHECK_THROWS_WITH_AS(dist::NcclProcessGroup(0, 1, no_time), doctest::Contains("timeout_seconds must be positive"),
                       Error);
  if (!cuda::is_available())
    CHECK_THROWS_WITH_AS(dist::NcclProcessGroup(0, 1), doctest::Contains("no GPU on rank 0"), Error);
}

// One GPU, one process, no MPI: NCCL forms a world of size 1 from its own unique id.
TEST_CASE("cuda: dist NCCL group initialises, all-reduces and carries DDP at world size 1" * MDL_CUDA_ONLY) {
  dist::NcclProcessGroup nccl(0, 1);
  CHECK(nccl.world_size() == 1);
  CHECK(nccl.rank() == 0);
  CHECK(nccl.backend() == "nccl");
  const Tensor host = arange(0, 1000.0);
  for (DType dt : {kF32, kF16, kBF16}) {
    Tensor t = host.to(dt).to(Device::cuda());
    for (auto op : {dist::ReduceOp::Sum, dist::ReduceOp::Average, dist::ReduceOp::Max}) {
      nccl.all_reduce(t, op);
      CHECK(t.cpu().to(kF32).to_vector<float>() == host.to(dt).to(kF32).to_vector<float>());
    }
  }
  Tensor t = host.to(Device::cuda());
  nccl.broadcast(t, 0);
  nccl.barrier();
  CHECK(t.cpu().to_vector<float>() == host.to_vector<float>());
  CHECK_THROWS_WITH_AS(nccl.all_reduce(host), doctest::Contains("works on CUDA tensors"), Error);
  CHECK_THROWS_WITH_AS(nccl.broadcast(t, 1), doctest::Contains("root 1 is not a rank"), Error);
  // DDP over NCCL: the averaged gradient of one rank is its own.
  auto layer = std::make_shared<nn::Linear>(8, 4);
  layer->to(Device::cuda());
  dist::DistributedDataParallel ddp(layer, nccl);
  const Tensor x = randn({3, 8}).to(Device::cuda());
  sum(ddp(x)).backward();
  ddp.wait();
  const std::vector<float> reduced = layer->weight.grad().cpu().to_vector<float>();
  layer->zero_grad();
  {
    auto no_sync = ddp.no_sync();
    sum((*layer)(x)).backward();
  }
  CHECK(layer->weight.grad().cpu().to_vector<float>() == reduced);
  CHECK(ddp.all_reduces_started() == 1);
}

#ifdef MDL_WITH_MPI
#include "dist/mpi_group.h"

// With MPI: the id travels over the MPI group (a singleton here, without mpirun).
TEST_CASE("cuda: dist NCCL group bootstrapped over MPI at world size 1" * MDL_CUDA_ONLY) {
  dist::MpiProcessGroup mpi;
  dist::NcclProcessGroup nccl(mpi);
  CHECK(nccl.world_size() == 1);
  Tensor t = ones({16}, TensorOptions(kF32, Device::cuda()));
  nccl.all_reduce(t, dist::ReduceOp::Sum);
  CHECK(t.cpu().to_vector<float>() == std::vector<float>(16, 1.0f));
}
#endif  // MDL_WITH_MPI
#endif  // MDL_WITH_NCCL
#endif  // MDL_WITH_DIST
