// What `generate` and `chat` share: the model/sampling/speculation options (llama.cpp names,
// defaults shown in --help), and loading the backend, target, drafter and tokenizer.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "backend/backend.h"
#include "core/status.h"
#include "engine/generate.h"
#include "model/assistant.h"
#include "model/model.h"
#include "speculative/proposer.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {

struct RunArgs {
  std::string model, draft, device = "auto", chat_template_file;
  std::string cache_type_k = "f32", cache_type_v = "f32";
  int gpu_layers = -1;
  int n_predict = 64, threads = 1, ctx = 0, draft_max = 3, top_k = 0, repeat_last_n = 64;
  int ubatch = 512;  // prompt rows per forward pass (llama.cpp's default -ub)
  float temp = 0.0f, draft_p_min = 0.0f, top_p = 1.0f, min_p = 0.0f, repeat_penalty = 1.0f;
  int64_t seed = 0;
  bool no_hash = false, ignore_eos = false, fixed_draft = false;
  const CLI::Option* draft_option = nullptr;  // --draft given without a path: the default drafter
};

// Declares the shared options on `app`; threads default to the physical cores.
void AddRunOptions(CLI::App& app, RunArgs& a);

struct LoadedRun {
  std::unique_ptr<backend::Backend> backend;
  std::unique_ptr<model::Model> target, draft;
  std::unique_ptr<model::Assistant> assistant;
  std::unique_ptr<speculative::AssistantProposer> proposer;  // null without --draft
  std::unique_ptr<tokenizer::Tokenizer> tok;                 // null when the file has none
  std::string model_path;
  engine::GenerateOptions options;
};

// Resolves --device auto, loads everything, validates the options; `max_seqs` sizes the
// drafter's workspace.
Expected<LoadedRun> LoadRun(RunArgs& a, int max_seqs);

// The chat template: --chat-template-file when given, else the model's own.
Expected<std::string> ChatTemplateFor(const RunArgs& a, const tokenizer::Tokenizer* tok);

}  // namespace lockstep::cli
