// Loading a target model, its tokenizer and an optional assistant drafter: what every command
// that generates (generate, serve) does first, written once.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/status.h"
#include "model/assistant.h"
#include "model/model.h"
#include "speculative/proposer.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {

struct LoadOptions {
  std::string model;  // empty: the embedded default target
  std::string draft;  // empty: no speculation
  std::string device = "auto";
  int threads = 2;
  int gpu_layers = -1;   // llama.cpp's -ngl: accepted, noted when it cannot apply
  int max_drafting = 1;  // sequences drafting together (sizes the proposer's workspace)
};

// Members are declared so that destruction runs proposer -> assistant -> models -> backend.
struct LoadedModels {
  std::unique_ptr<backend::Backend> backend;
  std::string model_path;
  std::unique_ptr<model::Model> target;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // null when the model carries none
  std::unique_ptr<model::Model> draft;
  std::unique_ptr<model::Assistant> assistant;
  std::unique_ptr<speculative::AssistantProposer> proposer;  // null without a drafter
};

Expected<LoadedModels> LoadModels(const LoadOptions& opt);

}  // namespace lockstep::cli
