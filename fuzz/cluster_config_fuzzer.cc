// Fuzzes the cluster YAML loader (config/cluster_config.h): any text gives a
// config or InvalidArgument (never a crash, hang or exception), and a config
// it accepts upholds what the rest of Cellar relies on.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/cluster_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = cellar::ParseClusterConfig(text, "fuzz.yaml");
  if (!cfg.ok()) {
    if (cfg.status().code() != cellar::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (cfg->shards == 0 || cfg->mysql.hosts.empty()) std::abort();
  for (uint32_t s = 0; s < cfg->shards; ++s) {
    const cellar::MysqlHostConfig& h = cfg->HostForShard(s);
    if (!h.Owns(s)) std::abort();  // an unowned shard was accepted
  }
  for (const auto& ds : cfg->datastores) {
    if (!cellar::IsValidDatastoreName(ds.name) || ds.columns.empty()) std::abort();
    for (const auto& c : ds.columns)
      if (!cellar::IsValidColumnName(c.name) || c.ttl_ms < 0) std::abort();
  }
  return 0;
}
