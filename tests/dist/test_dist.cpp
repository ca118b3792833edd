// Data-parallel training across processes: each case launches build/.../mdl_dist_worker under
// `mpirun -np 2` (tests/dist/worker.cpp holds the scenarios) with a wall-clock limit, and checks
// its exit status and what the ranks print. Skipped (reported skipped) in a build without MPI or
// where mpirun is missing.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "tools/mdl_train/options.h"

using namespace mdl;

namespace {

namespace fs = std::filesystem;

fs::path exe_dir() { return fs::read_symlink("/proc/self/exe").parent_path(); }

bool mpi_ready() {
#ifdef MDL_WITH_MPI
  return std::system("command -v mpirun >/dev/null 2>&1") == 0 && fs::exists(exe_dir() / "mdl_dist_worker");
#else
  return false;
#endif
}

// The LSan suppressions for Open MPI's own leaks, found above the build folder.
std::string suppressions() {
  for (fs::path d = exe_dir(); !d.empty() && d != d.root_path(); d = d.parent_path())
    if (fs::exists(d / "tests/dist/lsan_openmpi.supp")) return (d / "tests/dist/lsan_openmpi.supp").string();
  return "";
}

struct Run {
  int status = -1;  // exit status of mpirun (124: killed by the time limit)
  std::string output;
  double seconds = 0;
};

Run run_workers(const std::string& args, int limit_seconds = 90) {
  // CMA (process_vm_readv) is often blocked in containers; shared memory without it works everywhere.
  std::string cmd = "timeout -k 5 " + std::to_string(limit_seconds) + " mpirun -np 2 --oversubscribe --bind-to none" +
                    (geteuid() == 0 ? " --allow-run-as-root" : "") +
                    " --mca btl self,vader --mca btl_vader_single_copy_mechanism none";
  const std::string supp = suppressions();
  // Open MPI's plugins are unloaded before LeakSanitizer reports: the full (slow) unwinder sees
  // past their frames to the Open MPI library that called them, which the suppressions name.
  if (!supp.empty()) cmd += " -x LSAN_OPTIONS=suppressions=" + supp + ":print_suppressions=0:fast_unwind_on_malloc=0";
  cmd += " " + (exe_dir() / "mdl_dist_worker").string() + " " + args + " 2>&1";
  Run r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE_MESSAGE(p, "cannot start: ", cmd);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// "rank R key value" lines -> value per (rank, key).
std::map<std::string, std::string> values(const std::string& out, const std::string& key) {
  std::map<std::string, std::string> v;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\n', pos);
    const std::string line = out.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? out.size() : end + 1;
    char rank[16], k[128], val[256];
    if (std::sscanf(line.c_str(), "rank %15s %127s %255s", rank, k, val) == 3 && key == k) v[rank] = val;
  }
  return v;
}

}  // namespace

