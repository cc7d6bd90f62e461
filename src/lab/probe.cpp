// The four probe modes, each a list of runs of one prompt, reduced to a unique-output count.
#include "lab/probe.h"

#include <algorithm>
#include <memory>
#include <set>

#include "backend/backend.h"
#include "engine/generate.h"
#include "model/model.h"

namespace lockstep::lab {
namespace {

engine::GenerateOptions GenOptions(const ProbeOptions& opt) {
  engine::GenerateOptions g;
  g.n_predict = opt.n_predict;
  g.sampling = opt.sampling;
  g.stop_tokens = opt.stop_tokens;
  return g;
}

ProbeRun FromResult(std::string label, Expected<engine::GenerateResult> r) {
  ProbeRun run{std::move(label), {}, {}};
  if (r.ok())
    run.tokens = std::move(r->tokens);
  else
    run.error = r.status().message();
  return run;
}

// The prompts decoded together by one engine (prefill chunks of 64 rows, so steps mix
// sequences); the generated ids of each, in prompt order.
Expected<std::vector<std::vector<int32_t>>> DecodeTogether(
    const model::Model& m, const std::vector<std::vector<int32_t>>& prompts,
    const ProbeOptions& opt) {
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  engine::Options eo;
  eo.n_seq_max = static_cast<int>(prompts.size());
  eo.n_ctx = static_cast<int>(longest) + opt.n_predict;
  eo.prefill_chunk = 64;
  LS_ASSIGN_OR_RETURN(auto eng, engine::Engine::Create(m, nullptr, eo));
  std::vector<engine::Request> reqs;
  for (const auto& p : prompts) reqs.push_back(engine::ToRequest(p, GenOptions(opt), false));
  LS_ASSIGN_OR_RETURN(auto results, engine::RunAll(*eng, std::move(reqs)));
  std::vector<std::vector<int32_t>> out;
  for (auto& r : results) out.push_back(std::move(r.tokens));
  return out;
}

// (a) The prompt alone, then at a varying slot among width-1 filler prompts.
std::vector<ProbeRun> BatchWidth(const model::Model& m, const ProbeOptions& opt) {
  std::vector<ProbeRun> runs;
  for (int w = 1; w <= opt.max_width; ++w) {
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i + 1 < w; ++i)
      prompts.push_back(opt.fillers[static_cast<size_t>(i) % opt.fillers.size()]);
    const int slot = w / 2;  // not always first: the slot must not matter either
    prompts.insert(prompts.begin() + slot, opt.prompt);
    auto r = DecodeTogether(m, prompts, opt);
    ProbeRun run{fmt::format("width {} (slot {})", w, slot), {}, {}};
    if (r.ok())
      run.tokens = (*r)[static_cast<size_t>(slot)];
    else
      run.error = r.status().message();
    runs.push_back(std::move(run));
  }
  return runs;
}

// (b) N sequential requests in one process, then N copies side by side in one batch.
std::vector<ProbeRun> Duplicates(const model::Model& m, const ProbeOptions& opt) {
  std::vector<ProbeRun> runs;
  for (int i = 0; i < opt.duplicates; ++i)
    runs.push_back(FromResult(fmt::format("request {}", i + 1),
                              engine::Generate(m, nullptr, opt.prompt, GenOptions(opt))));
  std::vector<std::vector<int32_t>> copies(static_cast<size_t>(opt.duplicates), opt.prompt);
  auto r = DecodeTogether(m, copies, opt);
  for (int i = 0; i < opt.duplicates; ++i) {
    ProbeRun run{fmt::format("batch copy {}", i + 1), {}, {}};
    if (r.ok())
      run.tokens = (*r)[static_cast<size_t>(i)];
    else
      run.error = r.status().message();
    runs.push_back(std::move(run));
  }
  return runs;
}

// (c) K = 0 is plain decoding; K >= 1 drafts K tokens per round.
std::vector<ProbeRun> Speculation(const model::Model& m, const model::Model& d,
                                  const ProbeOptions& opt) {
  std::vector<ProbeRun> runs;
  runs.push_back(
      FromResult("K=0 (plain)", engine::Generate(m, nullptr, opt.prompt, GenOptions(opt))));
  for (int k = 1; k <= opt.max_k; ++k) {
    engine::GenerateOptions g = GenOptions(opt);
    g.draft_max = k;
    g.adaptive_draft = false;  // K itself is what this mode varies
    runs.push_back(
        FromResult(fmt::format("K={}", k), engine::GenerateSpeculative(m, d, opt.prompt, g)));
  }
  return runs;
}

// (d) A fresh backend and model per thread count.
std::vector<ProbeRun> Threads(const ProbeOptions& opt) {
  std::vector<ProbeRun> runs;
  for (int t = 1; t <= opt.max_threads; ++t) {
    auto be = backend::Create("cpu", t);
    auto m = model::Model::Load(opt.model_path, *be);
    if (!m.ok()) {
      runs.push_back({fmt::format("threads {}", t), {}, m.status().message()});
      continue;
    }
    runs.push_back(FromResult(fmt::format("threads {}", t),
                              engine::Generate(**m, nullptr, opt.prompt, GenOptions(opt))));
  }
  return runs;
}

}  // namespace

