#include "cells/log_position.h"

#include <charconv>
#include <cstdio>
#include <vector>

#include "cells/shard_map.h"

namespace cellar {
namespace {

constexpr std::string_view kVersionMark = "p1";

// 8 hex digits naming (host database, datastore).
std::string LogTag(const std::string& host_database, const std::string& datastore) {
  const uint64_t h = Fnv1a64(host_database + "/" + datastore);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(h & 0xffffffffu));
  return hex;
}

template <typename T>
bool ParseDecimal(std::string_view text, T* out) {
  if (text.empty() || text.size() > 20) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string Shown(const std::string& token) {
  return token.size() <= 80 ? token : token.substr(0, 80) + "...";
}

}  // namespace

std::string EncodeLogPosition(const std::string& host_database, const std::string& datastore,
                              uint32_t shard, uint64_t added_id) {
  return std::string(kVersionMark) + "." + std::to_string(shard) + "." + std::to_string(added_id) +
         "." + LogTag(host_database, datastore);
}

std::string EncodeLogPosition(const ClusterConfig& config, const std::string& datastore,
                              uint32_t shard, uint64_t added_id) {
  return EncodeLogPosition(config.DatabaseForShard(shard), datastore, shard, added_id);
}

Result<LogPosition> DecodeLogPosition(const ClusterConfig& config, const std::string& datastore,
                                      const std::string& token,
                                      const ShardDatabaseFn& database_of_shard) {
  std::vector<std::string_view> parts;
  std::string_view rest(token);
  while (true) {
    const size_t dot = rest.find('.');
    parts.push_back(rest.substr(0, dot));
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  LogPosition p;
  if (parts.size() != 4 || parts[0] != kVersionMark || !ParseDecimal(parts[1], &p.shard) ||
      !ParseDecimal(parts[2], &p.added_id) || parts[3].size() != 8)
    return InvalidArgument("after: '" + Shown(token) +
                           "' is not a position token (use the \"position\" of a put answer)");
  if (p.shard >= config.shards ||
      parts[3] !=
          LogTag(database_of_shard ? database_of_shard(p.shard) : config.DatabaseForShard(p.shard),
                 datastore))
    return InvalidArgument("after: position token '" + Shown(token) + "' is not one of " +
                           datastore +
                           " on this cluster (a token of another datastore or cluster, or its "
                           "shard moved to another host since the put)");
  return p;
}

}  // namespace cellar
