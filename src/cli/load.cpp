// Backend, target, tokenizer and drafter loading shared by the generating commands.
#include "cli/load.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "cli/common.h"
#include "engine/engine.h"

namespace lockstep::cli {

Expected<LoadedModels> LoadModels(const LoadOptions& opt) {
  LoadedModels m;
  LS_ASSIGN_OR_RETURN(m.backend, CreateBackend(opt.device, opt.threads));
  if (opt.gpu_layers >= 0 && m.backend->name() == "cpu")
    std::fprintf(stderr, "lockstep: -ngl %d ignored: running on the CPU (--device cpu)\n",
                 opt.gpu_layers);
  m.model_path = opt.model.empty() ? DefaultModelPath("target") : opt.model;
  LS_ASSIGN_OR_RETURN(m.target, model::Model::Load(m.model_path, *m.backend));
  LS_RETURN_IF_ERROR(engine::RequireTarget(*m.target));  // every command fails at load
  LS_ASSIGN_OR_RETURN(m.tokenizer, ModelTokenizer(*m.target));
  if (!opt.draft.empty()) {
    LS_ASSIGN_OR_RETURN(m.draft, model::Model::Load(opt.draft, *m.backend));
    LS_ASSIGN_OR_RETURN(m.assistant, model::Assistant::Pair(*m.target, *m.draft));
    m.proposer = std::make_unique<speculative::AssistantProposer>(*m.assistant, opt.max_drafting);
  }
  return m;
}

}  // namespace lockstep::cli
