#include "progress_bar.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tenax::cli {
namespace {

std::string FormatDuration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

bool StderrIsInteractive() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDERR_FILENO) && term && std::strcmp(term, "dumb") != 0;
}

void ProgressRenderer::operator()(const TrainProgress& p) {
  if (!interactive_) {
    if (p.log_point) {
      spdlog::info("epoch {}/{} step {}/{} loss {:.4f} {:.0f} samples/s ETA {}", p.epoch, p.epochs, p.step_in_epoch,
                   p.steps_per_epoch, p.loss, p.samples_per_second, FormatDuration(p.eta_seconds));
    }
    if (p.test_accuracy) {
      spdlog::info("epoch {}/{} done: train loss {:.4f}, test accuracy {:.4f}", p.epoch, p.epochs, p.loss,
                   *p.test_accuracy);
    }
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const bool epoch_end = p.test_accuracy.has_value();
  if (!epoch_end && bar_drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 24;
  const double frac = static_cast<double>(p.step_in_epoch) / static_cast<double>(p.steps_per_epoch);
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar;
  for (int i = 0; i < kWidth; ++i) bar += i < filled ? "\u2588" : "\u2591";
  std::fprintf(stderr, "\r\033[Kepoch %lld/%lld %s %3.0f%% step %lld/%lld loss %.4f %6.0f samples/s ETA %s",
               static_cast<long long>(p.epoch), static_cast<long long>(p.epochs), bar.c_str(), frac * 100,
               static_cast<long long>(p.step_in_epoch), static_cast<long long>(p.steps_per_epoch), p.loss,
               p.samples_per_second, FormatDuration(p.eta_seconds).c_str());
  bar_drawn_ = true;
  if (epoch_end) {
    std::fprintf(stderr, "  test accuracy %.4f\n", *p.test_accuracy);
    bar_drawn_ = false;
  }
  std::fflush(stderr);
}

void ProgressRenderer::Finish() {
  if (bar_drawn_) std::fprintf(stderr, "\n");
  bar_drawn_ = false;
}

}  // namespace tenax::cli
