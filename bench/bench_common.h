// Command-line, timing and byte-count helpers shared by the benchmarks.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "model/model.h"

namespace lockstep::bench {

// True when the command line asks for the usage (`--help` or `-h`, anywhere): checked before
// any option is parsed, so the request is never taken for an option's value.
inline bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  return false;
}

// One bench's usage text and the ways its command line ends early. A bench can run for minutes
// or write a model file before its first line of output, so help exits 0 before any of that,
// and a typo or a missing value exits 2 naming the option, never benchmarking a default instead.
struct Usage {
  const char* program;  // prefixes error lines
  const char* text;     // "usage: ..." then each option, its meaning and its default

  // Prints the usage to stdout and exits 0 when the command line asks for it.
  void HelpIfAsked(int argc, char** argv) const {
    if (!WantsHelp(argc, argv)) return;
    std::fputs(text, stdout);
    std::exit(0);
  }

  // What was wrong, then the usage, on stderr; exit status 2 (a usage error).
  [[noreturn]] void Error(const std::string& what) const {
    std::fprintf(stderr, "%s: %s\n%s", program, what.c_str(), text);
    std::exit(2);
  }

  [[noreturn]] void Unknown(const std::string& arg) const { Error("unknown option " + arg); }

  // A positive integer option value, or a usage error naming the option.
  int PositiveInt(const std::string& option, const char* s) const {
    const int n = std::atoi(s);
    if (n < 1) Error(option + ": '" + s + "' is not a positive integer");
    return n;
  }

  // A comma-separated list of positive integers ("1,4,16"), or a usage error naming the option.
  std::vector<int> PositiveInts(const std::string& option, const std::string& s) const {
    std::vector<int> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');)
      out.push_back(PositiveInt(option, item.c_str()));
    if (out.empty()) Error(option + ": an empty list");
    return out;
  }

  // The value of the option at argv[*i], moving *i onto it. A following "--option" counts as
  // missing: `--model --threads 2` is a forgotten path, not a model named "--threads".
  const char* Value(int argc, char** argv, int* i) const {
    if (*i + 1 >= argc || std::strncmp(argv[*i + 1], "--", 2) == 0)
      Error(std::string("option ") + argv[*i] + " needs a value");
    return argv[++*i];
  }
};

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Weight bytes one decode step reads: every tensor except the per-layer embedding table, of
// which a single row is gathered (token_embd is read whole: it is the tied output projection),
// and of each MoE expert stack only the n_expert_used experts a token selects.
inline double WeightBytesPerToken(const model::Model& m) {
  const model::ModelConfig& c = m.config();
  const double expert_share =
      c.n_expert > 0 ? static_cast<double>(c.n_expert_used) / c.n_expert : 1.0;
  double b = 0;
  for (const auto& t : m.file().tensors()) {
    if (t.name == "per_layer_token_embd.weight") continue;
    const bool experts = t.name.find("_exps.weight") != std::string::npos;
    b += static_cast<double>(t.nbytes) * (experts ? expert_share : 1.0);
  }
  return b;
}

// The process's resident memory in GiB (/proc/self/statm; 0 where it cannot be read).
inline double ResidentGiB() {
  long pages = 0, resident = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
                      (1 << 30)
                : 0;
}

// f32 K and V bytes attention reads for a query at position `pos`.
inline double KvBytesPerToken(const model::ModelConfig& c, int pos) {
  double b = 0;
  for (const auto& l : c.layers) {
    const int n = l.sliding ? std::min(pos + 1, c.n_swa) : pos + 1;
    b += 2.0 * n * l.n_head_kv * l.head_dim * 4.0;
  }
  return b;
}

}  // namespace lockstep::bench
