#include "cells/internal/msgpack_json_text.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "cells/body_codec.h"

namespace cellar::internal {
namespace {

// Prints the parser's events as they come; returns false (stopping the
// parse) where the text could differ from the document's.
class JsonTextWriter : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit JsonTextWriter(std::string* out)
      : out_(*out),
        printer_(nlohmann::detail::output_adapter<char>(*out), ' ',
                 nlohmann::json::error_handler_t::replace) {}

  bool null() override { return Scalar("null"); }
  bool boolean(bool v) override { return Scalar(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return Number(v); }
  bool number_unsigned(number_unsigned_t v) override { return Number(v); }
  bool number_float(number_float_t v, const string_t&) override {
    BeforeValue();
    printer_.dump(nlohmann::json(v), false, false, 0);  // dump's own float format
    return true;
  }
  bool string(string_t& v) override {
    BeforeValue();
    AppendJsonString(out_, v);
    return true;
  }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return Open('{', /*object=*/true); }
  bool key(string_t& k) override {
    Level& l = levels_.back();
    if (!l.first && k.compare(l.last_key) <= 0) return false;  // not as a document orders it
    if (!l.first) out_ += ',';
    l.first = false;
    l.last_key = k;
    AppendJsonString(out_, k);
    out_ += ':';
    return true;
  }
  bool end_object() override { return Close('}'); }
  bool start_array(std::size_t) override { return Open('[', /*object=*/false); }
  bool end_array() override { return Close(']'); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Level {
    bool object = false;
    bool first = true;
    std::string last_key;
  };

  // A value in an array is preceded by a comma unless it is the first; in an
  // object the key did that.
  void BeforeValue() {
    if (levels_.empty() || levels_.back().object) return;
    if (!levels_.back().first) out_ += ',';
    levels_.back().first = false;
  }
  bool Scalar(const char* text) {
    BeforeValue();
    out_ += text;
    return true;
  }
  template <typename T>
  bool Number(T v) {
    BeforeValue();
    out_ += std::to_string(v);
    return true;
  }
  bool Open(char bracket, bool object) {
    if (static_cast<int>(levels_.size()) >= kMaxBodyDepth) return false;
    BeforeValue();
    out_ += bracket;
    levels_.push_back(Level{object, true, {}});
    return true;
  }
  bool Close(char bracket) {
    out_ += bracket;
    levels_.pop_back();
    return true;
  }
  std::string& out_;
  nlohmann::detail::serializer<nlohmann::json> printer_;
  std::vector<Level> levels_;
};

}  // namespace

std::optional<std::string> MsgpackToJsonText(std::string_view msgpack) {
  std::string text;
  text.reserve(msgpack.size() * 2);
  try {
    JsonTextWriter writer(&text);
    const auto* begin = reinterpret_cast<const uint8_t*>(msgpack.data());
    if (nlohmann::json::sax_parse(begin, begin + msgpack.size(), &writer,
                                  nlohmann::json::input_format_t::msgpack, /*strict=*/true))
      return text;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace cellar::internal
