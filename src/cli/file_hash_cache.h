// SHA-256 of model files for run identities, cached by (device, inode, size, mtime) so that
// --json hashes a 17 GB model once, not on every run.
#pragma once

#include <string>

namespace lockstep::cli {

// The cache directory: $LOCKSTEP_CACHE_DIR, else $XDG_CACHE_HOME/lockstep, else
// $HOME/.cache/lockstep ("" when none can be named).
std::string HashCacheDir();

// Lowercase hex SHA-256 of the file ("" when unreadable), from the cache when the file's device,
// inode, size and modification time match an entry; computed and recorded otherwise. The cache
// file is replaced atomically; a cache that cannot be read or written only costs the hashing.
std::string CachedFileSha256(const std::string& path);

}  // namespace lockstep::cli
