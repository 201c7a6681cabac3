// SHA-256 and HMAC-SHA256 against the published test vectors: FIPS 180-4's
// examples (csrc.nist.gov, "SHA256.pdf" of the example algorithms) and
// RFC 4231 section 4. The compilation cache trusts a disk entry only when
// its HMAC matches, so a wrong digest would reject every entry (or, worse,
// a weak one would accept forgeries).
#include <algorithm>
#include <string>
#include <string_view>

#include "runtime/hmac_sha256.h"
#include "test_runner.h"

using namespace torch_tpu::runtime;  // the module under test

namespace {

std::string hex(const Sha256Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string bytes(size_t n, char value) { return std::string(n, value); }

}  // namespace

TEST(runtime, sha256_matches_the_fips_180_examples) {
  CHECK_EQ(hex(sha256("abc")), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  CHECK_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
           std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
  CHECK_EQ(hex(sha256(bytes(1000000, 'a'))),
           std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
  CHECK_EQ(hex(sha256("")), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
}

// The padding takes one more block where fewer than 9 bytes are left in
// the last one (55 bytes fit the length, 56 do not).
TEST(runtime, sha256_pads_at_every_block_boundary) {
  CHECK_EQ(hex(sha256(bytes(55, 'a'))),
           std::string("9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"));
  CHECK_EQ(hex(sha256(bytes(56, 'a'))),
           std::string("b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"));
  CHECK_EQ(hex(sha256(bytes(63, 'a'))),
           std::string("7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"));
  CHECK_EQ(hex(sha256(bytes(64, 'a'))),
           std::string("ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"));
  CHECK_EQ(hex(sha256(bytes(119, 'a'))),
           std::string("31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"));
  CHECK_EQ(hex(sha256(bytes(120, 'a'))),
           std::string("2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"));
}

TEST(runtime, sha256_of_a_message_in_pieces_is_that_of_the_whole) {
  std::string message;
  for (int i = 0; i < 300; ++i) message += static_cast<char>(i * 7 + 3);
  const Sha256Digest whole = sha256(message);
  for (size_t split : {0, 1, 55, 63, 64, 65, 128, 299, 300}) {
    for (size_t second : {0, 1, 64, 100}) {
      Sha256 h;
      const size_t end = std::min(message.size(), split + second);
      h.update(std::string_view(message).substr(0, split));
      h.update(std::string_view(message).substr(split, end - split));
      h.update(std::string_view(message).substr(end));
      CHECK_EQ(hex(h.finish()), hex(whole));
    }
  }
}

TEST(runtime, hmac_sha256_matches_rfc_4231) {
  // Test cases 1 to 4, 6 and 7; 5 checks a truncated tag, a prefix of this one.
  CHECK_EQ(hex(hmac_sha256(bytes(20, '\x0b'), "Hi There")),
           std::string("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"));
  CHECK_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
           std::string("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
  CHECK_EQ(hex(hmac_sha256(bytes(20, '\xaa'), bytes(50, '\xdd'))),
           std::string("773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"));
  std::string counting_key;
  for (char c = 1; c <= 25; ++c) counting_key += c;
  CHECK_EQ(hex(hmac_sha256(counting_key, bytes(50, '\xcd'))),
           std::string("82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"));
  CHECK_EQ(hex(hmac_sha256(bytes(20, '\x0c'), "Test With Truncation")).substr(0, 32),
           std::string("a3b6167473100ee06e0c796c2955552b"));
  // Keys longer than SHA-256's 64-byte block are hashed first.
  CHECK_EQ(hex(hmac_sha256(bytes(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
           std::string("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"));
  CHECK_EQ(hex(hmac_sha256(bytes(131, '\xaa'),
                           "This is a test using a larger than block-size key and a larger than block-size data. "
                           "The key needs to be hashed before being used by the HMAC algorithm.")),
           std::string("9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"));
}

TEST(runtime, hmac_sha256_of_a_message_in_pieces_is_that_of_the_whole) {
  HmacSha256 h("Jefe");
  h.update("what do ya ");
  h.update("");
  h.update("want for nothing?");
  CHECK_EQ(hex(h.finish()), hex(hmac_sha256("Jefe", "what do ya want for nothing?")));
}

TEST(runtime, digests_equal_compares_every_byte) {
  const Sha256Digest a = sha256("abc");
  CHECK(digests_equal(a, sha256("abc")));
  for (size_t i = 0; i < a.size(); ++i) {
    Sha256Digest b = a;
    b[i] ^= 0x01;
    CHECK(!digests_equal(a, b));
  }
}
