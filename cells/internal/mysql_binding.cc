#include "cells/internal/mysql_binding.h"

#include <algorithm>
#include <cstdio>

#include "base/number_text.h"

namespace cellar::internal {
namespace {

ResultReader::Kind KindOf(const MYSQL_FIELD& field) {
  using Kind = ResultReader::Kind;
  switch (field.type) {
    case MYSQL_TYPE_TINY:
    case MYSQL_TYPE_SHORT:
    case MYSQL_TYPE_INT24:
    case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_LONGLONG:
    case MYSQL_TYPE_YEAR:
      return (field.flags & UNSIGNED_FLAG) ? Kind::kUnsigned : Kind::kSigned;
    case MYSQL_TYPE_FLOAT:
    case MYSQL_TYPE_DOUBLE:
      return Kind::kDouble;
    case MYSQL_TYPE_DATE:
    case MYSQL_TYPE_TIME:
    case MYSQL_TYPE_DATETIME:
    case MYSQL_TYPE_TIMESTAMP:
      return Kind::kTemporal;
    default:  // strings, BLOBs, DECIMAL, BIT, JSON
      return Kind::kBytes;
  }
}

}  // namespace

std::string FormatTemporal(const ResultReader::Column& c) {
  const MYSQL_TIME& t = c.time_value;
  char buf[64];
  int n;
  if (c.type == MYSQL_TYPE_DATE) {
    n = std::snprintf(buf, sizeof buf, "%04u-%02u-%02u", t.year, t.month, t.day);
  } else if (c.type == MYSQL_TYPE_TIME) {
    n = std::snprintf(buf, sizeof buf, "%s%02u:%02u:%02u", t.neg ? "-" : "", t.day * 24 + t.hour,
                      t.minute, t.second);
  } else {
    n = std::snprintf(buf, sizeof buf, "%04u-%02u-%02u %02u:%02u:%02u", t.year, t.month, t.day,
                      t.hour, t.minute, t.second);
  }
  std::string text(buf, static_cast<size_t>(std::clamp(n, 0, static_cast<int>(sizeof buf) - 1)));
  if (c.type != MYSQL_TYPE_DATE && c.decimals > 0 && c.decimals <= 6) {
    char frac[16];
    std::snprintf(frac, sizeof frac, "%06lu", static_cast<unsigned long>(t.second_part % 1000000));
    text += '.';
    text.append(frac, c.decimals);
  }
  return text;
}

bool SendLongParams(MYSQL_STMT* stmt, const std::vector<MYSQL_BIND>& binds) {
  for (size_t i = 0; i < binds.size(); ++i) {
    const MYSQL_BIND& b = binds[i];
    if (b.buffer_type != MYSQL_TYPE_STRING || b.buffer_length <= kLongDataChunk) continue;
    const char* data = static_cast<const char*>(b.buffer);
    for (size_t sent = 0; sent < b.buffer_length; sent += kLongDataChunk) {
      const size_t chunk = std::min<size_t>(kLongDataChunk, b.buffer_length - sent);
      if (mysql_stmt_send_long_data(stmt, static_cast<unsigned>(i), data + sent,
                                    static_cast<unsigned long>(chunk)) != 0)
        return false;
    }
  }
  return true;
}

bool ResultReader::BindColumns(MYSQL_STMT* stmt, const MYSQL_FIELD* fields, unsigned n) {
  columns_.assign(n, Column{});
  binds_.assign(n, MYSQL_BIND{});
  for (unsigned c = 0; c < n; ++c) {
    Column& col = columns_[c];
    MYSQL_BIND& b = binds_[c];
    col.kind = KindOf(fields[c]);
    col.type = fields[c].type;
    col.decimals = fields[c].decimals;
    b.length = &col.length;
    b.is_null = &col.is_null;
    b.error = &col.error;
    switch (col.kind) {
      case Kind::kSigned:
      case Kind::kUnsigned:
        b.buffer_type = MYSQL_TYPE_LONGLONG;
        b.buffer = &col.int_value;
        b.is_unsigned = col.kind == Kind::kUnsigned;
        break;
      case Kind::kDouble:
        b.buffer_type = MYSQL_TYPE_DOUBLE;
        b.buffer = &col.double_value;
        break;
      case Kind::kTemporal:
        b.buffer_type = col.type;
        b.buffer = &col.time_value;
        b.buffer_length = sizeof(MYSQL_TIME);
        break;
      case Kind::kBytes:
        // No buffer: the fetch only reports the length; ReadRow then copies
        // the bytes once, into the row's string (mysql_stmt_fetch_column).
        b.buffer_type = MYSQL_TYPE_STRING;
        break;
    }
  }
  return mysql_stmt_bind_result(stmt, binds_.data()) == 0;
}

bool ResultReader::ReadRow(MYSQL_STMT* stmt, std::vector<SqlRow>* rows) {
  std::vector<std::optional<std::string>> values;
  values.reserve(columns_.size());
  for (unsigned c = 0; c < columns_.size(); ++c) {
    const Column& col = columns_[c];
    if (col.is_null) {
      values.emplace_back(std::nullopt);
      continue;
    }
    switch (col.kind) {
      case Kind::kSigned:
        values.emplace_back(DecimalText(col.int_value));
        break;
      case Kind::kUnsigned:
        values.emplace_back(DecimalText(static_cast<uint64_t>(col.int_value)));
        break;
      case Kind::kDouble:
        values.emplace_back(DecimalText(col.double_value));
        break;
      case Kind::kTemporal:
        values.emplace_back(FormatTemporal(col));
        break;
      case Kind::kBytes: {
        std::string bytes(col.length, '\0');
        if (col.length > 0) {
          MYSQL_BIND whole{};
          unsigned long copied = 0;
          whole.buffer_type = MYSQL_TYPE_STRING;
          whole.buffer = bytes.data();
          whole.buffer_length = col.length;
          whole.length = &copied;
          if (mysql_stmt_fetch_column(stmt, &whole, c, 0) != 0) return false;
        }
        values.emplace_back(std::move(bytes));
        break;
      }
    }
  }
  rows->emplace_back(std::move(values));
  return true;
}

bool ResultReader::Read(MYSQL_STMT* stmt, std::vector<SqlRow>* rows) {
  // Buffered whole, so that the connection is free again at once and a
  // failed read leaves nothing on the wire.
  if (mysql_stmt_store_result(stmt) != 0) return false;
  bool ok = false;
  if (MYSQL_RES* meta = mysql_stmt_result_metadata(stmt)) {
    if (BindColumns(stmt, mysql_fetch_fields(meta), mysql_num_fields(meta))) {
      int rc;
      ok = true;
      while (ok && ((rc = mysql_stmt_fetch(stmt)) == 0 || rc == MYSQL_DATA_TRUNCATED))
        ok = ReadRow(stmt, rows);
      ok = ok && rc == MYSQL_NO_DATA;
    }
    mysql_free_result(meta);
  }
  // After a failure the caller closes the statement (see mysql_client.cc).
  if (ok) mysql_stmt_free_result(stmt);
  return ok;
}

}  // namespace cellar::internal
