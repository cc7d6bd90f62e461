// `lockstep lab`: experiments from lab reports as one command each (logprobs, diverge, accept,
// probe, identity-diff), each with a readable table and --json carrying a run identity.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/prompt_text.h"
#include "lab/report.h"
#include "lab/stream.h"
#include "model/assistant.h"
#include "model/model.h"
#include "speculative/proposer.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {

using nlohmann::json;

// Options shared by the commands that read a model and a stream.
struct Common {
  std::string model, device = "cpu";
  int threads = 2;
  bool json = false;
  // Stream inputs: files, inline ids or text; context: ids or text.
  std::vector<std::string> streams;
  std::string tokens, text, prompt, prompt_tokens;
  int top_k = 5;
  double tie = 0.1;
  bool no_hash = false;
};

void AddModel(CLI::App* app, Common& c) {
  app->add_option("-m,--model", c.model, "target model GGUF (default: the embedded default model)");
  app->add_option("-t,--threads", c.threads, "CPU threads (never changes results)")
      ->check(CLI::Range(1, 256));
  app->add_option("--device", c.device,
                  "backend: cpu (default), cuda, or auto (cuda when a GPU is present)");
  app->add_flag("--json", c.json,
                "print one JSON object (with the run identity) instead of tables");
  app->add_flag("--no-hash", c.no_hash,
                "do not hash the model files for the identity block (as generate's --no-hash)");
}

// The identity record of a lab command; the model hashes follow --no-hash.
RunRecord LabRecord(const Common& c, std::string command, std::string model, std::string draft,
                    std::string backend, int threads, std::string device) {
  RunRecord rec{std::move(command), std::move(model), std::move(draft), std::move(backend),
                threads};
  rec.device = std::move(device);
  rec.hash_files = !c.no_hash;
  return rec;
}

void AddStream(CLI::App* app, Common& c, bool many) {
  auto* s = app->add_option("--stream", c.streams,
                            "stream file: [ids], lockstep generate --json, llama-server "
                            "/completion response (tokens)");
  if (!many) s->expected(0, 1);
  app->add_option("--tokens", c.tokens, "stream as comma-separated token ids");
  app->add_option("-p,--text", c.text,
                  "stream as text (encoded with the model's tokenizer, BOS first)");
  app->add_option("--prompt", c.prompt, "context before the stream, as text (BOS first)");
  app->add_option("--prompt-tokens", c.prompt_tokens, "context before the stream, as token ids");
}

void AddMargins(CLI::App* app, Common& c) {
  app->add_option("-k,--top-k", c.top_k, "top tokens listed per position")
      ->check(CLI::Range(1, 100));
  app->add_option("--tie", c.tie, "near-tie threshold on the top-1/top-2 logprob margin (nats)")
      ->check(FiniteNumber())
      ->check(CLI::NonNegativeNumber);
}

// A loaded target with its tokenizer (when the file has one).
struct Loaded {
  std::unique_ptr<backend::Backend> be;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::string path;
};

Expected<Loaded> LoadTarget(const Common& c) {
  Loaded l;
  l.path = c.model.empty() ? DefaultModelPath("target") : c.model;
  LS_ASSIGN_OR_RETURN(l.be, CreateBackend(c.device, c.threads));
  LS_ASSIGN_OR_RETURN(l.model, model::Model::Load(l.path, *l.be));
  LS_ASSIGN_OR_RETURN(l.tok, ModelTokenizer(*l.model));
  return l;
}

Expected<std::vector<int32_t>> Context(const Common& c, const tokenizer::Tokenizer* tok) {
  if (!c.prompt_tokens.empty()) return ParseIdList(c.prompt_tokens, "--prompt-tokens");
  if (c.prompt.empty()) return std::vector<int32_t>{};
  if (!tok) return Status::Error("--prompt: the model has no tokenizer; use --prompt-tokens");
  return tok->Encode(c.prompt);
}

