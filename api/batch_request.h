// The body of POST /v1/<ds>/cells:batch:
//   {"cells": [{"row_key": "<uuid>", "column": "BASE", "ref_key": 3, "body": {...}}, ...]}
// Every cell is validated before anything is written, so a batch is either
// rejected whole (nothing written) or handed to the store whole.
// Threading: pure function.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "config/cluster_config.h"

namespace cellar {

// The cells of a batch request document. Errors name the offending cell
// ("cells[3].ref_key: ..."): InvalidArgument for a malformed document or cell
// (unknown or missing keys, a bad UUID, a ref_key that is not an integer >= 0,
// a body that is not an object), NotFound for an unknown column,
// ResourceExhausted for more than `max_cells` cells or a body over
// limits.max_body_bytes. `source_text_bytes`: the length of the JSON text
// `doc` was parsed from, when known (CheckCellBody: small requests skip
// measuring each body).
Result<std::vector<CellWrite>> ParseBatchRequest(const nlohmann::json& doc,
                                                 const DatastoreConfig& ds,
                                                 const LimitsConfig& limits, int max_cells,
                                                 size_t source_text_bytes = SIZE_MAX);

}  // namespace cellar
