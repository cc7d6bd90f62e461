// The interrupt flag and its handler.
#include "cli/interrupt.h"

namespace lockstep::cli {
namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnInterrupt(int) {
  g_interrupted.store(true, std::memory_order_relaxed);
}

}  // namespace

InterruptGuard::InterruptGuard(Scope scope) : scope_(scope) {
  g_interrupted.store(false);
  old_int_ = std::signal(SIGINT, OnInterrupt);
  old_term_ = std::signal(SIGTERM, OnInterrupt);
}

InterruptGuard::~InterruptGuard() {
  if (scope_ == Scope::kUntilExit) return;
  std::signal(SIGINT, old_int_);
  std::signal(SIGTERM, old_term_);
}

const std::atomic<bool>* InterruptGuard::flag() const {
  return &g_interrupted;
}

}  // namespace lockstep::cli
