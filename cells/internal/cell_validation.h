// Validation of caller input before anything reaches SQL.
#pragma once

#include <string>

#include "base/status.h"
#include "cells/cell.h"
#include "cells/internal/write_unit.h"
#include "config/cluster_config.h"

namespace cellar::internal {

// The datastore, or InvalidArgument "unknown datastore 'x'".
Result<const DatastoreConfig*> ValidateDatastore(const ClusterConfig& config,
                                                 const std::string& datastore);
// The column's config, or InvalidArgument naming the column and the datastore.
Result<const ColumnConfig*> ValidateColumn(const DatastoreConfig& ds, const std::string& column);

// Checks a write completely (datastore, column, ref_key >= 0, body is an
// object within limits.max_body_bytes) and returns it encoded, ready to queue.
Result<PendingCell> ValidateWrite(const ClusterConfig& config, const std::string& datastore,
                                  const CellWrite& cell);

}  // namespace cellar::internal