// Every stream given (files, --tokens, --text); an explicit context overrides a file's own.
Expected<std::vector<lab::Stream>> Streams(const Common& c, const tokenizer::Tokenizer* tok) {
  std::vector<lab::Stream> out;
  for (const auto& f : c.streams) {
    LS_ASSIGN_OR_RETURN(lab::Stream s, lab::LoadStreamFile(f));
    s.source = std::filesystem::path(f).filename().string();
    out.push_back(std::move(s));
  }
  if (!c.tokens.empty()) {
    lab::Stream s;
    LS_ASSIGN_OR_RETURN(s.tokens, ParseIdList(c.tokens, "--tokens"));
    s.source = "--tokens";
    out.push_back(std::move(s));
  }
  if (!c.text.empty()) {
    if (!tok) return Status::Error("--text: the model has no tokenizer; use --tokens");
    out.push_back({{}, tok->Encode(c.text), "--text"});
  }
  if (out.empty()) return Status::Error("give a stream: --stream FILE, --tokens IDS or -p TEXT");
  LS_ASSIGN_OR_RETURN(auto ctx, Context(c, tok));
  if (!c.prompt.empty() || !c.prompt_tokens.empty())
    for (auto& s : out) s.prompt = ctx;
  return out;
}

void Print(const Common& c, json j, const std::string& text) {
  if (c.json)
    std::printf("%s\n", DumpJson(j).c_str());
  else
    std::fputs(text.c_str(), stdout);
}

int Logprobs(const Common& c, bool only_ties) {
  auto l = LoadTarget(c);
  if (!l.ok()) return Fail(l.status());
  auto streams = Streams(c, l->tok.get());
  if (!streams.ok()) return Fail(streams.status());
  if (streams->size() != 1) return Fail(Status::Error("logprobs takes exactly one stream"));
  const lab::Stream& s = streams->front();
  lab::AnalyzeOptions opt{c.top_k, c.tie};
  auto rows = lab::TeacherForce(*l->model, s.prompt, s.tokens, opt);
  if (!rows.ok()) return Fail(rows.status());
  json j = lab::LogprobsJson(*rows, l->tok.get());
  std::vector<int32_t> all = s.prompt;
  all.insert(all.end(), s.tokens.begin(), s.tokens.end());
  j["stream"] = {
      {"source", s.source}, {"n_context", s.prompt.size()}, {"n_tokens", s.tokens.size()}};
  RunRecord rec = LabRecord(c, "lab logprobs", l->path, "", l->be->name(), l->be->threads(),
                            l->be->device_name());
  j["identity"] = IdentityJson(
      rec, {{"top_k", c.top_k}, {"tie", c.tie}, {"stream", s.source}, {"context_tokens", s.prompt}},
      s.prompt, all);
  Print(c, j, lab::LogprobsText(*rows, l->tok.get(), only_ties));
  return 0;
}

// Commands that compare (diverge, probe, identity-diff) follow diff's exit codes: 0 the same,
// 1 different, 2 trouble.
int FailDiff(const Status& s) {
  Fail(s);
  return 2;
}

