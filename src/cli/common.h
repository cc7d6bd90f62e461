// Helpers shared by the CLI commands: id lists, errors, default model paths, run records.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "engine/generate.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {

// Prints "lockstep: <message>" to stderr and returns exit code 1.
int Fail(const Status& s);
// "1,2,3" (spaces allowed) or a JSON array "[1,2,3]".
Expected<std::vector<int32_t>> ParseIdList(const std::string& text, const std::string& what);
// Turns one prompt's text into ids; `where` ("FILE:LINE") is for error messages.
using EncodePrompt = std::function<Expected<std::vector<int32_t>>(const std::string& text,
                                                                  const std::string& where)>;
// A prompts file (`generate --prompts-file`): one prompt per non-empty line, a JSON array of
// token ids or a JSON string of text given to `encode`. Errors name the file and line.
Expected<std::vector<std::vector<int32_t>>> ReadPromptsFile(const std::string& path,
                                                            const EncodePrompt& encode);
// models/lockstep-code-<role>.gguf, looked up in the working directory, then in the install
// prefix (PREFIX/share/lockstep/ for PREFIX/bin/lockstep), then up from the executable (a build
// tree inside the source checkout).
std::string DefaultModelPath(const std::string& role);
// The backend --device names: "auto" is cuda when a CUDA device is present, else cpu; an error
// naming the backends this build and machine have when the named one is not among them.
Expected<std::unique_ptr<backend::Backend>> CreateBackend(std::string device, int threads);

// Warns on stderr when `n_ctx` positions go beyond the context the model was trained for.
void WarnBeyondTrainedContext(int n_ctx, int n_ctx_train);

// `generate --compare`'s exit code, diff's convention: 0 when the speculative and plain token
// ids are equal, 1 when they differ.
int CompareExitCode(std::span<const int32_t> speculative, std::span<const int32_t> plain);

// The identity of a run: what produced an output, so two runs can be diffed field by field.
struct RunRecord {
  std::string command;
  std::string model_path;
  std::string draft_path;
  std::string backend;
  int threads = 1;
  bool hash_files = true;  // false (--no-hash): model hashes are reported as "not computed"
  std::string device;      // the backend's accelerator; empty: the host CPU
};
// The identity of one run: build, command, model digests, settings, and the digests of the
// prompt (the context before the output) and the output ids, so two runs can be compared.
nlohmann::json IdentityJson(const RunRecord& r, const nlohmann::json& settings,
                            std::span<const int32_t> prompt_ids,
                            std::span<const int32_t> output_ids);

nlohmann::json TimingsJson(const engine::GenerateResult& r);
// With `with_identity`, adds the identity block (hashes the model files: ~0.3 s per 30 MB).
nlohmann::json GenerateJson(const RunRecord& rec, const nlohmann::json& settings,
                            std::span<const int32_t> prompt, const engine::GenerateResult& r,
                            const std::string& text, bool with_identity);
std::string SummaryLine(const nlohmann::json& generate_json);
// The model's tokenizer, or null when the file carries none (prompts then come as ids). An error
// when it is there but broken, or has more tokens than the embedding has rows (llama.cpp refuses
// such files too): those ids could never be embedded.
Expected<std::unique_ptr<tokenizer::Tokenizer>> ModelTokenizer(const model::Model& m);

// Parses the arguments after the subcommand, accepting llama.cpp's multi-letter single-dash
// flags (-md, -ngl, -np, -ctk, -ctv), which CLI11 cannot declare, as their long forms. Returns
// the exit code to return at once (0 after --help, 2 for a usage error), or -1 to run.
int ParseWithLlamaAliases(CLI::App& app, int argc, char** argv);

// Rejects NaN and infinities (CLI11's ranges let NaN through: every comparison with it is false).
CLI::Validator FiniteNumber();
// A KV cache type name (kv::ParseCacheType's): an unknown one is a usage error at parse time.
CLI::Validator CacheTypeName();
// --seed: a value in [0, 2^63), or -1 for a random seed (drawn here, then printed and recorded).
uint64_t ResolveSeed(int64_t seed_arg);

// JSON text that never throws: invalid UTF-8 inside strings (a stream cut inside a character,
// byte tokens) becomes U+FFFD; the exact bytes stay available as token ids.
std::string DumpJson(const nlohmann::json& j, int indent = -1);

}  // namespace lockstep::cli
