// A target whose greedy choices rest on the last bits of the logits, so a negative control that
// changes a reduction order changes tokens (random fixtures have margins too wide to notice).
#pragma once

#include <string>

namespace lockstep::testing {

// The dense fixture with near-tied token pairs (row 2k+1 = row 2k plus one-ulp-scale noise) and
// no softcap. Written once per machine under the temp dir; "" on failure.
std::string NearTieTarget();

}  // namespace lockstep::testing
