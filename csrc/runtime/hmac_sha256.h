// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the compilation cache
// authenticates its disk entries with a per-user key, so an entry someone
// else wrote (a payload of native code) is never loaded. Written here, not
// taken from a crypto library, because the core links nothing but libdl.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace torch_tpu::runtime {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  // The digest of everything updated so far; the object is spent after it.
  Sha256Digest finish();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> pending_;  // the bytes of an incomplete block
  size_t pending_size_ = 0;
  uint64_t message_bytes_ = 0;
};

// HMAC-SHA256 of a message given in pieces (the cache's entries are a
// header and a payload that are never one string).
class HmacSha256 {
 public:
  explicit HmacSha256(std::string_view key);
  void update(std::string_view data) { inner_.update(data); }
  Sha256Digest finish();

 private:
  Sha256 inner_;
  std::array<uint8_t, 64> outer_pad_;  // the key XOR opad (RFC 2104)
};

Sha256Digest sha256(std::string_view data);
Sha256Digest hmac_sha256(std::string_view key, std::string_view message);

// Compares in time independent of where they differ, so a forger cannot
// find a valid tag byte by byte from how long a rejection takes.
bool digests_equal(const Sha256Digest& a, const Sha256Digest& b);

}  // namespace torch_tpu::runtime