int Diverge(const Common& c, const std::string& fa, const std::string& fb, int around) {
  auto a = lab::LoadStreamFile(fa);
  if (!a.ok()) return FailDiff(a.status());
  auto b = lab::LoadStreamFile(fb);
  if (!b.ok()) return FailDiff(b.status());
  lab::DivergeInput in{std::filesystem::path(fa).filename().string(),
                       std::filesystem::path(fb).filename().string(),
                       a->tokens,
                       b->tokens,
                       lab::FirstDivergence(a->tokens, b->tokens),
                       nullptr,
                       "",
                       around};
  std::optional<Loaded> l;
  std::optional<lab::ForkAnalysis> fork;
  // The context before the streams: --prompt/--prompt-tokens when given, else the files' own.
  std::vector<int32_t> context = !a->prompt.empty() ? a->prompt : b->prompt;
  if (!c.model.empty()) {
    auto loaded = LoadTarget(c);
    if (!loaded.ok()) return FailDiff(loaded.status());
    l = std::move(*loaded);
    auto ctx = Context(c, l->tok.get());
    if (!ctx.ok()) return FailDiff(ctx.status());
    if (!ctx->empty()) context = std::move(*ctx);
    if (!in.d.identical) {
      auto f = lab::AnalyzeFork(*l->model, context, a->tokens, b->tokens, in.d, {c.top_k, c.tie});
      if (f.ok())
        fork = *f, in.fork = &*fork;
      else
        in.fork_note = f.status().message();
    }
  } else if (!in.d.identical) {
    in.fork_note = "give -m MODEL for the margins at the fork";
  }
  const tokenizer::Tokenizer* tok = l ? l->tok.get() : nullptr;
  json j = lab::DivergeJson(in, tok);
  RunRecord rec = LabRecord(c, "lab diverge", l ? l->path : "", "", "cpu", c.threads, "");
  j["identity"] =
      IdentityJson(rec, {{"a", in.name_a}, {"b", in.name_b}, {"top_k", c.top_k}, {"tie", c.tie}},
                   context, a->tokens);
  Print(c, j, lab::DivergeText(in, tok));
  return in.d.identical ? 0 : 1;
}

int Accept(const Common& c, const std::vector<std::string>& drafts, int draft_max, float p_min,
           int segment, bool matrix) {
  if (drafts.empty()) return Fail(Status::Error("accept: give at least one --draft FILE"));
  auto l = LoadTarget(c);
  if (!l.ok()) return Fail(l.status());
  auto streams = Streams(c, l->tok.get());
  if (!streams.ok()) return Fail(streams.status());
  std::vector<std::unique_ptr<model::Model>> dmodels;
  std::vector<std::unique_ptr<model::Assistant>> assistants;
  for (const auto& d : drafts) {
    auto m = model::Model::Load(d, *l->be);
    if (!m.ok()) return Fail(m.status());
    auto a = model::Assistant::Pair(*l->model, **m);
    if (!a.ok()) return Fail(a.status());
    dmodels.push_back(std::move(*m));
    assistants.push_back(std::move(*a));
  }
  std::vector<lab::AcceptCell> cells;
  for (size_t si = 0; si < streams->size(); ++si)
    for (size_t di = 0; di < drafts.size(); ++di) {
      speculative::AssistantProposer proposer(*assistants[di], 1);
      lab::AcceptOptions opt;
      opt.draft_max = draft_max;
      opt.segment = segment;
      opt.p_min = p_min;
      const auto& s = (*streams)[si];
      auto r = lab::MeasureAcceptance(*l->model, proposer, s.prompt, s.tokens, opt);
      if (!r.ok()) return Fail(r.status().WithContext(s.source));
      cells.push_back(
          {s.source, std::filesystem::path(drafts[di]).filename().string(), std::move(*r)});
    }
  json j = lab::AcceptJson(cells);
  RunRecord rec = LabRecord(c, "lab accept", l->path, drafts.front(), l->be->name(),
                            l->be->threads(), l->be->device_name());
  json settings = {
      {"draft_max", draft_max}, {"draft_p_min", p_min}, {"segment", segment}, {"drafts", drafts}};
  for (const auto& s : *streams) {
    settings["streams"].push_back(s.source);
    settings["context_tokens"].push_back(s.prompt);
  }
  std::vector<int32_t> first = streams->front().prompt;
  first.insert(first.end(), streams->front().tokens.begin(), streams->front().tokens.end());
  j["identity"] = IdentityJson(rec, settings, streams->front().prompt, first);
  matrix = matrix || streams->size() > 1 || drafts.size() > 1;
  Print(c, j, lab::AcceptText(cells, matrix));
  return 0;
}

struct ProbeArgs {
  std::string draft;
  int n_predict = 32, width = 8, dup = 4, max_k = 8, max_threads = 0;
  std::vector<std::string> modes;
};

