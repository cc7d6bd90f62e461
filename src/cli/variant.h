// Which released Gemma 4 model a config describes, from its shape alone (never from names).
#pragma once

#include <string>

#include "model/config.h"

namespace lockstep::cli {

// "E2B", "E4B", "12B", "26B-A4B", "31B" when layers, width, per-layer embeddings and experts
// match a released model; a description of the shape otherwise (e.g. "unknown dense, 6 layers x
// 320"), and "assistant (MTP drafter)" for drafters.
std::string VariantName(const model::ModelConfig& c);

}  // namespace lockstep::cli
