#include "hmac_sha256.h"

#include <algorithm>
#include <cstring>

namespace torch_tpu::runtime {

namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of
// the cube roots of the first 64 primes.
constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

// FIPS 180-4 section 5.3.3: the first 32 bits of the fractional parts of
// the square roots of the first 8 primes.
Sha256::Sha256()
    : state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

// FIPS 180-4 section 6.2.2, one 512-bit block.
void Sha256::compress(const uint8_t* block) {
  uint32_t w[64];
  for (int t = 0; t < 16; ++t) {
    w[t] = uint32_t{block[4 * t]} << 24 | uint32_t{block[4 * t + 1]} << 16 | uint32_t{block[4 * t + 2]} << 8 |
           uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRoundConstants[t] + w[t];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(std::string_view data) {
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  size_t n = data.size();
  message_bytes_ += n;
  if (pending_size_ > 0) {
    const size_t take = std::min(n, pending_.size() - pending_size_);
    std::memcpy(pending_.data() + pending_size_, p, take);
    pending_size_ += take;
    p += take;
    n -= take;
    if (pending_size_ < pending_.size()) return;
    compress(pending_.data());
    pending_size_ = 0;
  }
  for (; n >= 64; p += 64, n -= 64) compress(p);
  std::memcpy(pending_.data(), p, n);
  pending_size_ = n;
}

// FIPS 180-4 section 5.1.1: a 1 bit, zeros to 448 mod 512 bits, then the
// message length in bits as a 64-bit big-endian number.
Sha256Digest Sha256::finish() {
  const uint64_t message_bits = message_bytes_ * 8;
  uint8_t padding[72] = {0x80};
  const size_t zeros_and_marker = (pending_size_ < 56 ? 56 : 120) - pending_size_;
  for (int i = 0; i < 8; ++i) padding[zeros_and_marker + i] = static_cast<uint8_t>(message_bits >> (56 - 8 * i));
  update(std::string_view(reinterpret_cast<const char*>(padding), zeros_and_marker + 8));
  Sha256Digest digest;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  }
  return digest;
}

// RFC 2104: H(K XOR opad, H(K XOR ipad, text)), a key longer than the
// block hashed first, a shorter one padded with zeros.
HmacSha256::HmacSha256(std::string_view key) {
  std::array<uint8_t, 64> block{};
  if (key.size() > block.size()) {
    const Sha256Digest hashed = sha256(key);
    std::memcpy(block.data(), hashed.data(), hashed.size());
  } else {
    std::memcpy(block.data(), key.data(), key.size());
  }
  std::array<uint8_t, 64> inner_pad;
  for (size_t i = 0; i < block.size(); ++i) {
    inner_pad[i] = block[i] ^ 0x36;
    outer_pad_[i] = block[i] ^ 0x5c;
  }
  inner_.update(std::string_view(reinterpret_cast<const char*>(inner_pad.data()), inner_pad.size()));
}

Sha256Digest HmacSha256::finish() {
  const Sha256Digest inner = inner_.finish();
  Sha256 outer;
  outer.update(std::string_view(reinterpret_cast<const char*>(outer_pad_.data()), outer_pad_.size()));
  outer.update(std::string_view(reinterpret_cast<const char*>(inner.data()), inner.size()));
  return outer.finish();
}

Sha256Digest sha256(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

Sha256Digest hmac_sha256(std::string_view key, std::string_view message) {
  HmacSha256 h(key);
  h.update(message);
  return h.finish();
}

bool digests_equal(const Sha256Digest& a, const Sha256Digest& b) {
  uint8_t difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference |= a[i] ^ b[i];
  return difference == 0;
}

}  // namespace torch_tpu::runtime
