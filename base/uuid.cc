#include "base/uuid.h"

#include <openssl/rand.h>

#include <cstring>
#include <stdexcept>

namespace cellar {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<Uuid> Uuid::Parse(std::string_view text) {
  auto bad = [&] {
    std::string shown(text.substr(0, 64));
    return InvalidArgument("invalid UUID '" + shown +
                           "': expected 36 characters like 123e4567-e89b-12d3-a456-426614174000");
  };
  if (text.size() != 36) return bad();
  std::array<uint8_t, 16> out{};
  size_t j = 0;
  for (size_t i = 0; i < 36;) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return bad();
      ++i;
      continue;
    }
    int hi = HexValue(text[i]), lo = HexValue(text[i + 1]);
    if (hi < 0 || lo < 0) return bad();
    out[j++] = static_cast<uint8_t>(hi << 4 | lo);
    i += 2;
  }
  return Uuid(out);
}

Uuid Uuid::Random() {
  std::array<uint8_t, 16> b{};
  if (RAND_bytes(b.data(), 16) != 1) throw std::runtime_error("RAND_bytes failed");
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  return Uuid(b);
}

Uuid Uuid::FromBytes(std::string_view raw) {
  std::array<uint8_t, 16> b{};
  std::memcpy(b.data(), raw.data(), std::min<size_t>(raw.size(), 16));
  return Uuid(b);
}

std::string Uuid::ToString() const {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(36);
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
    s.push_back(kHex[bytes_[i] >> 4]);
    s.push_back(kHex[bytes_[i] & 0xf]);
  }
  return s;
}

std::string Uuid::ToBytes() const {
  return std::string(reinterpret_cast<const char*>(bytes_.data()), 16);
}

size_t UuidHash::operator()(const Uuid& u) const {
  uint64_t a, b;
  std::memcpy(&a, u.bytes().data(), 8);
  std::memcpy(&b, u.bytes().data() + 8, 8);
  return static_cast<size_t>(a ^ (b * 0x9E3779B97F4A7C15ull));
}

}  // namespace cellar
