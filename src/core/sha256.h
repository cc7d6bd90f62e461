// SHA-256 digests as lowercase hex, for run identities (which model file, which output ids).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace lockstep {

// Lowercase hex SHA-256 of a file's bytes ("" when unreadable).
std::string FileSha256(const std::string& path);
// Lowercase hex SHA-256 of token ids serialized as little-endian int32, so the digest is the
// same on every host.
std::string IdsSha256(std::span<const int32_t> ids);

}  // namespace lockstep
