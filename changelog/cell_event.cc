#include "changelog/cell_event.h"

#include <cstdint>
#include <optional>

#include "cells/body_codec.h"

namespace cellar {

std::string ChangeLogTopic(const KafkaConfig& kafka, const std::string& datastore) {
  return kafka.topic_prefix + "." + datastore + ".cells";
}

std::string CellSubject(const Cell& cell) {
  return cell.row_key.ToString() + "/" + cell.column + "/" + std::to_string(cell.ref_key);
}

int32_t ChangeLogPartition(const KafkaConfig& kafka, uint32_t shard) {
  return static_cast<int32_t>(shard % static_cast<uint32_t>(kafka.partitions));
}

std::vector<EventHeader> CloudEventHeaders(CloudEventBinding binding, const KafkaConfig& kafka,
                                           const std::string& datastore, const Cell& cell) {
  const char* prefix = binding == CloudEventBinding::kKafka ? "ce_" : "ce-";
  auto name = [&](const char* attribute) { return std::string(prefix) + attribute; };
  std::vector<EventHeader> h;
  h.reserve(7);
  h.push_back({name("specversion"), "1.0"});
  h.push_back({name("id"),
               datastore + ":" + std::to_string(cell.shard) + ":" + std::to_string(cell.added_id)});
  h.push_back({name("source"), "cellar://" + kafka.topic_prefix + "/" + datastore});
  h.push_back({name("type"), cell.tombstone ? "cellar.cell.erased" : "cellar.cell.written"});
  h.push_back({name("time"), FormatRfc3339(cell.created_at)});
  h.push_back({name("subject"), CellSubject(cell)});
  if (binding == CloudEventBinding::kKafka) h.push_back({"content-type", "application/json"});
  return h;
}

// Encoded directly, without building a JSON document around the body (the
// relay's hottest step besides reading the log): the same bytes as the
// document's dump(), whose object keys are sorted, so the keys go in that
// order here. tests/trigger_config_unit_test.cc compares both encodings.
std::string EncodeCellEvent(const std::string& datastore, const Cell& cell,
                            int64_t max_body_bytes) {
  return EncodeCellEvent(
      datastore, cell,
      cell.tombstone ? std::string()
                     : cell.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      max_body_bytes);
}

std::string EncodeCellEvent(const std::string& datastore, const Cell& cell, std::string_view body,
                            int64_t max_body_bytes) {
  const bool omitted = !cell.tombstone && static_cast<int64_t>(body.size()) > max_body_bytes;
  std::string out;
  out.reserve(body.size() + datastore.size() + cell.column.size() + 220);
  out += "{\"added_id\":";
  out += std::to_string(cell.added_id);
  out += ",\"body\":";
  if (cell.tombstone || omitted) {
    out += "null";
    if (omitted) out += ",\"body_omitted\":true";
  } else {
    out += body;
  }
  out += ",\"column\":";
  AppendJsonString(out, cell.column);
  out += ",\"created_at\":";
  AppendJsonString(out, FormatRfc3339(cell.created_at));
  out += ",\"datastore\":";
  AppendJsonString(out, datastore);
  out += ",\"ref_key\":";
  out += std::to_string(cell.ref_key);
  out += ",\"row_key\":\"";
  out += cell.row_key.ToString();
  out += "\",\"shard\":";
  out += std::to_string(cell.shard);
  out += ",\"tombstone\":";
  out += cell.tombstone ? "true" : "false";
  out += '}';
  return out;
}

std::string EncodeCellEventViaDocument(const std::string& datastore, const Cell& cell,
                                       int64_t max_body_bytes) {
  nlohmann::json j = {{"datastore", datastore},
                      {"shard", cell.shard},
                      {"added_id", cell.added_id},
                      {"row_key", cell.row_key.ToString()},
                      {"column", cell.column},
                      {"ref_key", cell.ref_key},
                      {"created_at", FormatRfc3339(cell.created_at)},
                      {"tombstone", cell.tombstone}};
  if (cell.tombstone) {
    j["body"] = nullptr;
  } else {
    std::string body = cell.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (static_cast<int64_t>(body.size()) > max_body_bytes) {
      j["body"] = nullptr;
      j["body_omitted"] = true;
    } else {
      j["body"] = cell.body;
    }
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// The envelope's fields as found; a field of the wrong JSON type stays empty,
// as a missing one does.
struct EventFields {
  std::optional<std::string> datastore, row_key, column, created_at;
  std::optional<uint64_t> shard, added_id;
  std::optional<int64_t> ref_key;
  std::optional<bool> tombstone, body_omitted;
};

// The one place that says which fields an event needs.
Result<CellEvent> EventFromFields(EventFields& f) {
  auto missing = [](const char* name) {
    return InvalidArgument(std::string("event field '") + name + "' is missing or mistyped");
  };
  if (!f.datastore) return missing("datastore");
  if (!f.shard || *f.shard > UINT32_MAX) return missing("shard");
  if (!f.added_id) return missing("added_id");
  if (!f.row_key) return missing("row_key");
  if (!f.column) return missing("column");
  if (!f.ref_key) return missing("ref_key");
  if (!f.created_at) return missing("created_at");
  if (!f.tombstone) return missing("tombstone");
  CellEvent e;
  e.datastore = std::move(*f.datastore);
  CELLAR_ASSIGN_OR_RETURN(e.cell.row_key, Uuid::Parse(*f.row_key));
  CELLAR_ASSIGN_OR_RETURN(e.cell.created_at, ParseRfc3339(*f.created_at));
  e.cell.shard = static_cast<uint32_t>(*f.shard);
  e.cell.added_id = *f.added_id;
  e.cell.column = std::move(*f.column);
  e.cell.ref_key = *f.ref_key;
  e.cell.tombstone = *f.tombstone;
  e.body_omitted = f.body_omitted.value_or(false);
  return e;
}

// nlohmann's SAX interface: the top-level object's scalars into EventFields;
// the body (and anything else nested) is lexed past, nothing built.
class EnvelopeReader {
 public:
  using json = nlohmann::json;
  explicit EnvelopeReader(EventFields* f) : f_(f) {}

  bool null() { return Scalar(); }
  bool boolean(bool v) {
    if (Top("tombstone")) f_->tombstone = v;
    if (Top("body_omitted")) f_->body_omitted = v;
    return Scalar();
  }
  bool number_integer(json::number_integer_t v) {
    if (Top("ref_key")) f_->ref_key = v;
    return Scalar();
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (Top("shard")) f_->shard = v;
    if (Top("added_id")) f_->added_id = v;
    if (Top("ref_key")) f_->ref_key = static_cast<int64_t>(v);
    return Scalar();
  }
  bool number_float(json::number_float_t, const json::string_t&) { return Scalar(); }
  bool string(json::string_t& v) {
    if (Top("datastore")) f_->datastore = std::move(v);
    if (Top("row_key")) f_->row_key = std::move(v);
    if (Top("column")) f_->column = std::move(v);
    if (Top("created_at")) f_->created_at = std::move(v);
    return Scalar();
  }
  bool binary(json::binary_t&) { return Scalar(); }
  bool start_object(std::size_t) { return Open(/*object=*/true); }
  bool start_array(std::size_t) { return Open(/*object=*/false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(json::string_t& k) {
    if (depth_ == 1) key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return false; }

  bool top_is_object() const { return top_is_object_; }

 private:
  bool Top(std::string_view name) const { return depth_ == 1 && key_ == name; }
  bool Scalar() {
    if (depth_ == 0) top_is_object_ = false;  // a bare scalar document
    return true;
  }
  bool Open(bool object) {
    if (depth_ == 0) top_is_object_ = top_is_object_ && object;
    ++depth_;
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }

  EventFields* f_;
  std::string key_;
  int depth_ = 0;
  bool top_is_object_ = true;
};

}  // namespace

Result<CellEvent> DecodeCellEvent(std::string_view value) {
  auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("event is not a JSON object");
  // Strings and the body are moved out of the document rather than copied
  // (the body is most of an event).
  EventFields f;
  auto text = [&](const char* name, std::optional<std::string>* out) {
    if (auto it = j.find(name); it != j.end() && it->is_string())
      *out = std::move(it->get_ref<std::string&>());
  };
  text("datastore", &f.datastore);
  text("row_key", &f.row_key);
  text("column", &f.column);
  text("created_at", &f.created_at);
  if (auto it = j.find("shard"); it != j.end() && it->is_number_unsigned())
    f.shard = it->get<uint64_t>();
  if (auto it = j.find("added_id"); it != j.end() && it->is_number_unsigned())
    f.added_id = it->get<uint64_t>();
  if (auto it = j.find("ref_key"); it != j.end() && it->is_number_integer())
    f.ref_key = it->get<int64_t>();
  if (auto it = j.find("tombstone"); it != j.end() && it->is_boolean())
    f.tombstone = it->get<bool>();
  if (auto it = j.find("body_omitted"); it != j.end() && it->is_boolean())
    f.body_omitted = it->get<bool>();
  CELLAR_ASSIGN_OR_RETURN(CellEvent e, EventFromFields(f));
  if (auto it = j.find("body"); it != j.end()) e.cell.body = std::move(*it);
  return e;
}

Result<CellEvent> DecodeCellEventAsPublished(std::string_view value) {
  EventFields f;
  EnvelopeReader reader(&f);
  if (!nlohmann::json::sax_parse(value.begin(), value.end(), &reader) || !reader.top_is_object())
    return InvalidArgument("event is not a JSON object");
  CELLAR_ASSIGN_OR_RETURN(CellEvent e, EventFromFields(f));
  e.published_json = std::string(value);
  return e;
}

}  // namespace cellar
