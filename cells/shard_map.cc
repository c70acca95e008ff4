#include "cells/shard_map.h"

namespace cellar {

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t RowKeyHash(const Uuid& row_key) {
  const auto& b = row_key.bytes();
  return Fnv1a64(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
}

}  // namespace cellar
