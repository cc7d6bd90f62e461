// `lockstep detokenize`: token ids back to text (raw bytes on stdout).
#include <cstdio>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {

int Detokenize(int argc, char** argv) {
  CLI::App app{"Token ids to text with a model's tokenizer", "detokenize"};
  std::string model;
  std::vector<std::string> args;
  bool special = false;
  app.add_option("-m,--model", model, "GGUF file holding tokenizer.* metadata")->required();
  app.add_option("ids", args, "ids, separated by spaces and/or commas (e.g. \"2,9259 236764\")")
      ->required();
  app.add_flag("--special", special, "render control tokens (e.g. <bos>) as text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto file = gguf::File::Open(model);
  if (!file.ok()) {
    std::fprintf(stderr, "lockstep detokenize: %s\n", file.status().message().c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    std::fprintf(stderr, "lockstep detokenize: %s\n", tok.status().message().c_str());
    return 1;
  }
  std::vector<int32_t> ids;
  for (std::string a : args) {
    for (char& c : a)
      if (c == ',') c = ' ';
    std::istringstream in(a);
    std::string w;
    while (in >> w) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(w, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != w.size() || v < 0 || v >= (*tok)->n_tokens()) {
        std::fprintf(stderr, "lockstep detokenize: '%s' is not a token id in [0, %d)\n", w.c_str(),
                     (*tok)->n_tokens());
        return 2;
      }
      ids.push_back(static_cast<int32_t>(v));
    }
  }
  const std::string s = (*tok)->Decode(ids, special);
  std::fwrite(s.data(), 1, s.size(), stdout);
  return 0;
}

}  // namespace lockstep::cli
