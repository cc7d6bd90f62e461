// One sequence's state inside the engine (private to src/engine).
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "engine/engine.h"

namespace lockstep::engine {

struct Stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double Ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  void Restart() { t0 = std::chrono::steady_clock::now(); }
};

struct Engine::Seq {
  Seq(SeqId seq_id, Request r) : id(seq_id), req(std::move(r)) { result.id = seq_id; }

  // Takes a slot: sizes every per-sequence buffer once, so its steps allocate nothing.
  void Start(int slot_index, int engine_draft_max) {
    slot = slot_index;
    history = req.prompt;
    history.reserve(req.prompt.size() + static_cast<size_t>(req.n_predict));
    result.tokens.reserve(static_cast<size_t>(req.n_predict));
    drafts.reserve(static_cast<size_t>(engine_draft_max));
    if (req.draft_max > 0) result.rounds.reserve(static_cast<size_t>(req.n_predict));
    policy = speculative::DraftLengthPolicy(req.draft_max, req.adaptive_draft);
    timer.Restart();
  }
  int remaining() const { return req.n_predict - static_cast<int>(result.tokens.size()); }

  SeqId id;
  Request req;
  SeqResult result;
  int slot = -1;
  std::vector<int32_t> history;  // prompt, then emitted tokens
  int n_cached = 0;              // positions [0, n_cached) of the slot hold this sequence's rows
  bool decoding = false;         // the prompt is cached and the first token emitted
  int32_t last = 0;              // last emitted token: at position n_cached, not yet cached
  speculative::DraftLengthPolicy policy;
  std::vector<int32_t> drafts;  // this step's drafts
  // This step's rows in the target batch: [row_begin, row_begin + n_rows), outputs from out_begin.
  int row_begin = 0, n_rows = 0, out_begin = 0, n_out = 0;
  std::optional<engine::Finish> ending;  // set by Emit, applied after the step
  Stopwatch timer;
};

}  // namespace lockstep::engine
