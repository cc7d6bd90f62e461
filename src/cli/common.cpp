// CLI helpers: parsing id lists, default paths, identity blocks and generate's JSON.
#include "cli/common.h"

#include "cli/file_hash_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/sha256.h"
#include "core/version.h"
#include "kv/kv_cache.h"
#include "quant/quant.h"

namespace lockstep::cli {

void WarnBeyondTrainedContext(int n_ctx, int n_ctx_train) {
  if (n_ctx > n_ctx_train)
    std::fprintf(stderr, "lockstep: warning: context %d is beyond the model's trained %d\n", n_ctx,
                 n_ctx_train);
}

int CompareExitCode(std::span<const int32_t> speculative, std::span<const int32_t> plain) {
  return std::equal(speculative.begin(), speculative.end(), plain.begin(), plain.end()) ? 0 : 1;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "lockstep: %s\n", s.message().c_str());
  return 1;
}

Expected<std::vector<int32_t>> ParseIdList(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::string cur;
  auto flush = [&]() -> Status {
    if (cur.empty()) return Status::Ok();
    char* end = nullptr;
    const long long v = std::strtoll(cur.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX)
      return Status::Errorf("{}: '{}' is not a token id", what, cur);
    ids.push_back(static_cast<int32_t>(v));
    cur.clear();
    return Status::Ok();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '[' || c == ']' || c == '\n' || c == '\t') {
      LS_RETURN_IF_ERROR(flush());
    } else {
      cur += c;
    }
  }
  LS_RETURN_IF_ERROR(flush());
  if (ids.empty()) return Status::Errorf("{}: no token ids in '{}'", what, text);
  return ids;
}

Expected<std::vector<std::vector<int32_t>>> ReadPromptsFile(const std::string& path,
                                                            const EncodePrompt& encode) {
  std::ifstream in(path);
  if (!in) return Status::Errorf("{}: cannot open", path);
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = fmt::format("{}:{}", path, n);
    if (j.is_string()) {
      LS_ASSIGN_OR_RETURN(auto ids, encode(j.get<std::string>(), where));
      prompts.push_back(std::move(ids));
    } else if (j.is_array()) {
      LS_ASSIGN_OR_RETURN(auto ids, ParseIdList(line, where));
      prompts.push_back(std::move(ids));
    } else {
      return Status::Errorf("{}: expected a JSON string or an array of token ids", where);
    }
  }
  if (prompts.empty()) return Status::Errorf("{}: no prompts", path);
  return prompts;
}

std::string DefaultModelPath(const std::string& role) {
  const std::string name = "models/lockstep-code-" + role + ".gguf";
  if (std::filesystem::exists(name)) return name;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return name;
  // Installed (cmake --install): PREFIX/bin/lockstep next to PREFIX/share/lockstep/models.
  const auto installed = exe.parent_path().parent_path() / "share" / "lockstep" / name;
  if (std::filesystem::exists(installed)) return installed.string();
  for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path())
    if (std::filesystem::exists(dir / name)) return (dir / name).string();
  return name;
}

namespace {
std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}
}  // namespace

Expected<std::unique_ptr<backend::Backend>> CreateBackend(std::string device, int threads) {
  const std::vector<std::string> have = backend::Available();
  if (device == "auto")
    device = std::find(have.begin(), have.end(), "cuda") != have.end() ? "cuda" : "cpu";
  auto be = backend::Create(device, threads);
  if (!be)
    return Status::Errorf("--device {}: not available (have: {})", device, fmt::join(have, ", "));
  return be;
}

nlohmann::json IdentityJson(const RunRecord& r, const nlohmann::json& settings,
                            std::span<const int32_t> prompt_ids,
                            std::span<const int32_t> output_ids) {
  nlohmann::json j = {
      {"lockstep_version", Version()},
      {"git_hash", GitHash()},
      {"command", r.command},
      {"model", std::filesystem::path(r.model_path).filename().string()},
      {"model_sha256", r.hash_files ? CachedFileSha256(r.model_path) : "not computed (--no-hash)"},
      {"settings", settings},
      {"backend", r.backend},
      {"kernels", std::string(quant::IsaName(quant::CpuIsa()))},
      {"threads", r.threads},
      {"device", r.device.empty() ? CpuName() : r.device},
      {"prompt_sha256", IdsSha256(prompt_ids)},  // two runs of other prompts differ here
      {"output_sha256", IdsSha256(output_ids)},
  };
  if (!r.draft_path.empty()) {
    j["draft"] = std::filesystem::path(r.draft_path).filename().string();
    j["draft_sha256"] = r.hash_files ? CachedFileSha256(r.draft_path) : "not computed (--no-hash)";
  }
  return j;
}

nlohmann::json TimingsJson(const engine::GenerateResult& r) {
  const double tps = r.generate_ms > 0 ? 1000.0 * r.tokens.size() / r.generate_ms : 0.0;
  return {{"prompt_ms", r.prompt_ms}, {"generate_ms", r.generate_ms}, {"tokens_per_second", tps}};
}

