// `lockstep convert`: a Hugging Face Gemma 4 checkpoint directory to a GGUF file.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/gguf.h"

namespace lockstep::convert {

struct ConvertOptions {
  std::string hf_dir;    // config.json, model.safetensors[.index.json], optional tokenizer files
  std::string out_path;  // written to a temporary next to it, then renamed: never a partial file
  DType outtype = DType::F32;  // F32, F16 or BF16 for matrices
  bool tokenizer = true;       // add tokenizer.* keys when tokenizer.json exists
  std::function<void(uint64_t done, uint64_t total)> progress;  // bytes of tensor data
  std::function<void(const std::string&)> note;                 // informational lines
  const std::atomic<bool>* cancel = nullptr;  // set (by a signal handler): stop, write nothing
};

// Converts opts.hf_dir to opts.out_path. Errors name the file and the field or tensor at fault.
// The output depends only on the input files and options (no timestamps, no paths except the
// directory's base name in general.name), so converting twice gives identical bytes.
Status ConvertHfToGguf(const ConvertOptions& opts);

}  // namespace lockstep::convert
