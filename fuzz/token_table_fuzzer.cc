// Fuzzes the bearer-token file loader (api/token_auth.h) and Check():
// any YAML gives a table or InvalidArgument; any Authorization header gives a
// decision without crashing. The first line of the input is the header.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/token_auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string_view header = in.substr(0, nl);
  const std::string_view yaml = nl == std::string_view::npos ? "" : in.substr(nl + 1);
  auto getenv_fn = [](const char* name) -> const char* {
    return std::string_view(name).size() % 2 ? "fuzz-token-0123456789abcdef" : nullptr;
  };
  auto t = cellar::TokenTable::Parse(yaml, "fuzz.yaml", "/nonexistent", getenv_fn);
  if (!t.ok()) {
    if (t.status().code() != cellar::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  auto d = t->Check(header, "trips", cellar::AccessScope::kWrite);
  if (d.outcome == cellar::AuthOutcome::kAllowed && d.principal.empty()) std::abort();
  return 0;
}
