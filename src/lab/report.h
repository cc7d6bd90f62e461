// The lab commands' outputs: one JSON object each and a table readable at 100 columns.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/accept.h"
#include "lab/diverge.h"
#include "lab/identity_diff.h"
#include "lab/logprobs.h"
#include "lab/probe.h"

namespace lockstep::tokenizer {
class Tokenizer;
}

namespace lockstep::lab {

// logprobs
nlohmann::json LogprobsJson(const std::vector<PositionStats>& rows,
                            const tokenizer::Tokenizer* tok);
std::string LogprobsText(const std::vector<PositionStats>& rows, const tokenizer::Tokenizer* tok,
                         bool only_ties);

// diverge: `fork` is null without a model (or when the streams do not fork).
struct DivergeInput {
  std::string name_a, name_b;
  std::vector<int32_t> a, b;
  Divergence d;
  const ForkAnalysis* fork = nullptr;
  std::string fork_note;  // why there is no fork analysis
  int around = 8;         // tokens of text shown on each side of the fork
};
nlohmann::json DivergeJson(const DivergeInput& in, const tokenizer::Tokenizer* tok);
std::string DivergeText(const DivergeInput& in, const tokenizer::Tokenizer* tok);

// accept: one cell per (stream, drafter).
struct AcceptCell {
  std::string stream, draft;
  AcceptResult result;
};
nlohmann::json AcceptJson(const std::vector<AcceptCell>& cells);
std::string AcceptText(const std::vector<AcceptCell>& cells, bool matrix);

// probe
nlohmann::json ProbeJson(const std::vector<ProbeMode>& modes, const tokenizer::Tokenizer* tok);
std::string ProbeText(const std::vector<ProbeMode>& modes, const tokenizer::Tokenizer* tok);

// identity-diff
nlohmann::json IdentityDiffJson(const std::vector<FieldDiff>& diffs);
std::string IdentityDiffText(const std::vector<FieldDiff>& diffs, const std::string& a,
                             const std::string& b);

// Fork margins as JSON (shared by diverge and probe).
nlohmann::json ForkJson(const ForkAnalysis& f, const tokenizer::Tokenizer* tok);

}  // namespace lockstep::lab
