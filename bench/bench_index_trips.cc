// The trips `cellar-bench index` writes (see bench_index.cc) and the index
// definition over their fields: sharded on driver_uuid, with city,
// requested_at and fare.total.
#include <string>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_index_phases.h"
#include "indexes/index_definition.h"

namespace cellar::bench::index_phases {

nlohmann::json TripBody(const Uuid& driver, const std::string& city, MicrosSinceEpoch requested,
                        double fare) {
  return {{"driver_uuid", driver.ToString()},
          {"rider_uuid", Uuid::Random().ToString()},
          {"city", city},
          {"status", "completed"},
          {"requested_at", FormatRfc3339(requested)},
          {"fare", {{"currency", "USD"}, {"total", fare}}}};
}

Result<IndexDefinition> Definition(const ClusterConfig& cfg, const std::string& table) {
  const std::string yaml = "table: " + table + "\ndatastore: " + cfg.datastores[0].name +
                           "\ncolumn_defs:\n  - column_key: " + cfg.datastores[0].columns[0].name +
                           "\n    fields:\n"
                           "      - { field: driver_uuid, type: UUID }\n"
                           "      - { field: city, type: string }\n"
                           "      - { field: requested_at, type: datetime }\n"
                           "      - { field: fare.total, type: float }\n";
  CELLAR_ASSIGN_OR_RETURN(auto defs, ParseIndexDefinitions(yaml, "<cellar-bench index>", cfg));
  return defs.at(0);
}

}  // namespace cellar::bench::index_phases
