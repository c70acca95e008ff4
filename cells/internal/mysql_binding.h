// Parameter and result binding for libmariadb prepared statements (the
// binary protocol), for the MySQL adapter (cells/mysql_client.cc) only.
//
// Threading: each object belongs to one connection and is used by one thread
// at a time.
#pragma once

#include <mysql.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "cells/mysql_client.h"

namespace cellar::internal {

// Longer string parameters go to the server in chunks of this size
// (COM_STMT_SEND_LONG_DATA) instead of inside the execute packet, so that a
// statement carrying many large bodies is not bounded by max_allowed_packet
// as a whole (Connector/C++ 1.1, used before, did the same over 256 KiB).
inline constexpr size_t kLongDataChunk = size_t{256} << 10;

// Fills `binds` for `params`: integers, doubles and NULL by type, strings as
// bytes (binary safe). The binds point into `params` (no copies).
// REQUIRES: `params` stays alive and unchanged until the statement executed.
template <typename Param>
void FillParamBinds(const std::vector<Param>& params, std::vector<MYSQL_BIND>* binds) {
  binds->assign(params.size(), MYSQL_BIND{});
  for (size_t i = 0; i < params.size(); ++i) {
    MYSQL_BIND& b = (*binds)[i];
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::nullptr_t>) {
            b.buffer_type = MYSQL_TYPE_NULL;
          } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
            b.buffer_type = MYSQL_TYPE_LONGLONG;
            b.buffer = const_cast<T*>(&v);  // only read by libmariadb
            b.is_unsigned = std::is_same_v<T, uint64_t>;
          } else if constexpr (std::is_same_v<T, double>) {
            b.buffer_type = MYSQL_TYPE_DOUBLE;
            b.buffer = const_cast<double*>(&v);
          } else {  // std::string or std::string_view
            b.buffer_type = MYSQL_TYPE_STRING;
            b.buffer = const_cast<char*>(v.data());
            b.buffer_length = static_cast<unsigned long>(v.size());
          }
        },
        params[i]);
  }
}

// Sends every string parameter of `binds` longer than kLongDataChunk ahead of
// the execution, in chunks. REQUIRES: `binds` was bound to `stmt`
// (mysql_stmt_bind_param) since its last execution.
// Returns false on a failure (mysql_stmt_errno(stmt) says which).
bool SendLongParams(MYSQL_STMT* stmt, const std::vector<MYSQL_BIND>& binds);

// Reads an executed statement's result into SqlRows: integers in decimal,
// DOUBLEs in their shortest round-trip form, temporal values as the server's
// text protocol shows them, everything else as bytes copied once into the
// row. Keeps its bind arrays between calls.
class ResultReader {
 public:
  // Buffers the whole result (mysql_stmt_store_result), appends its rows to
  // `rows` and frees the result. Returns false on a failure
  // (mysql_stmt_errno(stmt) says which); rows read before it stay appended,
  // and the statement must then be closed, not executed again.
  // REQUIRES: `stmt` executed and returns a result (mysql_stmt_field_count > 0).
  bool Read(MYSQL_STMT* stmt, std::vector<SqlRow>* rows);

  // How a result column is bound.
  enum class Kind { kSigned, kUnsigned, kDouble, kTemporal, kBytes };
  struct Column {
    Kind kind = Kind::kBytes;
    enum_field_types type = MYSQL_TYPE_STRING;
    unsigned decimals = 0;
    int64_t int_value = 0;
    double double_value = 0;
    MYSQL_TIME time_value{};
    unsigned long length = 0;
    my_bool is_null = 0;
    my_bool error = 0;
  };

 private:
  bool BindColumns(MYSQL_STMT* stmt, const MYSQL_FIELD* fields, unsigned n);
  bool ReadRow(MYSQL_STMT* stmt, std::vector<SqlRow>* rows);

  std::vector<MYSQL_BIND> binds_;
  std::vector<Column> columns_;
};

// The server's text form of a DATE, TIME, DATETIME or TIMESTAMP column value
// (fractional seconds to the column's decimals).
std::string FormatTemporal(const ResultReader::Column& column);

}  // namespace cellar::internal
