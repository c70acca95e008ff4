// A change-log cell for encoding tests (changelog/cell_event.h): shared by
// the event encoding tests (changelog_unit_test) and the webhook batch
// encoding test (triggers_unit_test).
#pragma once

#include <cstdint>

#include "base/uuid.h"
#include "cells/cell.h"

namespace cellar {

// A cell of row 6b82bf47-..., BASE, ref_key 3, shard 7, at `added_id`.
inline Cell EventCell(uint64_t added_id) {
  Cell c;
  c.row_key = *Uuid::Parse("6b82bf47-eed5-4707-991b-3cf64b41a40d");
  c.column = "BASE";
  c.ref_key = 3;
  c.created_at = 1'700'000'000'123'456;
  c.shard = 7;
  c.added_id = added_id;
  return c;
}

}  // namespace cellar
