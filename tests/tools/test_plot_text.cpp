// The charts' tick labels are drawn whole: each y-axis label in the PNG has exactly the pixels
// stb_easy_font gives that text (a too-small quad buffer once cut glyphs off).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <stb/stb_image.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

#include "tools/mdl_train/plot.h"

namespace {

// Pixels covered by the text's quads at scale 1, from stb_easy_font with an ample buffer.
size_t glyph_pixels(const std::string& s) {
  std::vector<char> buf(1 << 16);
  std::string copy = s;
  const int quads = stb_easy_font_print(0, 0, copy.data(), nullptr, buf.data(), int(buf.size()));
  std::set<std::pair<int, int>> on;
  for (int q = 0; q < quads; ++q) {
    const float* v0 = reinterpret_cast<const float*>(&buf[size_t(q) * 64]);
    const float* v2 = reinterpret_cast<const float*>(&buf[size_t(q) * 64 + 32]);
    for (int y = int(v0[1]); y < int(v2[1]); ++y)
      for (int x = int(v0[0]); x < int(v2[0]); ++x) on.insert({x, y});
  }
  return on.size();
}

}  // namespace

TEST_CASE("plots: y tick labels are drawn whole") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("mdl_plot_text_" + std::to_string(::getpid()) + ".png")).string();
  // y spans 0.3 .. 0.9, padded by 5% to 0.27 .. 0.93: ticks every 0.2 at 0.4, 0.6 and 0.8.
  mdl::train::line_chart(path, {{"loss", {1, 2, 3}, {0.9, 0.5, 0.3}}}, {.width = 640, .height = 400});
  int w = 0, h = 0, c = 0;
  unsigned char* px = stbi_load(path.c_str(), &w, &h, &c, 3);
  REQUIRE(px != nullptr);
  std::remove(path.c_str());

  // Left of the plot frame (x < 66, between its top at 50 and bottom at h - 50) only the y tick
  // labels are drawn. Group the rows holding text pixels into bands, one per label.
  auto is_text = [&](int x, int y) {
    const unsigned char* p = px + 3 * (size_t(y) * size_t(w) + size_t(x));
    return p[0] == 30 && p[1] == 30 && p[2] == 30;
  };
  std::vector<size_t> band_pixels;
  bool in_band = false;
  for (int y = 50; y < h - 50; ++y) {
    size_t row = 0;
    for (int x = 0; x < 66; ++x) row += is_text(x, y);
    if (row > 0 && !in_band) band_pixels.push_back(0);
    if (row > 0) band_pixels.back() += row;
    in_band = row > 0;
  }
  stbi_image_free(px);

  const std::vector<std::string> labels = {"0.8", "0.6", "0.4"};  // top to bottom
  REQUIRE(band_pixels.size() == labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    CAPTURE(labels[i]);
    CHECK(glyph_pixels(labels[i]) > 10);
    CHECK(band_pixels[i] == glyph_pixels(labels[i]));
  }
}
