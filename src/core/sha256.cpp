// SHA-256 hex digests of files and token-id lists, through OpenSSL's EVP interface.
#include "core/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace lockstep {
namespace {

std::string Sha256Hex(EVP_MD_CTX* ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

}  // namespace

std::string FileSha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(in.gcount()));
  }
  std::string hex = Sha256Hex(ctx);
  EVP_MD_CTX_free(ctx);
  return hex;
}

std::string IdsSha256(std::span<const int32_t> ids) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  for (int32_t id : ids) {
    const unsigned char b[4] = {static_cast<unsigned char>(id), static_cast<unsigned char>(id >> 8),
                                static_cast<unsigned char>(id >> 16),
                                static_cast<unsigned char>(id >> 24)};
    EVP_DigestUpdate(ctx, b, 4);
  }
  std::string hex = Sha256Hex(ctx);
  EVP_MD_CTX_free(ctx);
  return hex;
}

}  // namespace lockstep