TEST_SUITE("dist") {
  TEST_CASE("dist: 2 ranks train bit-identical replicas equal to one process on the whole batch" *
            doctest::skip(!mpi_ready())) {
    // One bucket; ~2 KiB buckets: several; several with channels-last conv weights (not contiguous).
    for (const std::string config : {"25", "0.002", "0.002 channels_last"}) {
      CAPTURE(config);
      const std::string bucket_mb = config.substr(0, config.find(' '));
      const Run r = run_workers("equal " + config);
      INFO(r.output);
      CHECK(r.status == 0);
      CHECK(r.output.find("PASS equal") != std::string::npos);
      const auto hashes = values(r.output, "hash");
      REQUIRE(hashes.size() == 2);
      CHECK(hashes.at("0") == hashes.at("1"));
      const auto buckets = values(r.output, "buckets");
      REQUIRE(buckets.size() == 2);
      const auto early = values(r.output, "all_reduces_during_backward");
      REQUIRE(early.size() == 2);
      if (bucket_mb == "25") {
        CHECK(buckets.at("0") == "1");
        CHECK(early.at("0") == "0");  // one bucket: it can only start with the last gradient
      } else {
        CHECK(std::stoi(buckets.at("0")) >= 3);
        CHECK(std::stoi(early.at("0")) == 5 * (std::stoi(buckets.at("0")) - 1));  // overlapped with backward
      }
      const auto diff = values(r.output, "max_diff_vs_single_process");
      REQUIRE(diff.size() == 2);
      CHECK(std::stod(diff.at("0")) < 1e-5);
    }
  }

  TEST_CASE("dist: no_sync micro-batches send nothing and still match the whole batch" * doctest::skip(!mpi_ready())) {
    const Run r = run_workers("accum");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("PASS accum") != std::string::npos);
    const auto reduces = values(r.output, "all_reduces");
    REQUIRE(reduces.size() == 2);
    CHECK(reduces.at("0") == "5");  // 5 steps, 1 bucket: the no_sync halves added none
  }

  TEST_CASE("dist: a GradScaler inf on one rank skips the step on both" * doctest::skip(!mpi_ready())) {
    const Run r = run_workers("scaler_skip");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("PASS scaler_skip") != std::string::npos);
    const auto synced = values(r.output, "skipped_with_sync_found_inf");
    REQUIRE(synced.size() == 2);
    CHECK(synced.at("0") == "1");
    CHECK(synced.at("1") == "1");
  }

  TEST_CASE("dist: bad input to collectives and DDP throws naming it" * doctest::skip(!mpi_ready())) {
    const Run r = run_workers("errors");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("PASS errors") != std::string::npos);
  }

  TEST_CASE("dist: a rank that dies or stalls makes the job fail within the timeout, not hang" *
            doctest::skip(!mpi_ready())) {
    SUBCASE("death") {
      const Run r = run_workers("rank_death", 60);
      INFO(r.output);
      CHECK(r.status != 0);
      CHECK(r.status != 124);  // not our time limit: MPI or the collective's own timeout ended it
      CHECK(r.output.find("rank 1 exiting at step 2") != std::string::npos);
      CHECK(r.output.find("PASS") == std::string::npos);
      CHECK(r.seconds < 45);
    }
    SUBCASE("stall") {
      const Run r = run_workers("rank_stall", 60);
      INFO(r.output);
      CHECK(r.status != 0);
      CHECK(r.status != 124);
      CHECK(r.output.find("rank 0 error: dist::all_reduce (average)") != std::string::npos);
      CHECK(r.output.find("timed out after 3 s on rank 0 of 2") != std::string::npos);
      CHECK(r.seconds < 45);
    }
    SUBCASE("DataParallel's timeout is the one it was given") {
      const Run r = run_workers("dp_timeout", 60);
      INFO(r.output);
      CHECK(r.status != 0);
      CHECK(r.status != 124);
      CHECK(r.output.find("rank 1 error: dist::barrier timed out after 1 s on rank 1 of 2") != std::string::npos);
    }
  }

  TEST_CASE("dist: a collective whose sizes differ across ranks throws naming it" * doctest::skip(!mpi_ready())) {
    const Run r = run_workers("size_mismatch", 60);
    INFO(r.output);
    CHECK(r.status == 3);  // the worker's abort_all after an mdl::Error, not MPI's own abort
    CHECK(r.output.find("rank 1 error: dist::broadcast from rank 0 of 4 f32 values failed on rank 1 of 2") !=
          std::string::npos);
  }

}  // TEST_SUITE

TEST_CASE("mdl-train --dist: parsed in an MPI build, a usage error naming it otherwise") {
  std::string error;
  train::TrainOptions o;
  try {
    o = train::parse_train_options({"--dist", "--bucket-mb", "4"});
  } catch (const train::UsageError& e) {
    error = e.what();
  }
#ifdef MDL_WITH_MPI
  CHECK(error.empty());
  CHECK(o.dist);
  CHECK(o.bucket_mb == 4.0);
#else
  CHECK(error.find("--dist needs a build with MPI") != std::string::npos);
#endif
  CHECK_THROWS_WITH_AS(train::parse_train_options({"--bucket-mb", "0"}),
                       doctest::Contains("--bucket-mb must be in (0, "), train::UsageError);
  CHECK(train::usage().find("--dist") != std::string::npos);
  // Long enough by default for rank 0 to validate a large set while the others wait.
  CHECK(train::parse_train_options({}).dist_timeout >= 1800);
#ifdef MDL_WITH_MPI
  CHECK(train::parse_train_options({"--dist", "--dist-timeout", "7200"}).dist_timeout == 7200);
#endif
  for (const char* bad : {"0", "-5", "nan", "inf", "abc"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(train::parse_train_options({"--dist-timeout", bad}), doctest::Contains("--dist-timeout"),
                         train::UsageError);
  }
  CHECK(train::usage().find("--dist-timeout S") != std::string::npos);
  CHECK(train::usage().find("with --dist rank 0's shard only") != std::string::npos);  // --dump-order
}

TEST_CASE("dist: mdl-train --dist on 2 ranks: one progress log, one checkpoint" * doctest::skip(!mpi_ready())) {
  const std::string ckpt =
      (fs::temp_directory_path() / ("mdl_dist_" + std::to_string(getpid()) + ".safetensors")).string();
  const Run r = run_workers("train " + ckpt, 120);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("PASS train") != std::string::npos);
  size_t lines = 0;
  for (size_t p = r.output.find("epoch 1/2:"); p != std::string::npos; p = r.output.find("epoch 1/2:", p + 1)) ++lines;
  CHECK(lines == 1);  // rank 0 alone prints
  CHECK(fs::exists(ckpt));
  fs::remove(ckpt);
  fs::remove(ckpt + ".train.safetensors");
}
