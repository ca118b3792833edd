// The corrupt-file zoo (tools/corrupt_zoo.py writes it): every file, in every format mdl reads,
// must be refused with an mdl::Error that names it, each within a time bound, all together within
// a memory bound, and reading must write nothing anywhere in the zoo.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "data/cifar.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/text.h"
#include "tests/support/data_test_util.h"
#include "io/safetensors.h"
#include "tensor/error.h"

using namespace mdl;
namespace fs = std::filesystem;

namespace {

// Every file under root with its size and modification time, for "nothing was written".
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> snapshot(const fs::path& root) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> files;
  for (const auto& e : fs::recursive_directory_iterator(root))
    files[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
  return files;
}

int64_t max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) / 1024;
}

// Loads a dataset and reads its first and last samples, where loading alone can succeed.
void read_ends(const data::Dataset& d) {
  if (d.size() > 0) d.get(0), d.get(d.size() - 1);
}

}  // namespace

TEST_CASE("corrupt-file zoo: every file is refused with an mdl::Error naming it, in bounded time and memory") {
  data_test::TempDir dir("zoo");
  const fs::path tools = fs::path(__FILE__).parent_path().parent_path().parent_path() / "tools";
  const std::string make = "python3 '" + (tools / "corrupt_zoo.py").string() + "' '" + dir.path.string() +
                           "' >/dev/null";
  REQUIRE(std::system(make.c_str()) == 0);
  const fs::path valid = dir.path / "valid";

  const std::map<std::string, std::function<void(const std::string&)>> readers = {
      {"idx-images", [&](const std::string& p) { read_ends(data::IdxDataset(p, (valid / "labels.idx").string())); }},
      {"idx-labels", [&](const std::string& p) { read_ends(data::IdxDataset((valid / "images.idx").string(), p)); }},
      {"cifar",
       [](const std::string& p) { read_ends(data::Cifar10Binary(fs::path(p).parent_path().string(), false)); }},
      {"safetensors", [](const std::string& p) { io::load_safetensors(p); }},
      {"image", [](const std::string& p) { data::read_image(p, data::Channels::Rgb); }},
      {"text", [](const std::string& p) { read_ends(data::TextDataset(p, 8)); }},
  };

  const auto before = snapshot(dir.path);
  const int64_t rss_before = max_rss_mib();
  std::ifstream manifest(dir.path / "manifest.tsv");
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    std::istringstream fields(line);
    std::string kind, rel, what;
    std::getline(fields, kind, '\t');
    std::getline(fields, rel, '\t');
    std::getline(fields, what);
    const std::string path = (dir.path / rel).string();
    CAPTURE(kind);
    CAPTURE(rel);
    CAPTURE(what);
    REQUIRE(readers.count(kind) == 1);
    const auto start = std::chrono::steady_clock::now();
    std::string error = "(no error)";
    try {
      readers.at(kind)(path);
    } catch (const Error& e) {
      error = e.what();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CAPTURE(error);
    CHECK(error.find(path) != std::string::npos);
    CHECK(seconds < 5.0);
    ++cases;
  }
  CHECK(cases > 200);
  CHECK(max_rss_mib() - rss_before < 768);
  CHECK(snapshot(dir.path) == before);
}
