// Speculative decoding loop (being written; see issue 6).
#include "spec/generate.h"

namespace lockstep::spec {

Expected<GenerateResult> GenerateSpeculative(const model::Model&, const model::Model&,
                                             std::span<const int32_t>, const GenerateOptions&) {
  return Status::Error("speculative decoding is not implemented yet");
}

}  // namespace lockstep::spec
