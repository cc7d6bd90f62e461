// The `lockstep` executable: dispatches to a subcommand.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/commands.h"
#include "core/version.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

constexpr Command kCommands[] = {
    {"generate", lockstep::cli::Generate, "generate text with a Gemma 4 model (optionally speculative)"},
    {"chat", lockstep::cli::Chat, "interactive multi-turn chat through the model's chat template"},
    {"inspect", lockstep::cli::Inspect, "print a GGUF file's metadata, tensors and model config"},
    {"convert", lockstep::cli::Convert, "convert a Hugging Face Gemma 4 checkpoint to GGUF"},
    {"quantize", lockstep::cli::Quantize, "quantize a GGUF model"},
    {"tokenize", lockstep::cli::Tokenize, "text to token ids with a model's tokenizer"},
    {"detokenize", lockstep::cli::Detokenize, "token ids to text"},
    {"serve", lockstep::cli::Serve, "OpenAI- and llama-server-compatible HTTP server"},
    {"lab", lockstep::cli::Lab, "experiments: logprobs, diverge, accept, probe, identity-diff"},
};

void Usage(FILE* out) {
  std::fprintf(out, "lockstep %s (%s): exact Gemma 4 inference\n\nusage: lockstep COMMAND [options]\n\ncommands:\n",
               lockstep::Version(), lockstep::GitHash());
  for (const auto& c : kCommands) std::fprintf(out, "  %-11s %s\n", c.name, c.help);
  std::fprintf(out, "\nRun `lockstep COMMAND --help` for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    Usage(stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("lockstep %s (%s)\n", lockstep::Version(), lockstep::GitHash());
    return 0;
  }
  for (const auto& c : kCommands)
    if (cmd == c.name) return c.run(argc - 1, argv + 1);
  std::fprintf(stderr, "lockstep: unknown command '%s'\n\n", argv[1]);
  Usage(stderr);
  return 2;
}