// Other prompts that share the batch with the probed one: short code and prose texts when the
// model has a tokenizer, fixed pseudo-random ids otherwise.
std::vector<std::vector<int32_t>> Fillers(const tokenizer::Tokenizer* tok, int n_vocab) {
  static const char* kTexts[] = {
      "def add(a, b):\n    return a + b\n",      "The quick brown fox jumps over the lazy dog.",
      "for (int i = 0; i < n; ++i) {",           "SELECT name FROM users WHERE id = 7;",
      "# TODO: handle the empty case",           "Write a haiku about compilers.",
      "import numpy as np\nx = np.zeros((3, 3))"};
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 7; ++i) {
    if (tok) {
      out.push_back(tok->Encode(kTexts[i]));
    } else {
      std::vector<int32_t> ids;
      for (int k = 0; k < 3 + 2 * i; ++k) ids.push_back((i * 97 + k * 31 + 5) % n_vocab);
      out.push_back(ids);
    }
  }
  return out;
}

int Probe(const Common& c, const ProbeArgs& p) {
  auto l = LoadTarget(c);
  if (!l.ok()) return FailDiff(l.status());
  auto streams = Streams(c, l->tok.get());  // the prompt comes in as the "stream"
  if (!streams.ok()) return FailDiff(streams.status());
  lab::ProbeOptions opt;
  opt.model_path = l->path;
  opt.draft_path = p.draft;
  opt.prompt = streams->front().prompt;
  opt.prompt.insert(opt.prompt.end(), streams->front().tokens.begin(),
                    streams->front().tokens.end());
  opt.fillers = Fillers(l->tok.get(), l->model->config().n_vocab);
  opt.n_predict = p.n_predict;
  opt.max_width = p.width;
  opt.duplicates = p.dup;
  opt.max_k = p.max_k;
  opt.max_threads = p.max_threads > 0
                        ? p.max_threads
                        : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  opt.threads = c.threads;
  if (!p.modes.empty()) opt.modes = p.modes;
  // Asked for by name, the speculation mode needs a drafter (by default it is skipped without).
  if (p.draft.empty() && std::find(p.modes.begin(), p.modes.end(), "speculation") != p.modes.end())
    return FailDiff(Status::Error("probe: --modes speculation needs --draft D.gguf"));
  opt.analyze = {c.top_k, c.tie};
  l->model.reset();  // the probe loads its own copies
  auto modes = lab::RunProbe(opt);
  if (!modes.ok()) return FailDiff(modes.status());
  json j = lab::ProbeJson(*modes, l->tok.get());
  std::vector<int32_t> ref;
  if (!modes->empty() && !modes->front().runs.empty()) ref = modes->front().runs.front().tokens;
  RunRecord rec =
      LabRecord(c, "lab probe", l->path, p.draft, l->be->name(), c.threads, l->be->device_name());
  j["identity"] = IdentityJson(rec,
                               {{"n_predict", p.n_predict},
                                {"width", p.width},
                                {"duplicates", p.dup},
                                {"max_k", p.max_k},
                                {"max_threads", opt.max_threads},
                                {"modes", opt.modes},
                                {"prompt_tokens", opt.prompt}},
                               opt.prompt, ref);
  Print(c, j, lab::ProbeText(*modes, l->tok.get()));
  return lab::ProbeExitCode(*modes);
}

int IdentityDiff(const Common& c, const std::string& fa, const std::string& fb) {
  auto a = lab::LoadJsonFile(fa);
  if (!a.ok()) return FailDiff(a.status());
  auto b = lab::LoadJsonFile(fb);
  if (!b.ok()) return FailDiff(b.status());
  const auto diffs = lab::DiffIdentity(*a, *b);
  Print(c, lab::IdentityDiffJson(diffs), lab::IdentityDiffText(diffs, fa, fb));
  return diffs.empty() ? 0 : 1;
}

}  // namespace

