// Renders training progress: a one-line bar redrawn in place on a terminal,
// plain log lines at each log interval otherwise (CI logs, pipes, files).
#pragma once

#include <chrono>

#include "tenax/train/progress.h"

namespace tenax::cli {

class ProgressRenderer {
 public:
  // `interactive`: draw a bar on stderr (use when stderr is a terminal).
  explicit ProgressRenderer(bool interactive) : interactive_(interactive) {}
  void operator()(const TrainProgress& p);
  // Ends the bar's line, if one is drawn.
  void Finish();

 private:
  bool interactive_;
  bool bar_drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

// True when stderr is a terminal that can redraw a line.
bool StderrIsInteractive();

}  // namespace tenax::cli
