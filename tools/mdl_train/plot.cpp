// The chart writer: an RGB canvas with lines, rectangles, discs and text, axes with "nice" ticks
// (or decades, on the roofline's log axes).
#include "tools/mdl_train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include <stb/stb_image_write.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

#include "tensor/error.h"

namespace mdl::train {
namespace {

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kBlack{30, 30, 30}, kGrid{225, 225, 225};
// Colour-blind-friendly palette (Okabe-Ito).
constexpr Rgb kPalette[] = {{0, 114, 178},  {230, 159, 0}, {0, 158, 115},  {204, 121, 167},
                            {86, 180, 233}, {213, 94, 0},  {240, 228, 66}, {0, 0, 0}};

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(size_t(w) * size_t(h) * 3, 255) {}
  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    uint8_t* p = &px_[(size_t(y) * size_t(w_) + size_t(x)) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void rect(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y)
      for (int x = std::min(x0, x1); x <= std::max(x0, x1); ++x) set(x, y, c);
  }
  // A line `thick` pixels wide (DDA with square brushes).
  void line(double x0, double y0, double x1, double y1, Rgb c, int thick = 1) {
    const int steps = int(std::max(std::abs(x1 - x0), std::abs(y1 - y0))) + 1;
    for (int i = 0; i <= steps; ++i) {
      const double t = double(i) / steps;
      const int x = int(std::lround(x0 + t * (x1 - x0))), y = int(std::lround(y0 + t * (y1 - y0)));
      rect(x - thick / 2, y - thick / 2, x + (thick - 1) / 2, y + (thick - 1) / 2, c);
    }
  }
  void disc(int cx, int cy, int r, Rgb fill, Rgb edge) {
    for (int y = -r; y <= r; ++y)
      for (int x = -r; x <= r; ++x) {
        const int d2 = x * x + y * y;
        if (d2 <= r * r) set(cx + x, cy + y, d2 > (r - 1) * (r - 1) ? edge : fill);
      }
  }
  // Text with its top-left corner at (x, y), scaled by `scale` (stb_easy_font is ~7 px tall).
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1) {
    std::vector<char> buf(s.size() * 1024 + 64);  // up to about 12 quads of 64 bytes per glyph
    std::string copy = s;
    const int quads = stb_easy_font_print(0, 0, copy.data(), nullptr, buf.data(), int(buf.size()));
    for (int q = 0; q < quads; ++q) {
      const float* v0 = reinterpret_cast<const float*>(&buf[size_t(q) * 64]);
      const float* v2 = reinterpret_cast<const float*>(&buf[size_t(q) * 64 + 32]);
      rect(x + int(v0[0] * float(scale)), y + int(v0[1] * float(scale)), x + int(v2[0] * float(scale)) - 1,
           y + int(v2[1] * float(scale)) - 1, c);
    }
  }
  static int text_width(const std::string& s, int scale = 1) {
    std::string copy = s;
    return stb_easy_font_width(copy.data()) * scale;
  }
  void save(const std::string& path) const {
    MDL_CHECK(stbi_write_png(path.c_str(), w_, h_, 3, px_.data(), w_ * 3), "plot: cannot write PNG '", path, "'");
  }
  int w_, h_;

 private:
  std::vector<uint8_t> px_;
};

// About `target` round tick values covering [lo, hi] (1, 2 or 5 times a power of ten).
std::vector<double> nice_ticks(double lo, double hi, int target = 6) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

struct Frame {
  int left, top, right, bottom;
};

void draw_title_and_labels(Canvas& c, const ChartOptions& o, const Frame& f) {
  c.text((c.w_ - Canvas::text_width(o.title, 2)) / 2, 10, o.title, kBlack, 2);
  c.text((f.left + f.right - Canvas::text_width(o.x_label)) / 2, c.h_ - 22, o.x_label, kBlack);
  c.text(8, f.top - 16, o.y_label, kBlack);
}

