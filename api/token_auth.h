// TokenTable: optional bearer-token auth for the HTTP API, with read/write
// scopes per datastore, loaded from a small YAML file:
//
//   tokens:
//     - name: billing                     # shown in request logs (never the token)
//       token_env: CELLAR_TOKEN_BILLING   # the token is this variable's value...
//       datastores:
//         trips: [read, write]
//         users: [read]
//     - name: ops
//       token_file: ops.token             # ...or this file's content (trailing
//                                         # whitespace dropped; relative to the YAML)
//       datastores: { "*": [read] }       # "*": every datastore
//
// Exactly one of token_env / token_file per entry; the token must be at least
// 16 characters; two entries may not share a name or a token. Unknown keys are
// errors, and every error is reported at once as <file>:<line>: <path>: <what>
// (config/yaml_reader.h). Tokens are never read from the YAML itself, so the
// file can be checked in.
//
// Tokens are compared by their SHA-256 digests in constant time.
// Threading: a loaded table is immutable; Check() is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cellar {

enum class AccessScope : uint8_t { kRead = 1, kWrite = 2 };

enum class AuthOutcome {
  kAllowed,
  kMissingToken,  // no "Authorization: Bearer <token>" header: HTTP 401
  kUnknownToken,  // a token that is not in the table: HTTP 401
  kForbidden,     // a known token without the scope on this datastore: HTTP 403
};

struct AuthDecision {
  AuthOutcome outcome = AuthOutcome::kAllowed;
  std::string principal;  // the entry's name when the token was recognised
};

class TokenTable {
 public:
  // An empty table; Check() then denies every request (use a null table to
  // switch auth off).
  TokenTable() = default;

  // Loads the YAML file at `path`. InvalidArgument listing every problem
  // (syntax, unknown keys, unset variables, unreadable token files, short or
  // duplicate tokens). Never throws.
  static Result<TokenTable> Load(const std::string& path);
  // Same, from text. `source_name` is used in messages; relative token_file
  // paths resolve against `base_dir`; `getenv` reads variables (tests pass
  // their own). A null getenv means ::getenv.
  static Result<TokenTable> Parse(std::string_view yaml_text, const std::string& source_name,
                                  const std::string& base_dir,
                                  std::function<const char*(const char*)> getenv = nullptr);

  // Decides one request. `authorization` is the raw header value ("" when
  // absent); only the "Bearer" scheme (case-insensitive) is accepted.
  AuthDecision Check(std::string_view authorization, std::string_view datastore,
                     AccessScope scope) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name;
    std::array<uint8_t, 32> digest{};
    std::map<std::string, uint8_t, std::less<>> scopes;  // datastore or "*" -> AccessScope bits
  };
  std::vector<Entry> entries_;
};

}  // namespace cellar
