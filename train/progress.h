// The per-epoch progress line: on a terminal one line redrawn in place (step, loss, accuracy,
// samples/s, ETA, data-wait %); elsewhere (logs, CI) a plain line every tenth of the epoch.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace mdl::train {

class Progress {
 public:
  // to_terminal: redraw in place (mdl-train passes isatty(stderr) && --progress).
  Progress(std::FILE* out, bool to_terminal, int64_t epoch, int64_t epochs, int64_t steps);
  void update(int64_t step, double loss, double accuracy, double samples_per_s, double wait_fraction);
  // Whether update(step, ...) would draw: on a terminal at most every 0.2 s (and the last step),
  // elsewhere every tenth of the epoch. What it draws may then be read from a GPU.
  bool due(int64_t step) const;
  void finish();  // ends the redrawn line

 private:
  std::FILE* out_;
  bool terminal_;
  int64_t epoch_, epochs_, steps_, next_plain_ = 0;
  std::chrono::steady_clock::time_point start_, drawn_{};
};

std::string format_seconds(double s);  // "4.2s", "3m05s", "1h02m"

}  // namespace mdl::train
