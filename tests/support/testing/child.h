// Child processes for end-to-end tests that can never outlive their test or hang the suite.
#pragma once

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::testing {

// fork + exec of argv[0] with stdout (and stderr when `merge_stderr`) on `out_fd`. The child is
// killed when the test process dies (PR_SET_PDEATHSIG), so a test that fails, or is killed by
// ctest's timeout, leaves no process holding ctest's output pipe open. -1 if fork fails.
inline pid_t Spawn(std::vector<std::string> argv, int out_fd, bool merge_stderr) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  ::dup2(out_fd, 1);
  if (merge_stderr) ::dup2(out_fd, 2);
  ::close(out_fd);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

// Reads what is available on `fd` into *out, waiting at most `wait`; false at end of file or
// when nothing came in time (`ended`, when given, tells which: true at end of file).
inline bool ReadSome(int fd, std::string* out, std::chrono::milliseconds wait,
                     bool* ended = nullptr) {
  if (ended) *ended = false;
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n <= 0) {
    if (ended) *ended = true;
    return false;
  }
  out->append(buf, static_cast<size_t>(n));
  return true;
}

// Waits for `pid` to exit; after `deadline` it is killed (SIGKILL). Returns the wait status.
inline int WaitOrKill(pid_t pid, std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

}  // namespace lockstep::testing
