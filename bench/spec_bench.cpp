// Decode speed with and without speculation on the CPU: tokens/s of the assistant drafter at
// K = 1..6 and of plain decoding of the same prompts, each prompt's plain run right before its
// speculative one, with speedup, acceptance and tokens per target pass, next to the machine's
// instruction-set level and measured read bandwidth. Checks that every speculative run
// emitted exactly the plain tokens. Options: kUsage below, or `spec_bench --help`.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bench_common.h"
#include "cli/common.h"
#include "core/status.h"
#include "engine/generate.h"
#include "model/model.h"
#include "quant/quant.h"
#include "read_bandwidth.h"
#include "testing/synthetic.h"
#include "testing/synthetic_assistant.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using namespace lockstep;

namespace {

constexpr bench::Usage kUsage{
    "spec_bench",
    "usage: spec_bench [TARGET DRAFT] [options]\n"
    "CPU decode with and without speculation, K = 1..kmax, each checked equal to plain.\n"
    "  TARGET DRAFT        the target and drafter models (default: the source tree's\n"
    "                      models/lockstep-code-{target,assistant}.gguf when present, else a\n"
    "                      synthetic MoE target and echo drafter written to the temp\n"
    "                      directory's lockstep-bench/)\n"
    "  --threads N         CPU threads (default 2)\n"
    "  --n N               greedy tokens per prompt (default 96)\n"
    "  --kmax K            largest draft length (default 6)\n"
    "  --prompts-file F    one JSON array of token ids or JSON string of text per line, as\n"
    "                      `lockstep generate --prompts-file` (default: four Python prompts)\n"
    "  -h, --help          print this and exit\n"};

const char* kPrompts[] = {
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def __init__(self):\n",
    "import unittest\n\n\nclass TestParse(unittest.TestCase):\n    def test_empty(self):\n",
    "import os\nimport sys\n\n\ndef main(argv):\n    parser = argparse.ArgumentParser(",
};

struct Paths {
  std::string target, draft;
  bool synthetic = false;
};

Paths DefaultPaths() {
  const fs::path m = fs::path(__FILE__).parent_path().parent_path() / "models";
  Paths p{(m / "lockstep-code-target.gguf").string(),
          (m / "lockstep-code-assistant.gguf").string()};
  if (fs::exists(p.target) && fs::exists(p.draft)) return p;
  const fs::path dir = fs::temp_directory_path() / "lockstep-bench";
  fs::create_directories(dir);
  model::SyntheticSpec t;  // a wider MoE target so the drafter is cheap next to it
  t.n_vocab = 2048;
  t.n_embd = 256;
  t.n_ff = 512;
  t.n_head = 8;
  t.n_layer = 12;
  t.n_expert = 8;
  t.n_expert_used = 2;
  t.n_ff_exp = 128;
  t.seed = 21;
  p = {(dir / "target.gguf").string(), (dir / "echo-draft.gguf").string(), true};
  if (!fs::exists(p.target) && !model::WriteSyntheticModel(t, p.target).ok()) std::exit(1);
  auto a = model::AssistantSpecFor(t);
  a.n_embd = a.n_bb;
  a.n_layer = 2;
  a.n_ff = 256;
  a.echo_target = p.target;
  a.echo_noise = 0.05f;
  if (!fs::exists(p.draft) && !model::WriteSyntheticAssistant(a, p.draft).ok()) std::exit(1);
  return p;
}

// --prompts-file, read as `lockstep generate --prompts-file` reads it.
std::vector<std::vector<int32_t>> PromptsFromFile(const std::string& path,
                                                  const model::Model& target) {
  auto tok = tokenizer::Tokenizer::FromGguf(target.file());
  auto prompts = cli::ReadPromptsFile(
      path,
      [&](const std::string& text, const std::string& where) -> Expected<std::vector<int32_t>> {
        if (!tok.ok())
          return Status::Errorf("{}: text prompt, but the model has no tokenizer", where);
        return (*tok)->Encode(text);
      });
  if (!prompts.ok()) std::fprintf(stderr, "%s\n", prompts.status().message().c_str()), std::exit(1);
  return *std::move(prompts);
}

std::vector<std::vector<int32_t>> Prompts(const model::Model& target) {
  std::vector<std::vector<int32_t>> out;
  auto tok = tokenizer::Tokenizer::FromGguf(target.file());
  for (int i = 0; i < 4; ++i) {
    if (tok.ok()) {
      out.push_back((*tok)->Encode(kPrompts[i]));
    } else {  // synthetic models carry no tokenizer: fixed pseudo-random ids
      std::vector<int32_t> p{2};
      for (int j = 0; j < 24; ++j)
        p.push_back((i * 977 + j * 131 + j * j * 7) % target.config().n_vocab);
      out.push_back(p);
    }
  }
  return out;
}

// One draft length over every prompt, each prompt decoded plainly right before its speculative
// run, so the speedup compares runs seconds apart (this VM's speed drifts over a minute).
struct KResult {
  double plain_ms = 0, spec_ms = 0;
  int64_t tokens = 0, rounds = 0, drafted = 0, accepted = 0;
  std::vector<int64_t> drafted_at, accepted_at;
  bool exact = true;
};

Expected<KResult> MeasureK(const model::Model& target, const model::Model& draft,
                           const std::vector<std::vector<int32_t>>& prompts,
                           const std::vector<std::vector<int32_t>>& ref,
                           engine::GenerateOptions opt, int k) {
  KResult m;
  m.drafted_at.assign(static_cast<size_t>(k), 0);
  m.accepted_at.assign(static_cast<size_t>(k), 0);
  opt.draft_max = k;
  opt.adaptive_draft = false;  // this bench measures each K as given
  for (size_t i = 0; i < prompts.size(); ++i) {
    LS_ASSIGN_OR_RETURN(auto plain, engine::Generate(target, nullptr, prompts[i], opt));
    LS_ASSIGN_OR_RETURN(auto r, engine::GenerateSpeculative(target, draft, prompts[i], opt));
    m.exact = m.exact && r.tokens == ref[i] && plain.tokens == ref[i];
    m.plain_ms += plain.generate_ms;
    m.spec_ms += r.generate_ms;
    m.tokens += static_cast<int64_t>(r.tokens.size());
    m.rounds += r.draft.rounds;
    m.drafted += r.draft.drafted;
    m.accepted += r.draft.accepted;
    for (int j = 0; j < k; ++j)
      m.drafted_at[j] += r.draft.drafted_at[j], m.accepted_at[j] += r.draft.accepted_at[j];
  }
  return m;
}

struct Options {
  int threads = 2, n_predict = 96, k_max = 6;
  std::string prompts_file;
  std::vector<std::string> paths;  // none or target and drafter
};

Options Parse(int argc, char** argv) {
  kUsage.HelpIfAsked(argc, argv);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (a == "--threads")
      o.threads = std::atoi(value());
    else if (a == "--n")
      o.n_predict = std::atoi(value());
    else if (a == "--kmax")
      o.k_max = std::atoi(value());
    else if (a == "--prompts-file")
      o.prompts_file = value();
    else if (a.rfind("-", 0) == 0)
      kUsage.Unknown(a);
    else
      o.paths.push_back(a);
  }
  if (!o.paths.empty() && o.paths.size() != 2)
    kUsage.Error("expected TARGET and DRAFT (two paths) or none, got " +
                 std::to_string(o.paths.size()));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  const int threads = o.threads, n_predict = o.n_predict, k_max = o.k_max;
  const Paths paths = o.paths.empty() ? DefaultPaths() : Paths{o.paths[0], o.paths[1]};
  backend::CpuBackend be(threads);
  auto target = model::Model::Load(paths.target, be);
  auto draft = model::Model::Load(paths.draft, be);
  if (!target.ok() || !draft.ok()) {
    std::fprintf(stderr, "load failed: %s\n",
                 (!target.ok() ? target.status() : draft.status()).message().c_str());
    return 1;
  }
  const auto prompts =
      o.prompts_file.empty() ? Prompts(**target) : PromptsFromFile(o.prompts_file, **target);
  std::printf("target %s\ndraft  %s%s\nthreads %d, %zu prompts, %d tokens each, greedy\n",
              paths.target.c_str(), paths.draft.c_str(), paths.synthetic ? " (synthetic echo)" : "",
              threads, prompts.size(), n_predict);
  std::printf("machine: %s kernels, read bandwidth %.1f GB/s at %d threads\n",
              std::string(quant::IsaName(quant::CpuIsa())).c_str(),
              ReadBandwidth().Measure(threads) / 1e9, threads);
  engine::GenerateOptions opt;
  opt.n_predict = n_predict;
  // Untimed warm-up (page cache, CPU clocks, worker threads) and the reference outputs.
  for (int i = 0; i < 2; ++i)
    if (!engine::Generate(**target, nullptr, prompts[0], opt).ok()) return 1;
  std::vector<std::vector<int32_t>> ref;
  for (const auto& p : prompts) {
    auto r = engine::Generate(**target, nullptr, p, opt);
    if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().message().c_str()), 1;
    ref.push_back(r->tokens);
  }
  std::printf("%-6s %9s %9s %8s %10s %10s %8s  %s\n", "mode", "tok/s", "plain", "speedup", "accept",
              "tok/pass", "exact", "accepted per draft position");
  for (int k = 1; k <= k_max; ++k) {
    auto m = MeasureK(**target, **draft, prompts, ref, opt, k);
    if (!m.ok()) return std::fprintf(stderr, "%s\n", m.status().message().c_str()), 1;
    std::string per;
    for (int j = 0; j < k; ++j) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.2f", j ? " " : "",
                    m->drafted_at[j] ? static_cast<double>(m->accepted_at[j]) /
                                           static_cast<double>(m->drafted_at[j])
                                     : 0.0);
      per += buf;
    }
    const double tps = 1000.0 * static_cast<double>(m->tokens) / m->spec_ms;
    const double plain_tps = 1000.0 * static_cast<double>(m->tokens) / m->plain_ms;
    std::printf(
        "K=%-4d %9.1f %9.1f %7.2fx %10.3f %10.2f %8s  %s\n", k, tps, plain_tps, tps / plain_tps,
        m->drafted ? static_cast<double>(m->accepted) / static_cast<double>(m->drafted) : 0.0,
        m->rounds ? static_cast<double>(m->tokens - static_cast<int64_t>(prompts.size())) /
                        static_cast<double>(m->rounds)
                  : 0.0,
        m->exact ? "yes" : "NO", per.c_str());
    if (!m->exact) return 2;
  }
  return 0;
}
