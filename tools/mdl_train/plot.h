// PNG charts drawn by mdl itself, for reports that run without a GUI: line charts (loss and
// accuracy curves per configuration), horizontal bar charts (time per configuration) and roofline
// charts (kernels against the machine's ceilings).
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

// A roof: min(peak, intensity x bandwidth) over the chart, as one bent line.
struct Roof {
  std::string name;
  double peak_gflops = 0, bandwidth_gbs = 0;
};
// A kernel at its arithmetic intensity (FLOP/byte) and achieved GFLOP/s; share of the time in [0, 1].
struct RooflinePoint {
  std::string name;
  double intensity = 0, gflops = 0, share = 0;
};
// Log-log axes; the first roof drawn thickest; each point a disc whose area follows its share, the
// largest labelled. Roofs and points must be positive and finite.
void roofline_chart(const std::string& png_path, const std::vector<Roof>& roofs,
                    const std::vector<RooflinePoint>& points, const ChartOptions& opts);

}  // namespace mdl::train
