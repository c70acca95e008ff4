// Fuzzes the index-definition loader (indexes/index_definition.h): any YAML
// gives definitions or InvalidArgument (never a crash or exception), and an
// accepted definition has what the index writer relies on: a datastore of
// the cluster, column_defs of its columns, each holding the shard field.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "indexes/index_definition.h"

namespace {

cellar::ClusterConfig Cluster() {
  auto c = cellar::ParseClusterConfig(
      "shards: 4\n"
      "mysql: { hosts: [ { address: 127.0.0.1, port: 1, shards: 0-3 } ] }\n"
      "datastores:\n"
      "  - { name: trips, columns: { BASE: {}, STATUS: {} } }\n"
      "  - { name: users, columns: { PROFILE: {} } }\n",
      "fuzz");
  if (!c.ok()) std::abort();
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cellar::ClusterConfig cluster = Cluster();
  if (size > 64 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto defs = cellar::ParseIndexDefinitions(text, "fuzz.yaml", cluster);
  if (!defs.ok()) {
    if (defs.status().code() != cellar::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  for (const auto& d : *defs) {
    const cellar::DatastoreConfig* ds = cluster.FindDatastore(d.datastore);
    if (ds == nullptr || d.column_defs.empty() || d.FindField(d.shard_field) == nullptr)
      std::abort();
    for (const auto& cd : d.column_defs) {
      if (ds->FindColumn(cd.column_key) == nullptr) std::abort();
      bool has_shard_field = false;
      for (const auto& f : cd.fields) has_shard_field |= f.path == d.shard_field;
      if (!has_shard_field) std::abort();
    }
    (void)d.Fingerprint();
    (void)d.AllFields();
  }
  return 0;
}
