// File-hash cache: one tab-separated line per file (dev, inode, size, mtime ns, sha256, path).
#include "cli/file_hash_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/sha256.h"

namespace lockstep::cli {
namespace {

namespace fs = std::filesystem;

// The key that changes whenever the file's bytes may have changed.
std::string Key(const struct stat& st) {
  return fmt::format("{}\t{}\t{}\t{}", static_cast<unsigned long long>(st.st_dev),
                     static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size),
                     static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec);
}

}  // namespace

std::string HashCacheDir() {
  if (const char* d = std::getenv("LOCKSTEP_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/lockstep";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/lockstep";
  return "";
}

std::string CachedFileSha256(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  const std::string dir = HashCacheDir();
  if (dir.empty()) return FileSha256(path);
  const fs::path cache = fs::path(dir) / "file-sha256.tsv";
  const std::string key = Key(st);
  std::string kept;  // every entry but this file's
  {
    std::ifstream in(cache);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(key + "\t", 0) == 0) {
        const std::string rest = line.substr(key.size() + 1);
        const std::string sha = rest.substr(0, rest.find('\t'));
        if (sha.size() == 64) return sha;
      }
      kept += line + "\n";
    }
  }
  const std::string sha = FileSha256(path);
  if (sha.empty()) return sha;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string tmp = cache.string() + fmt::format(".{}.tmp", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept << key << "\t" << sha << "\t" << fs::absolute(path, ec).string() << "\n";
    if (!out) {
      fs::remove(tmp, ec);
      return sha;
    }
  }
  fs::rename(tmp, cache, ec);
  if (ec) fs::remove(tmp, ec);
  return sha;
}

}  // namespace lockstep::cli
