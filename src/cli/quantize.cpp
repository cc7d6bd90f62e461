// `lockstep quantize`: argument parsing, a stderr progress bar and Ctrl-C handling around
// quant::QuantizeModel.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/interrupt.h"
#include "cli/prompt_text.h"
#include "quant/model_quantize.h"

namespace lockstep::cli {
namespace {

constexpr const char* kUsage =
    "usage: lockstep quantize IN.gguf OUT.gguf TYPE [--threads N] [--allow-requantize] [-q]\n"
    "\n"
    "Rewrites a GGUF model with its matrices in a llama.cpp-style quantization mix (no importance\n"
    "matrix). Norms, scales, the MoE router, rope_freqs and other 1-D tensors stay as they are.\n"
    "TYPE: F16, BF16, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, Q2_K (case-insensitive).\n"
    "The output is written to a temporary file next to OUT.gguf and renamed on success; Ctrl-C\n"
    "removes it.\n"
    "\n"
    "  --threads N         rows quantized in parallel (default 1; the output bytes do not depend\n"
    "                      on N)\n"
    "  --allow-requantize  also quantize tensors that are already quantized, from their\n"
    "                      dequantized values (two roundings compound; refused without it)\n"
    "  -q, --quiet         no progress bar (drawn only when stderr is a terminal)\n";

void DrawProgress(const quant::QuantizeProgress& p) {
  const double frac =
      p.total_out ? static_cast<double>(p.bytes_out) / static_cast<double>(p.total_out) : 1.0;
  const int width = 30, fill = static_cast<int>(frac * width);
  std::fprintf(stderr, "\r[%.*s%*s] tensor %zu/%zu, %.2f/%.2f MiB out (%.2f MiB in)", fill,
               "==============================", width - fill, "", p.tensor, p.n_tensors,
               static_cast<double>(p.bytes_out) / (1 << 20),
               static_cast<double>(p.total_out) / (1 << 20),
               static_cast<double>(p.bytes_in) / (1 << 20));
  if (p.tensor == p.n_tensors) std::fprintf(stderr, "\n");
}

}  // namespace

int Quantize(int argc, char** argv) {
  std::string paths[3];
  int n_pos = 0, threads = 1;
  bool quiet = false, allow_requantize = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--threads" && i + 1 < argc) {
      try {
        threads = std::stoi(argv[++i]);
      } catch (...) {
        threads = 0;
      }
      if (threads < 1 || threads > 1024) {
        std::fprintf(stderr, "lockstep quantize: --threads %s: expected 1..1024\n", argv[i]);
        return 2;
      }
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (a == "--allow-requantize") {
      allow_requantize = true;
    } else if (!a.empty() && a[0] != '-' && n_pos < 3) {
      paths[n_pos++] = a;
    } else {
      std::fprintf(stderr, "lockstep quantize: unexpected argument '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (n_pos != 3) {
    std::fprintf(stderr, "lockstep quantize: IN.gguf OUT.gguf TYPE are required\n\n%s", kUsage);
    return 2;
  }
  const auto mix = quant::MixFromName(paths[2]);
  if (!mix) {
    std::fprintf(stderr, "lockstep quantize: unknown TYPE '%s'; valid types: %s\n",
                 paths[2].c_str(), quant::ValidMixNames().c_str());
    return 2;
  }
  InterruptGuard guard(InterruptGuard::Scope::kUntilExit);
  quant::QuantizeOptions opts;
  opts.threads = threads;
  opts.allow_requantize = allow_requantize;
  opts.cancel = guard.flag();
  // Redrawn with \r: only on a terminal, never into a log file or a pipe.
  if (!quiet && StderrIsTerminal()) opts.progress = DrawProgress;
  const Status s = quant::QuantizeModel(paths[0], paths[1], *mix, opts);
  // Written or not is decided by the rename alone: an interrupt after it still wrote the file.
  if (!s.ok() && guard.interrupted()) {
    std::fprintf(stderr, "\nlockstep quantize: interrupted; %s not written\n", paths[1].c_str());
    return 130;
  }
  if (!s.ok()) return Fail(s);
  if (!quiet) std::fprintf(stderr, "wrote %s (%s)\n", paths[1].c_str(), paths[2].c_str());
  return 0;
}

}  // namespace lockstep::cli
