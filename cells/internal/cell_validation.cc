#include "cells/internal/cell_validation.h"

#include "cells/body_codec.h"

namespace cellar::internal {

Result<const DatastoreConfig*> ValidateDatastore(const ClusterConfig& config,
                                                 const std::string& datastore) {
  const DatastoreConfig* ds = config.FindDatastore(datastore);
  if (!ds) {
    std::string shown = datastore.substr(0, 64);
    return InvalidArgument("unknown datastore '" + shown + "'");
  }
  return ds;
}

Result<const ColumnConfig*> ValidateColumn(const DatastoreConfig& ds, const std::string& column) {
  const ColumnConfig* c = ds.FindColumn(column);
  if (!c) {
    return InvalidArgument("unknown column '" + column.substr(0, 64) + "' in datastore '" +
                           ds.name + "'");
  }
  return c;
}

Result<PendingCell> ValidateWrite(const ClusterConfig& config, const std::string& datastore,
                                  const CellWrite& cell) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(config, datastore));
  CELLAR_RETURN_IF_ERROR(ValidateColumn(*ds, cell.column).status());
  // The address is formatted only for an error: a put that passes pays nothing for it.
  auto where = [&] { return CellAddress(datastore, cell.row_key, cell.column, cell.ref_key); };
  if (cell.ref_key < 0)
    return InvalidArgument("cell " + where() + ": ref_key must be >= 0, got " +
                           std::to_string(cell.ref_key));
  if (!cell.body.is_object())
    return InvalidArgument("cell " + where() + ": body must be a JSON object, got " +
                           std::string(cell.body.type_name()));
  if (JsonDepth(cell.body) > kMaxBodyDepth)
    return InvalidArgument("cell " + where() + ": body nests deeper than " +
                           std::to_string(kMaxBodyDepth) + " levels");
  // The limit is on the body as a client sends it: compact JSON text. The
  // MessagePack size bounds it, so only bodies near the limit are dumped.
  EncodedBody encoded = EncodeBodyMeasured(cell.body);
  const size_t limit = static_cast<size_t>(config.limits.max_body_bytes);
  if (encoded.msgpack_bytes * kMaxJsonBytesPerMsgpackByte > limit) {
    const size_t size =
        cell.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
    if (size > limit)
      return InvalidArgument("cell " + where() + ": body is " + std::to_string(size) +
                             " bytes, over the limit of " + std::to_string(limit) +
                             " bytes (limits.max_body_bytes)");
  }
  PendingCell p;
  p.row_key = cell.row_key;
  p.column = cell.column;
  p.ref_key = cell.ref_key;
  p.encoded_body = std::move(encoded.stored);
  return p;
}

}  // namespace cellar::internal