int Lab(int argc, char** argv) {
  CLI::App app{
      "Lab experiments over token streams: each answers one question from a lab report "
      "with one command.",
      "lockstep lab"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows every default
  Common c;
  c.threads = PhysicalCores();  // as generate's -t
  bool only_ties = false, matrix = false;
  std::string fa, fb;
  int around = 8, draft_max = 3, segment = 64;
  float p_min = 0.0f;
  std::vector<std::string> drafts;
  ProbeArgs pa;

  auto* lp =
      app.add_subcommand("logprobs", "teacher-forced logprob, rank, top-k and margin per position");
  AddModel(lp, c), AddStream(lp, c, false), AddMargins(lp, c);
  lp->add_flag("--ties-only", only_ties, "list only near-tie positions (the summary counts all)");

  auto* dv = app.add_subcommand("diverge", "first position where two streams differ, and why");
  dv->add_option("a", fa, "first stream file")->required();
  dv->add_option("b", fb, "second stream file")->required();
  AddModel(dv, c), AddMargins(dv, c);
  dv->add_option("--prompt", c.prompt, "context before the streams, as text");
  dv->add_option("--prompt-tokens", c.prompt_tokens, "context before the streams, as token ids");
  dv->add_option("--around", around, "tokens of text shown on each side of the fork");

  auto* ac =
      app.add_subcommand("accept", "forced-stream acceptance of drafters along fixed streams");
  AddModel(ac, c), AddStream(ac, c, true);
  ac->add_option("--draft,--model-draft", drafts,
                 "assistant drafter GGUF (repeat for several; also -md)");
  ac->add_option("--draft-max,--spec-draft-n-max", draft_max, "tokens drafted per round")
      ->check(CLI::Range(1, 32));
  ac->add_option("--draft-p-min", p_min, "stop drafting below this draft probability")
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0f, 1.0f));
  ac->add_option("--segment", segment, "stream tokens per segment")->check(CLI::Range(1, 1 << 20));
  ac->add_flag("--matrix", matrix, "streams x drafters table (automatic with several of either)");

  auto* pr = app.add_subcommand("probe",
                                "determinism probe: batch width, duplicates, speculation, threads");
  AddModel(pr, c), AddStream(pr, c, false), AddMargins(pr, c);
  pr->add_option("--draft,--model-draft", pa.draft,
                 "assistant drafter GGUF: adds the speculation mode");
  pr->add_option("-n,--n-predict", pa.n_predict, "tokens generated per run")
      ->check(CLI::Range(1, 1 << 16));
  pr->add_option("--width", pa.width, "largest batch width")->check(CLI::Range(1, 64));
  pr->add_option("--duplicates", pa.dup, "copies of the prompt")->check(CLI::Range(1, 64));
  pr->add_option("--max-k", pa.max_k, "largest draft length")->check(CLI::Range(1, 32));
  pr->add_option("--max-threads", pa.max_threads, "largest thread count (default: all cores)")
      ->check(CLI::Range(1, 256));
  pr->add_option("--modes", pa.modes, "subset of: batch duplicates speculation threads");

  auto* id =
      app.add_subcommand("identity-diff", "fields that differ between two runs' identity blocks");
  id->add_option("a", fa, "first run JSON")->required();
  id->add_option("b", fb, "second run JSON")->required();
  id->add_flag("--json", c.json, "print one JSON object");

  // llama.cpp's names (-md, --spec-draft-n-max, ...) as on generate, chat and serve.
  if (const int rc = ParseWithLlamaAliases(app, argc, argv); rc >= 0) return rc;
  if (*lp) return Logprobs(c, only_ties);
  if (*dv) return Diverge(c, fa, fb, around);
  if (*ac) return Accept(c, drafts, draft_max, p_min, segment, matrix);
  if (*pr) return Probe(c, pa);
  return IdentityDiff(c, fa, fb);
}

}  // namespace lockstep::cli