void check_options(const std::string& path, const ChartOptions& o) {
  MDL_CHECK(o.width >= 200 && o.height >= 150 && o.width <= 8000 && o.height <= 8000, "plot '", path, "': size ",
            o.width, "x", o.height, " is outside 200x150 .. 8000x8000");
}

}  // namespace

void line_chart(const std::string& path, const std::vector<Series>& series, const ChartOptions& o) {
  check_options(path, o);
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (auto& s : series) {
    MDL_CHECK(s.x.size() == s.y.size(), "plot '", path, "': series '", s.name, "' has ", s.x.size(), " x values and ",
              s.y.size(), " y values");
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]))
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]), y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // nothing to draw: empty axes
  if (x1 == x0) x1 = x0 + 1;
  const double pad = y1 > y0 ? (y1 - y0) * 0.05 : 0.5;
  y0 -= pad, y1 += pad;

  Canvas c(o.width, o.height);
  const Frame f{70, 50, o.width - 190, o.height - 50};
  auto px = [&](double x) { return f.left + (x - x0) / (x1 - x0) * (f.right - f.left); };
  auto py = [&](double y) { return f.bottom - (y - y0) / (y1 - y0) * (f.bottom - f.top); };
  for (double t : nice_ticks(y0, y1)) {
    c.line(f.left, py(t), f.right, py(t), kGrid);
    c.text(f.left - 8 - Canvas::text_width(fmt(t)), int(py(t)) - 4, fmt(t), kBlack);
  }
  for (double t : nice_ticks(x0, x1)) {
    c.line(px(t), f.top, px(t), f.bottom, kGrid);
    c.text(int(px(t)) - Canvas::text_width(fmt(t)) / 2, f.bottom + 8, fmt(t), kBlack);
  }
  c.line(f.left, f.bottom, f.right, f.bottom, kBlack);
  c.line(f.left, f.top, f.left, f.bottom, kBlack);
  for (size_t k = 0; k < series.size(); ++k) {
    const Rgb col = kPalette[k % std::size(kPalette)];
    const Series& s = series[k];
    bool have_prev = false;
    double qx = 0, qy = 0;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        have_prev = false;
        continue;
      }
      const double X = px(s.x[i]), Y = py(s.y[i]);
      if (have_prev) c.line(qx, qy, X, Y, col, 2);
      c.rect(int(X) - 2, int(Y) - 2, int(X) + 2, int(Y) + 2, col);
      qx = X, qy = Y, have_prev = true;
    }
    const int ly = f.top + 10 + int(k) * 18;
    c.rect(f.right + 15, ly, f.right + 35, ly + 3, col);
    c.text(f.right + 42, ly - 3, s.name, kBlack);
  }
  draw_title_and_labels(c, o, f);
  c.save(path);
}

void bar_chart(const std::string& path, const std::vector<std::string>& labels, const std::vector<double>& values,
               const ChartOptions& o) {
  check_options(path, o);
  MDL_CHECK(labels.size() == values.size(), "plot '", path, "': ", labels.size(), " labels for ", values.size(),
            " values");
  double top = 0;
  for (double v : values) {
    MDL_CHECK(std::isfinite(v) && v >= 0, "plot '", path, "': bar values must be finite and non-negative, got ", v);
    top = std::max(top, v);
  }
  if (top == 0) top = 1;
  int label_w = 0;
  for (auto& l : labels) label_w = std::max(label_w, Canvas::text_width(l));
  Canvas c(o.width, o.height);
  const Frame f{std::min(label_w + 20, o.width / 2), 50, o.width - 70, o.height - 50};
  auto px = [&](double v) { return f.left + v / (top * 1.05) * (f.right - f.left); };
  for (double t : nice_ticks(0, top * 1.05)) {
    c.line(px(t), f.top, px(t), f.bottom, kGrid);
    c.text(int(px(t)) - Canvas::text_width(fmt(t)) / 2, f.bottom + 8, fmt(t), kBlack);
  }
  const int n = int(values.size());
  const double slot = n ? double(f.bottom - f.top) / n : 0;
  for (int i = 0; i < n; ++i) {
    const int ya = f.top + int(slot * i + slot * 0.15), yb = f.top + int(slot * (i + 1) - slot * 0.15);
    c.rect(f.left, ya, int(px(values[size_t(i)])), yb, kPalette[size_t(i) % std::size(kPalette)]);
    c.text(f.left - 10 - Canvas::text_width(labels[size_t(i)]), (ya + yb) / 2 - 4, labels[size_t(i)], kBlack);
    c.text(int(px(values[size_t(i)])) + 5, (ya + yb) / 2 - 4, fmt(values[size_t(i)]), kBlack);
  }
  c.line(f.left, f.top, f.left, f.bottom, kBlack);
  draw_title_and_labels(c, o, f);
  c.save(path);
}

