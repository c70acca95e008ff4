// Which logical shard a row lives on.
//
// shard = FNV-1a-64(the 16 row-key bytes, in UUID byte order) mod shard_count.
// FNV-1a 64: offset basis 0xcbf29ce484222325, prime 0x100000001b3. This mapping
// is part of the on-disk format: it must never change, in any process or version.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/uuid.h"

namespace cellar {

// FNV-1a-64 of `bytes` (the hash of rows, index shard fields and names).
uint64_t Fnv1a64(std::string_view bytes);

// Fnv1a64 of the 16 row-key bytes.
uint64_t RowKeyHash(const Uuid& row_key);

// REQUIRES: shard_count > 0.
inline uint32_t ShardForRow(const Uuid& row_key, uint32_t shard_count) {
  return static_cast<uint32_t>(RowKeyHash(row_key) % shard_count);
}

}  // namespace cellar
