// A main for the libFuzzer harnesses without libFuzzer: linked with one fuzz/fuzz_*.cpp, it calls
// LLVMFuzzerTestOneInput once on the empty input and once on every file named or found in a folder
// named (in name order), as `harness -runs=0 DIR` does. -max_len=N cuts longer inputs to N bytes, as
// libFuzzer does when it reads a corpus. Each input is copied into a buffer of exactly its size, so
// AddressSanitizer sees a read past its end. The harness's own checks and the sanitizers fail the
// run; the program itself fails only on a bad argument or a path that cannot be read.
//   usage: fuzz_<harness> [-max_len=N] FILE_OR_FOLDER...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void run_one(const std::vector<char>& bytes) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), copy.get());
  LLVMFuzzerTestOneInput(copy.get(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  size_t max_len = 0;  // 0: no limit
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-max_len=", 0) == 0) {
      char* end = nullptr;
      max_len = std::strtoull(arg.c_str() + 9, &end, 10);
      if (*end != '\0') {
        std::fprintf(stderr, "%s: bad argument %s\n", argv[0], arg.c_str());
        return 2;
      }
      continue;
    }
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> found;
      for (const auto& entry : fs::directory_iterator(arg))
        if (entry.is_regular_file()) found.push_back(entry.path());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(arg, ec)) {
      files.emplace_back(arg);
    } else {
      std::fprintf(stderr, "%s: %s is neither a file nor a folder\n", argv[0], arg.c_str());
      return 2;
    }
  }
  run_one({});
  size_t cut = 0;
  for (const fs::path& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], path.c_str());
      return 2;
    }
    std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (max_len > 0 && bytes.size() > max_len) {
      bytes.resize(max_len);
      ++cut;
    }
    run_one(bytes);
  }
  std::printf("%s: %zu inputs run (the empty one and %zu files, %zu cut to %zu bytes)\n",
              fs::path(argv[0]).filename().c_str(), files.size() + 1, files.size(), cut, max_len);
  return 0;
}