void SummarizeMode(const model::Model& m, std::span<const int32_t> prompt,
                   const AnalyzeOptions& analyze, ProbeMode* mode) {
  std::set<std::vector<int32_t>> distinct;
  for (const auto& r : mode->runs)
    if (r.error.empty()) distinct.insert(r.tokens);
  mode->unique = static_cast<int>(distinct.size());
  const ProbeRun* ref = nullptr;
  for (const auto& r : mode->runs)
    if (r.error.empty()) {
      ref = &r;
      break;
    }
  if (!ref) return;
  for (size_t i = 0; i < mode->runs.size(); ++i) {
    const ProbeRun& r = mode->runs[i];
    if (!r.error.empty() || r.tokens == ref->tokens) continue;
    mode->differing_run = static_cast<int>(i);
    mode->divergence = FirstDivergence(ref->tokens, r.tokens);
    auto f = AnalyzeFork(m, prompt, ref->tokens, r.tokens, mode->divergence, analyze);
    if (f.ok())
      mode->fork = *f;
    else
      mode->fork_error = f.status().message();
    return;
  }
}

Expected<std::vector<ProbeMode>> RunProbe(const ProbeOptions& opt) {
  if (opt.prompt.empty()) return Status::Error("probe: the prompt has no tokens");
  if (opt.fillers.empty()) return Status::Error("probe: no filler prompts for the batch mode");
  auto be = backend::Create("cpu", opt.threads);
  LS_ASSIGN_OR_RETURN(auto target, model::Model::Load(opt.model_path, *be));
  std::unique_ptr<model::Model> draft;
  if (!opt.draft_path.empty()) {
    LS_ASSIGN_OR_RETURN(draft, model::Model::Load(opt.draft_path, *be));
  }
  std::vector<ProbeMode> modes;
  for (const std::string& name : opt.modes) {
    ProbeMode mode;
    mode.name = name;
    if (name == "batch")
      mode.runs = BatchWidth(*target, opt);
    else if (name == "duplicates")
      mode.runs = Duplicates(*target, opt);
    else if (name == "threads")
      mode.runs = Threads(opt);
    else if (name == "speculation") {
      if (!draft) continue;  // needs --draft
      mode.runs = Speculation(*target, *draft, opt);
    } else {
      return Status::Errorf("probe: unknown mode '{}' (batch, duplicates, speculation, threads)",
                            name);
    }
    SummarizeMode(*target, opt.prompt, opt.analyze, &mode);
    modes.push_back(std::move(mode));
  }
  return modes;
}

int ProbeExitCode(std::span<const ProbeMode> modes) {
  int rc = 0;
  for (const ProbeMode& m : modes) {
    for (const ProbeRun& r : m.runs)
      if (!r.error.empty()) return 2;
    if (m.unique > 1) rc = 1;
  }
  return rc;
}

}  // namespace lockstep::lab
