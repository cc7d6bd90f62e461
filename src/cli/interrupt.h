// Ctrl-C and SIGTERM during a long write (quantize, convert): the handler only sets a flag the
// writer checks, so the temporary file is removed and the command reports what happened.
#pragma once

#include <atomic>
#include <csignal>

namespace lockstep::cli {

// Installs the handler for the guard's lifetime (restoring the previous one after) and exposes
// the flag it sets. A signal handler can only reach static storage: the flag is the one piece
// of process state, lock-free and only ever set by the handler.
class InterruptGuard {
 public:
  // kUntilExit leaves the handler installed after the guard ends. A command whose exit status
  // says whether a file was written needs it: a signal between the restore and the process's
  // exit would otherwise kill it by signal after the rename had already written the file.
  enum class Scope { kRestoreAfter, kUntilExit };
  explicit InterruptGuard(Scope scope = Scope::kRestoreAfter);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  const std::atomic<bool>* flag() const;
  bool interrupted() const { return flag()->load(std::memory_order_relaxed); }

 private:
  Scope scope_;
  void (*old_int_)(int) = SIG_DFL;
  void (*old_term_)(int) = SIG_DFL;
};

}  // namespace lockstep::cli
