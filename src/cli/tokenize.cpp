// `lockstep tokenize`: text to token ids with a model's (vocab-only or full) GGUF tokenizer.
#include <cstdio>
#include <iostream>
#include <iterator>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {

int Tokenize(int argc, char** argv) {
  CLI::App app{"Text to token ids with a model's tokenizer (llama.cpp gemma4 rules)", "tokenize"};
  std::string model, text;
  bool ids = false, pieces = false, as_json = false, no_bos = false, parse_special = false;
  app.add_option("-m,--model", model, "GGUF file holding tokenizer.* metadata")->required();
  app.add_option("text", text, "text to tokenize; '-' reads stdin")->required();
  auto* g = app.add_option_group("format");
  g->add_flag("--ids", ids, "space-separated ids (default)");
  g->add_flag("--pieces", pieces, "one 'id<TAB>\"piece\"' line per token");
  g->add_flag("--json", as_json, "JSON: {\"ids\": [...], \"pieces\": [...]}");
  g->require_option(0, 1);
  app.add_flag("--no-bos", no_bos, "do not prepend BOS");
  app.add_flag("--parse-special", parse_special,
               "match control-token text such as <|turn> (user-defined tokens always match)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), {});
  auto file = gguf::File::Open(model);
  if (!file.ok()) {
    std::fprintf(stderr, "lockstep tokenize: %s\n", file.status().message().c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    std::fprintf(stderr, "lockstep tokenize: %s\n", tok.status().message().c_str());
    return 1;
  }
  const auto out = (*tok)->Encode(text, !no_bos, parse_special);
  // Pieces are shown with control tokens rendered and JSON escaping, so every byte is visible.
  auto piece = [&](int32_t id) { return (*tok)->TokenToPiece(id, true); };
  const auto esc = [](const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  if (as_json) {
    nlohmann::json j;
    j["ids"] = out;
    j["pieces"] = nlohmann::json::array();
    for (int32_t id : out) j["pieces"].push_back(piece(id));
    std::printf("%s\n", DumpJson(j).c_str());
  } else if (pieces) {
    for (int32_t id : out) std::printf("%d\t%s\n", id, esc(piece(id)).c_str());
  } else {
    for (size_t i = 0; i < out.size(); ++i) std::printf(i ? " %d" : "%d", out[i]);
    std::printf("\n");
  }
  return 0;
}

}  // namespace lockstep::cli
