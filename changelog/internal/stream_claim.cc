#include "changelog/internal/stream_claim.h"

#include <charconv>

namespace cellar::internal {
namespace {

std::string Table(const std::string& database) {
  return QualifiedTable(database, "relay_checkpoint");
}

}  // namespace

std::string FormatScanOffsets(const ScanOffsets& offsets) {
  std::string out;
  for (const auto& [partition, offset] : offsets) {
    if (!out.empty()) out += ',';
    out += std::to_string(partition) + ':' + std::to_string(offset);
  }
  return out;
}

ScanOffsets ParseScanOffsets(const std::string& text) {
  ScanOffsets out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view item(text.data() + pos, end - pos);
    const size_t colon = item.find(':');
    int32_t partition = 0;
    int64_t offset = 0;
    if (colon != std::string_view::npos &&
        std::from_chars(item.data(), item.data() + colon, partition).ec == std::errc() &&
        std::from_chars(item.data() + colon + 1, item.data() + item.size(), offset).ec ==
            std::errc())
      out[partition] = offset;
    pos = end + 1;
  }
  return out;
}

Result<StreamClaim> ClaimStream(MysqlConnection& conn, const std::string& database,
                                const std::string& datastore) {
  CELLAR_RETURN_IF_ERROR(conn.Begin());
  auto body = [&]() -> Result<StreamClaim> {
    CELLAR_RETURN_IF_ERROR(
        conn.Execute("INSERT IGNORE INTO " + Table(database) + " (datastore) VALUES (?)",
                     {datastore})
            .status());
    CELLAR_ASSIGN_OR_RETURN(
        auto rows, conn.Query("SELECT owner_epoch, owner_released, after_added_id, kafka_offset, "
                              "updated_at, kafka_partition, scan_offsets FROM " +
                                  Table(database) + " WHERE datastore = ? FOR UPDATE",
                              {datastore}));
    if (rows.empty()) return Internal("relay checkpoint row of '" + datastore + "' vanished");
    StreamClaim claim;
    claim.epoch = rows[0].Uint(0) + 1;
    claim.previous_owner_released = rows[0].Int(1) != 0;
    claim.checkpoint.after_added_id = rows[0].Uint(2);
    claim.checkpoint.kafka_offset = rows[0].Int(3);
    claim.checkpoint.updated_at = rows[0].Int(4);
    claim.checkpoint.kafka_partition = static_cast<int32_t>(rows[0].Int(5));
    if (!rows[0].IsNull(6)) claim.scan_offsets = ParseScanOffsets(rows[0].Bytes(6));
    CELLAR_RETURN_IF_ERROR(
        conn.Execute("UPDATE " + Table(database) +
                         " SET owner_epoch = ?, owner_released = 0 WHERE datastore = ?",
                     {claim.epoch, datastore})
            .status());
    CELLAR_RETURN_IF_ERROR(conn.Commit());
    return claim;
  };
  auto claim = body();
  if (!claim.ok()) conn.Rollback();
  return claim;
}

Status BeginFencedBatch(MysqlConnection& conn, const std::string& database,
                        const std::string& datastore, uint64_t epoch) {
  CELLAR_RETURN_IF_ERROR(conn.Begin());
  auto rows =
      conn.Query("SELECT owner_epoch FROM " + Table(database) + " WHERE datastore = ? FOR UPDATE",
                 {datastore});
  if (!rows.ok()) {
    conn.Rollback();
    return rows.status();
  }
  const uint64_t current = rows->empty() ? 0 : (*rows)[0].Uint(0);
  if (current != epoch) {
    conn.Rollback();
    return Aborted("fenced: stream " + database + "/" + datastore + " is owned by epoch " +
                   std::to_string(current) + ", not this relay's " + std::to_string(epoch));
  }
  return Status::Ok();
}

Status CommitFencedBatch(MysqlConnection& conn, const std::string& database,
                         const std::string& datastore, const RelayCheckpoint& cp,
                         const ScanOffsets& scan_offsets) {
  auto updated = conn.Execute(
      "UPDATE " + Table(database) +
          " SET after_added_id = ?, kafka_offset = ?, kafka_partition = ?, updated_at = ?,"
          " scan_offsets = ? WHERE datastore = ?",
      {cp.after_added_id, cp.kafka_offset, int64_t{cp.kafka_partition}, NowMicros(),
       FormatScanOffsets(scan_offsets), datastore});
  if (!updated.ok()) {
    conn.Rollback();
    return updated.status();
  }
  return conn.Commit();
}

Status ReleaseStreamClaim(MysqlConnection& conn, const std::string& database,
                          const std::string& datastore, uint64_t epoch) {
  return conn
      .Execute("UPDATE " + Table(database) +
                   " SET owner_released = 1 WHERE datastore = ? AND owner_epoch = ?",
               {datastore, epoch})
      .status();
}

}  // namespace cellar::internal
