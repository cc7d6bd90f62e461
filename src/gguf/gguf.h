// GGUF v3 files: a bounds-checked mmap reader and a writer, with llama.cpp's layout rules.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace lockstep::gguf {

// GGUF metadata value type ids, as stored in the file.
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

struct Value;
// An array keeps its element type so a writer can reproduce it (arrays may nest).
struct Array {
  ValueType elem_type = ValueType::UINT8;
  std::vector<Value> items;
};

struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  // Typed accessors for callers that validate: they fail (nullopt) on a type that cannot
  // represent the value exactly, never silently convert a string to a number etc.
  std::optional<int64_t> AsInt() const;   // any integer type (uint64 > INT64_MAX fails)
  std::optional<double> AsFloat() const;  // float32/float64 and integers
  std::optional<bool> AsBool() const;
  const std::string* AsString() const;
  const Array* AsArray() const;

  static Value U32(uint32_t x);
  static Value I32(int32_t x);
  static Value U64(uint64_t x);
  static Value F32(float x);
  static Value Bool(bool x);
  static Value Str(std::string s);
  static Value Arr(ValueType elem_type, std::vector<Value> items);
};

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous axis
  uint64_t offset = 0;      // relative to the data section
  uint64_t nbytes = 0;
  int64_t n_elements() const;
};

// A GGUF file opened read-only through mmap. Metadata keys keep file order.
class File {
 public:
  // Validates everything: magic, version (2 or 3), counts, string lengths, types, alignment,
  // tensor shapes and byte ranges (inside the file, non-overlapping). Errors name the file, the
  // field and the byte offset.
  static Expected<std::unique_ptr<File>> Open(const std::string& path);
  // Same checks over a caller-owned buffer (used by the fuzzer and tests); the buffer must
  // outlive the File.
  static Expected<std::unique_ptr<File>> FromMemory(const void* data, size_t size,
                                                    const std::string& label);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* Find(const std::string& key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(const std::string& name) const;
  // Pointer to the tensor's bytes inside the mapping.
  const uint8_t* TensorData(const TensorInfo& t) const;
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

 private:
  File() = default;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t data_offset_ = 0;
  void* mapping_ = nullptr;  // non-null when this File owns an mmap
  friend class Parser;
};

// Builds a GGUF v3 file. Tensor data is supplied by a callback at write time so converters
// can stream (and report progress) without holding every tensor in memory.
class Writer {
 public:
  void SetAlignment(uint64_t a) { alignment_ = a; }
  void Set(const std::string& key, Value v);  // replaces an existing key, keeps its position
  // `nbytes` must equal RowBytes(type, ne[0]) * (product of the other ne).
  void AddTensor(const std::string& name, DType type, std::vector<int64_t> ne,
                 std::function<void(uint8_t* dst)> fill);
  void AddTensorCopy(const std::string& name, DType type, std::vector<int64_t> ne, const void* src);
  // Writes to a new uniquely named temporary next to `path` and renames it on success, so a
  // failed or interrupted write never leaves a partial file at `path` (nor a temporary), and
  // the file is written exactly when this returns Ok. `progress(done_bytes, total_bytes)` may
  // be empty; `cancel` (may be null) is checked between tensors and before the rename.
  Status WriteFile(const std::string& path,
                   const std::function<void(uint64_t, uint64_t)>& progress = {},
                   const std::atomic<bool>* cancel = nullptr) const;

 private:
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    std::function<void(uint8_t*)> fill;
  };
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

std::string_view ValueTypeName(ValueType t);
// Short human rendering used by `inspect` (arrays are abbreviated after `max_items`).
std::string ToString(const Value& v, size_t max_items = 8);

}  // namespace lockstep::gguf