namespace {

// Powers of ten from below lo to above hi.
std::pair<double, double> decades(double lo, double hi) {
  const double a = std::floor(std::log10(lo)), b = std::ceil(std::log10(hi));
  return {a, b > a ? b : a + 1};
}

}  // namespace

void roofline_chart(const std::string& path, const std::vector<Roof>& roofs, const std::vector<RooflinePoint>& points,
                    const ChartOptions& o) {
  check_options(path, o);
  MDL_CHECK(!roofs.empty(), "plot '", path, "': a roofline chart needs at least one roof");
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = 0, y_lo = x_lo, y_hi = 0;
  for (const Roof& r : roofs) {
    MDL_CHECK(std::isfinite(r.peak_gflops) && std::isfinite(r.bandwidth_gbs) && r.peak_gflops > 0 &&
                  r.bandwidth_gbs > 0,
              "plot '", path, "': roof '", r.name, "' needs a positive peak and bandwidth, got ", r.peak_gflops,
              " GFLOP/s and ", r.bandwidth_gbs, " GB/s");
    const double ridge = r.peak_gflops / r.bandwidth_gbs;
    x_lo = std::min(x_lo, ridge / 10), x_hi = std::max(x_hi, ridge * 10);
    y_hi = std::max(y_hi, r.peak_gflops * 2);
  }
  for (const RooflinePoint& p : points) {
    MDL_CHECK(std::isfinite(p.intensity) && std::isfinite(p.gflops) && p.intensity > 0 && p.gflops > 0 &&
                  p.share >= 0 && p.share <= 1,
              "plot '", path, "': kernel '", p.name, "' needs a positive intensity and rate and a share in [0, 1]");
    x_lo = std::min(x_lo, p.intensity / 2), x_hi = std::max(x_hi, p.intensity * 2);
    y_lo = std::min(y_lo, p.gflops / 2), y_hi = std::max(y_hi, p.gflops * 2);
  }
  for (const Roof& r : roofs) y_lo = std::min(y_lo, std::max(r.bandwidth_gbs * x_lo, y_hi / 1e6));
  // Named variables, not structured bindings: clang 14 (the fuzz build) cannot capture those in a lambda.
  const std::pair<double, double> xd = decades(x_lo, x_hi), yd = decades(y_lo, y_hi);
  const double lx0 = xd.first, lx1 = xd.second, ly0 = yd.first, ly1 = yd.second;

  int legend = 0;
  for (const Roof& r : roofs) legend = std::max(legend, Canvas::text_width(r.name));
  Canvas c(o.width, o.height);
  const Frame f{70, 50, o.width - std::min(legend + 60, o.width / 3), o.height - 50};
  auto px = [&](double x) { return f.left + (std::log10(x) - lx0) / (lx1 - lx0) * (f.right - f.left); };
  auto py = [&](double y) { return f.bottom - (std::log10(y) - ly0) / (ly1 - ly0) * (f.bottom - f.top); };
  for (double e = ly0; e <= ly1; ++e) {
    const double y = py(std::pow(10.0, e));
    c.line(f.left, y, f.right, y, kGrid);
    c.text(f.left - 8 - Canvas::text_width(fmt(std::pow(10.0, e))), int(y) - 4, fmt(std::pow(10.0, e)), kBlack);
  }
  for (double e = lx0; e <= lx1; ++e) {
    const double x = px(std::pow(10.0, e));
    c.line(x, f.top, x, f.bottom, kGrid);
    c.text(int(x) - Canvas::text_width(fmt(std::pow(10.0, e))) / 2, f.bottom + 8, fmt(std::pow(10.0, e)), kBlack);
  }
  c.line(f.left, f.bottom, f.right, f.bottom, kBlack);
  c.line(f.left, f.top, f.left, f.bottom, kBlack);

  const double y_min = std::pow(10.0, ly0), y_max = std::pow(10.0, ly1);
  for (size_t k = 0; k < roofs.size(); ++k) {
    const Roof& r = roofs[k];
    const Rgb col = kPalette[k % std::size(kPalette)];
    constexpr int kSteps = 400;
    double qx = 0, qy = 0;
    for (int i = 0; i <= kSteps; ++i) {
      const double x = std::pow(10.0, lx0 + (lx1 - lx0) * i / kSteps);
      const double y = std::clamp(std::min(r.peak_gflops, x * r.bandwidth_gbs), y_min, y_max);
      if (i) c.line(qx, qy, px(x), py(y), col, k == 0 ? 3 : 2);
      qx = px(x), qy = py(y);
    }
    const int ly = f.top + 10 + int(k) * 18;
    c.rect(f.right + 15, ly, f.right + 35, ly + (k == 0 ? 3 : 2), col);
    c.text(f.right + 42, ly - 3, r.name, kBlack);
  }

  // Largest first, so a small kernel's disc stays visible on top of a large one's.
  std::vector<size_t> order(points.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return points[a].share > points[b].share; });
  constexpr size_t kLabelled = 12;
  for (size_t rank = 0; rank < order.size(); ++rank) {
    const RooflinePoint& p = points[order[rank]];
    const int cx = int(px(p.intensity)), cy = int(py(p.gflops));
    const int radius = 3 + int(std::lround(22 * std::sqrt(p.share)));
    c.disc(cx, cy, radius, kPalette[(rank + roofs.size()) % std::size(kPalette)], kBlack);
  }
  // Each label right of its disc, else below, above or left of it, wherever it overlaps no label drawn yet.
  struct Box {
    int x0, y0, x1, y1;
  };
  std::vector<Box> labels;
  for (size_t rank = 0; rank < order.size() && rank < kLabelled; ++rank) {
    const RooflinePoint& p = points[order[rank]];
    const int radius = 3 + int(std::lround(22 * std::sqrt(p.share)));
    const int cx = int(px(p.intensity)), cy = int(py(p.gflops)), w = Canvas::text_width(p.name);
    const Box candidates[] = {{cx + radius + 3, cy - 4, cx + radius + 3 + w, cy + 6},
                              {cx - w / 2, cy + radius + 3, cx + w - w / 2, cy + radius + 13},
                              {cx - w / 2, cy - radius - 13, cx + w - w / 2, cy - radius - 3},
                              {cx - radius - 3 - w, cy - 4, cx - radius - 3, cy + 6}};
    Box chosen = candidates[0];
    for (const Box& b : candidates)
      if (std::none_of(labels.begin(), labels.end(),
                       [&](const Box& l) { return b.x0 < l.x1 && l.x0 < b.x1 && b.y0 < l.y1 && l.y0 < b.y1; })) {
        chosen = b;
        break;
      }
    labels.push_back(chosen);
    c.text(chosen.x0, chosen.y0, p.name, kBlack);
  }
  draw_title_and_labels(c, o, f);
  c.save(path);
}

}  // namespace mdl::train