nlohmann::json GenerateJson(const RunRecord& rec, const nlohmann::json& settings,
                            std::span<const int32_t> prompt, const engine::GenerateResult& r,
                            const std::string& text, bool with_identity) {
  nlohmann::json j = {{"tokens", r.tokens},
                      {"text", text},
                      {"n_prompt", prompt.size()},
                      {"prompt_tokens", prompt},
                      {"n_generated", r.tokens.size()},
                      {"timings", TimingsJson(r)}};
  if (!rec.draft_path.empty()) {
    nlohmann::json per = nlohmann::json::array();
    for (size_t i = 0; i < r.draft.drafted_at.size(); ++i)
      per.push_back(r.draft.drafted_at[i]
                        ? static_cast<double>(r.draft.accepted_at[i]) / r.draft.drafted_at[i]
                        : 0.0);
    j["draft"] = {{"drafted", r.draft.drafted},       {"accepted", r.draft.accepted},
                  {"rate", r.draft.rate()},           {"per_position", per},
                  {"drafted_at", r.draft.drafted_at}, {"accepted_at", r.draft.accepted_at},
                  {"rounds", r.draft.rounds}};
  }
  if (with_identity) {
    j["identity"] = IdentityJson(rec, settings, prompt, r.tokens);
  }
  return j;
}

std::string SummaryLine(const nlohmann::json& j) {
  std::string s = fmt::format(
      "lockstep: {} prompt + {} generated tokens, prompt {:.1f} ms, "
      "{:.2f} tokens/s",
      j["n_prompt"].get<size_t>(), j["n_generated"].get<size_t>(),
      j["timings"]["prompt_ms"].get<double>(), j["timings"]["tokens_per_second"].get<double>());
  if (j.contains("draft"))
    s += fmt::format(", draft acceptance {:.3f} ({} / {})", j["draft"]["rate"].get<double>(),
                     j["draft"]["accepted"].get<int64_t>(), j["draft"]["drafted"].get<int64_t>());
  if (j.contains("plain"))
    s += fmt::format("; plain {:.2f} tokens/s, speedup {:.2f}x, outputs equal: {}",
                     j["plain"]["tokens_per_second"].get<double>(),
                     j["timings"]["tokens_per_second"].get<double>() /
                         j["plain"]["tokens_per_second"].get<double>(),
                     j["plain_equal"].get<bool>() ? "yes" : "NO");
  return s;
}

Expected<std::unique_ptr<tokenizer::Tokenizer>> ModelTokenizer(const model::Model& m) {
  if (m.file().Find("tokenizer.ggml.model") == nullptr)
    return std::unique_ptr<tokenizer::Tokenizer>();
  LS_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::FromGguf(m.file()));
  if (tok->n_tokens() > m.config().n_vocab)
    return Status::Errorf(
        "{}: the tokenizer has {} tokens but token_embd.weight has {} rows: ids from {} on could "
        "not be embedded",
        m.file().path(), tok->n_tokens(), m.config().n_vocab, m.config().n_vocab);
  return tok;
}

namespace {
// In the reverse order CLI11's parse(vector) takes.
std::vector<std::string> ArgsWithLlamaAliases(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string& arg : args) {
    if (arg == "-md") arg = "--model-draft";
    if (arg == "-ngl") arg = "--n-gpu-layers";
    if (arg == "-np") arg = "--parallel";
    if (arg == "-ctk") arg = "--cache-type-k";
    if (arg == "-ctv") arg = "--cache-type-v";
    if (arg == "-cnv") arg = "--conversation";
    if (arg == "-sys") arg = "--system-prompt";
    if (arg == "-ub") arg = "--ubatch-size";
  }
  std::reverse(args.begin(), args.end());
  return args;
}
}  // namespace

int ParseWithLlamaAliases(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(ArgsWithLlamaAliases(argc, argv));
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // 2: a usage error, as every command
  }
  return -1;
}

CLI::Validator FiniteNumber() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const double v = std::strtod(text.c_str(), nullptr);
        return std::isfinite(v) ? std::string() : "must be a finite number, not " + text;
      },
      "FINITE");
}

CLI::Validator CacheTypeName() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto t = kv::ParseCacheType(text);
        return t.ok() ? std::string() : t.status().message();
      },
      "f32|f16|bf16");
}

uint64_t ResolveSeed(int64_t seed_arg) {
  if (seed_arg >= 0) return static_cast<uint64_t>(seed_arg);
  std::random_device rd;
  const uint64_t seed = ((static_cast<uint64_t>(rd()) << 32) | rd()) >> 1;
  std::fprintf(stderr, "lockstep: random seed %llu (pass --seed %llu to repeat this run)\n",
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lockstep::cli
