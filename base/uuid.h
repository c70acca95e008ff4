// Uuid: the 16 bytes of a row key, parsed from and printed as the canonical
// lower-case 8-4-4-4-12 hex form.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace cellar {

class Uuid {
 public:
  Uuid() = default;  // the nil UUID
  explicit Uuid(const std::array<uint8_t, 16>& bytes) : bytes_(bytes) {}

  // Accepts exactly 36 characters, hex digits (either case) with dashes at
  // positions 8, 13, 18 and 23. Anything else is InvalidArgument naming the input.
  static Result<Uuid> Parse(std::string_view text);
  // A random (version 4) UUID from OpenSSL's CSPRNG.
  static Uuid Random();
  // Builds from exactly 16 raw bytes (e.g. a BINARY(16) column).
  // REQUIRES: raw.size() == 16.
  static Uuid FromBytes(std::string_view raw);

  const std::array<uint8_t, 16>& bytes() const { return bytes_; }
  std::string ToString() const;  // lower-case canonical form
  std::string ToBytes() const;   // 16 raw bytes
  // The 16 raw bytes without a copy; valid while this Uuid lives.
  std::string_view BytesView() const {
    return std::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
  }

  friend bool operator==(const Uuid&, const Uuid&) = default;
  friend auto operator<=>(const Uuid&, const Uuid&) = default;

 private:
  std::array<uint8_t, 16> bytes_{};
};

struct UuidHash {
  size_t operator()(const Uuid& u) const;
};

}  // namespace cellar
