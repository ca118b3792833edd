// Progress: a bar and the running figures.
#include "train/progress.h"

#include <algorithm>
#include <cmath>

namespace mdl::train {

std::string format_seconds(double s) {
  char b[32];
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 60) std::snprintf(b, sizeof b, "%.1fs", s);
  else if (s < 3600) std::snprintf(b, sizeof b, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(b, sizeof b, "%dh%02dm", int(s) / 3600, int(s) / 60 % 60);
  return b;
}

Progress::Progress(std::FILE* out, bool to_terminal, int64_t epoch, int64_t epochs, int64_t steps)
    : out_(out), terminal_(to_terminal), epoch_(epoch), epochs_(epochs), steps_(std::max<int64_t>(1, steps)),
      start_(std::chrono::steady_clock::now()) {}

bool Progress::due(int64_t step) const {
  if (step >= steps_) return true;
  if (!terminal_) return step >= next_plain_;
  return std::chrono::steady_clock::now() - drawn_ >= std::chrono::milliseconds(200);
}

void Progress::update(int64_t step, double loss, double accuracy, double samples_per_s, double wait_fraction) {
  if (!terminal_) {
    if (step < next_plain_ && step != steps_) return;
    next_plain_ = step + std::max<int64_t>(1, steps_ / 10);
  }
  drawn_ = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = step > 0 ? elapsed / double(step) * double(steps_ - step) : NAN;
  constexpr int kWidth = 24;
  const int filled = int(kWidth * std::min<int64_t>(step, steps_) / steps_);
  std::string bar(1, '[');
  bar.append(size_t(filled), '=').append(size_t(kWidth - filled), ' ').push_back(']');
  std::fprintf(out_, "%sepoch %lld/%lld %s %lld/%lld loss %.4f acc %.2f%% %.0f samples/s ETA %s wait %.1f%%%s",
               terminal_ ? "\r" : "", (long long)epoch_, (long long)epochs_, bar.c_str(), (long long)step,
               (long long)steps_, loss, 100 * accuracy, samples_per_s, format_seconds(eta).c_str(), 100 * wait_fraction,
               terminal_ ? "\033[K" : "\n");
  std::fflush(out_);
}

void Progress::finish() {
  if (terminal_) std::fprintf(out_, "\n"), std::fflush(out_);
}

}  // namespace mdl::train
