#include "cells/shard_map.h"

namespace cellar {

uint64_t RowKeyHash(const Uuid& row_key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : row_key.bytes()) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace cellar
