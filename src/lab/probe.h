// Determinism probe: the same prompt decoded under batch widths, duplication, speculation
// depths and thread counts; counts unique outputs and explains any difference at its fork.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "lab/diverge.h"
#include "model/model.h"
#include "sample/sampler.h"

namespace lockstep::lab {

struct ProbeOptions {
  std::string model_path;
  std::string draft_path;  // empty: the speculation mode is skipped
  std::vector<int32_t> prompt;
  std::vector<std::vector<int32_t>> fillers;  // other prompts that share the batch
  int n_predict = 32;
  sample::Settings sampling;
  std::vector<int32_t> stop_tokens;
  int max_width = 8;    // (a) widths 1..max_width
  int duplicates = 4;   // (b) copies
  int max_k = 8;        // (c) K = 0..max_k
  int max_threads = 2;  // (d) threads 1..max_threads
  int threads = 2;      // threads for modes a-c
  std::vector<std::string> modes = {"batch", "duplicates", "speculation", "threads"};
  AnalyzeOptions analyze;
};

struct ProbeRun {
  std::string label;
  std::vector<int32_t> tokens;
  std::string error;  // the run failed (its tokens are empty and it is not counted)
};

struct ProbeMode {
  std::string name;
  std::vector<ProbeRun> runs;  // runs[0] is the reference
  int unique = 0;              // distinct outputs among runs without error
  // The first run that differs from the reference, where, and the margins there.
  int differing_run = -1;
  Divergence divergence;
  std::optional<ForkAnalysis> fork;
  std::string fork_error;
};

Expected<std::vector<ProbeMode>> RunProbe(const ProbeOptions& opt);

// Fills mode->unique and, when a run differs from the first successful one, the divergence
// and the margins at its fork (teacher-forced by `model` after `prompt`).
void SummarizeMode(const model::Model& model, std::span<const int32_t> prompt,
                   const AnalyzeOptions& analyze, ProbeMode* mode);

// diff's convention for `lab probe`: 0 every mode gave one output, 1 some mode gave several,
// 2 a run failed (whatever else happened).
int ProbeExitCode(std::span<const ProbeMode> modes);

}  // namespace lockstep::lab
