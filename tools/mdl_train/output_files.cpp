// check_output_files_creatable: creates and removes a file beside each output.
#include "tools/mdl_train/output_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace mdl::train {
namespace {

namespace fs = std::filesystem;

void check_creatable(const std::string& option, const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  MDL_CHECK(!fs::is_directory(p, ec), option, " '", path, "' is a folder; it needs a file name");
  const fs::path folder = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::string name = ".";  // appended, not "." + ...: g++ 12 -O3 warns falsely (-Wrestrict) on that form
  name += p.filename().string();
  name += ".probe." + std::to_string(::getpid());
  const fs::path probe = folder / name;
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  MDL_CHECK(fd >= 0, "cannot create the ", option, " file '", path, "': no new file can be made in '", folder.string(),
            "': ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void check_output_files_creatable(const TrainOptions& o) {
  if (!o.save.empty()) check_creatable("--save", o.save);
  if (!o.save_best.empty()) check_creatable("--save-best", o.save_best);
  if (o.profile) check_creatable("--trace", o.trace.empty() ? "mdl-trace.json" : o.trace);
  if (o.profile && !o.roofline.empty()) check_creatable("--roofline", o.roofline);
}

}  // namespace mdl::train
