// Read-only, bounds-checked access to Hugging Face safetensors checkpoints (single or sharded).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace lockstep::convert {

// Element types that can appear in a safetensors header; only some are convertible.
enum class StDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* StDTypeName(StDType t);
size_t StDTypeSize(StDType t);

struct StTensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;  // PyTorch order: shape.back() is the contiguous axis
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  std::string file;  // path of the shard holding it, for error messages
  int64_t n_elements() const;
};

// One .safetensors file mapped read-only. The header is validated completely on open: the
// 8-byte little-endian header length, the JSON, every dtype/shape/data_offsets entry, that byte
// ranges lie inside the data section, match dtype x shape and do not overlap.
class SafetensorsFile {
 public:
  static Expected<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Same checks over a caller-owned buffer that must outlive the object (tests, fuzzing).
  static Expected<std::unique_ptr<SafetensorsFile>> FromMemory(const void* data, size_t size,
                                                               const std::string& label);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }

 private:
  SafetensorsFile() = default;
  Status Parse();
  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;
  std::vector<StTensor> tensors_;
};

// Every tensor of a checkpoint directory: `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` (each listed name must be in the shard the index names).
class Checkpoint {
 public:
  static Expected<std::unique_ptr<Checkpoint>> Open(const std::string& dir);
  const std::map<std::string, const StTensor*>& tensors() const { return by_name_; }
  const StTensor* Find(const std::string& name) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const StTensor*> by_name_;
};

}  // namespace lockstep::convert
