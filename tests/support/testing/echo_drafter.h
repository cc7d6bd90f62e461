// An "echo" assistant for a synthetic target: its first draft is close to the target's own
// greedy choice, so speculative tests see realistic, mixed acceptance.
#pragma once

#include <filesystem>
#include <string>

#include "testing/models.h"
#include "testing/synthetic_assistant.h"

namespace lockstep::testing {

// Writes (once per machine) the echo drafter of the target fixture `target_name` built from
// `spec`, and returns its path ("" on failure).
inline std::string EchoDraftPath(const std::string& target_name, const model::SyntheticSpec& spec) {
  const std::string target = SyntheticPath(target_name, spec);
  const auto path =
      std::filesystem::temp_directory_path() / "lockstep-tests" / (target_name + "-echo.gguf");
  if (!std::filesystem::exists(path)) {
    auto a = model::AssistantSpecFor(spec);
    a.n_embd = a.n_bb;
    a.n_layer = 2;
    a.echo_target = target;
    a.echo_noise = 0.05f;
    if (!model::WriteSyntheticAssistant(a, ScratchPath(path)).ok()) return "";
    std::filesystem::rename(ScratchPath(path), path);
  }
  return path.string();
}

}  // namespace lockstep::testing
