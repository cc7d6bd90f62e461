// `lockstep convert`: argument parsing and a stderr progress bar around convert::ConvertHfToGguf.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/prompt_text.h"
#include "convert/convert.h"

namespace lockstep::cli {
namespace {

constexpr const char* kUsage =
    "usage: lockstep convert HF_DIR -o FILE.gguf [--outtype f32|f16|bf16] [--no-tokenizer] [-q]\n"
    "\n"
    "Converts a Hugging Face Gemma 4 checkpoint (config.json + model.safetensors or a sharded\n"
    "model.safetensors.index.json, optional tokenizer.json/tokenizer_config.json) to GGUF with\n"
    "llama.cpp's tensor names and metadata. Supported model_type: gemma4 (text part of\n"
    "Gemma4ForConditionalGeneration), gemma4_text, gemma4_assistant (MTP drafter; the centroid\n"
    "head is kept as masked_embd_centroids.weight / masked_embd_ordering), and the 12B's\n"
    "gemma4_unified, gemma4_unified_text and gemma4_unified_assistant.\n"
    "\n"
    "  -o, --output FILE   output GGUF (written to a unique temporary beside it, renamed on "
    "success)\n"
    "  --outtype T         f32 (default), f16 or bf16 for matrices; vectors stay f32\n"
    "  --no-tokenizer      do not add tokenizer.* keys even if tokenizer.json exists\n"
    "  -q, --quiet         no progress bar (drawn only on a terminal) or notes\n";

// Redraws only when the whole percentage changes, so small tensors do not flood the terminal.
struct ProgressBar {
  int last = -1;
  void operator()(uint64_t done, uint64_t total) {
    const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    const int pct = static_cast<int>(frac * 100.0);
    if (pct == last) return;
    last = pct;
    const int width = 40, fill = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r[%.*s%*s] %3d%% of %.2f MiB", fill,
                 "========================================", width - fill, "", pct,
                 static_cast<double>(total) / (1 << 20));
    if (done == total) std::fprintf(stderr, "\n");
  }
};

}  // namespace

int Convert(int argc, char** argv) {
  convert::ConvertOptions opts;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if ((a == "-o" || a == "--output") && i + 1 < argc) {
      opts.out_path = argv[++i];
    } else if (a == "--outtype" && i + 1 < argc) {
      const std::string t = argv[++i];
      if (t == "f32")
        opts.outtype = DType::F32;
      else if (t == "f16")
        opts.outtype = DType::F16;
      else if (t == "bf16")
        opts.outtype = DType::BF16;
      else {
        std::fprintf(stderr, "lockstep convert: --outtype %s: expected f32, f16 or bf16\n",
                     t.c_str());
        return 2;
      }
    } else if (a == "--no-tokenizer") {
      opts.tokenizer = false;
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (!a.empty() && a[0] != '-' && opts.hf_dir.empty()) {
      opts.hf_dir = a;
    } else {
      std::fprintf(stderr, "lockstep convert: unexpected argument '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (opts.hf_dir.empty() || opts.out_path.empty()) {
    std::fprintf(stderr, "lockstep convert: HF_DIR and -o FILE are required\n\n%s", kUsage);
    return 2;
  }
  if (!quiet) {
    if (StderrIsTerminal()) opts.progress = ProgressBar{};  // \r redraws: terminals only
    opts.note = [](const std::string& s) {
      std::fprintf(stderr, "lockstep convert: %s\n", s.c_str());
    };
  }
  InterruptGuard guard(InterruptGuard::Scope::kUntilExit);
  opts.cancel = guard.flag();
  const Status s = convert::ConvertHfToGguf(opts);
  // Written or not is decided by the rename alone: an interrupt after it still wrote the file.
  if (!s.ok() && guard.interrupted()) {
    std::fprintf(stderr, "\nlockstep convert: interrupted; %s not written\n",
                 opts.out_path.c_str());
    return 130;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "lockstep convert: error: %s\n", s.message().c_str());
    return 1;
  }
  if (!quiet) std::fprintf(stderr, "lockstep convert: wrote %s\n", opts.out_path.c_str());
  return 0;
}

}  // namespace lockstep::cli
