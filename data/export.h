// Writes a dataset of u8 images as an ImageFolder of PNGs (stb_image_write), so the decode path
// can be exercised and measured on real images: root/<label>_<class name>/<index>.png.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace mdl::data {

struct ExportOptions {
  int64_t limit = -1;  // the first `limit` samples; -1: all
  int threads = 2;     // PNG encoding in parallel
};

// Class folders are named "<label>_<name>" with the label zero-padded, so ImageFolder's sorted
// classes keep the dataset's label order; '/' and ' ' in names become '_'. Files are the sample
// index zero-padded, so each class keeps the dataset's order. `root` must be absent or an empty
// folder (a root holding an earlier export is refused, not mixed into). Returns the number of files written.
int64_t export_image_folder(const Dataset& dataset, const std::string& root,
                            const std::vector<std::string>& class_names, ExportOptions options = {});

}  // namespace mdl::data
