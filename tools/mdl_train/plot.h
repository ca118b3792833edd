// PNG charts drawn by mdl itself, for reports that run without a GUI: line charts (loss and
// accuracy curves per configuration) and horizontal bar charts (time per configuration).
// Pixels are ours; text comes from stb_easy_font, the file from stb_image_write.
#pragma once
#include <string>
#include <vector>

namespace mdl::train {

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; NaN values are skipped
};

struct ChartOptions {
  std::string title{}, x_label{}, y_label{};
  int width = 800, height = 500;
};

// Throws mdl::Error naming the path when the file cannot be written or the data is malformed.
void line_chart(const std::string& png_path, const std::vector<Series>& series, const ChartOptions& opts);
void bar_chart(const std::string& png_path, const std::vector<std::string>& labels, const std::vector<double>& values,
               const ChartOptions& opts);

}  // namespace mdl::train
