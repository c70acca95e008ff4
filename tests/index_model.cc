#include "tests/index_model.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "base/time.h"
#include "gtest/gtest.h"
#include "indexes/index_entry.h"

namespace cellar::idxtest {
namespace {

// -1/0/1 on two field values of one type, as MySQL compares the stored columns.
int CompareJson(IndexFieldType t, const nlohmann::json& a, const nlohmann::json& b) {
  switch (t) {
    case IndexFieldType::kUuid:
    case IndexFieldType::kString: {  // lower-case canonical UUIDs sort like their bytes
      const auto& x = a.get_ref<const std::string&>();
      const auto& y = b.get_ref<const std::string&>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case IndexFieldType::kDatetime: {
      int64_t x = *ParseRfc3339(a.get<std::string>()), y = *ParseRfc3339(b.get<std::string>());
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case IndexFieldType::kFloat: {
      double x = a.get<double>(), y = b.get<double>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case IndexFieldType::kInt: {
      int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case IndexFieldType::kBool: {
      int x = a.get<bool>(), y = b.get<bool>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
  }
  return 0;
}

// A field value of the body in the form queries return, or nullopt when the
// body has no valid value (written from the documented rules).
std::optional<nlohmann::json> ModelValue(const IndexField& f, const nlohmann::json& body) {
  const nlohmann::json* cur = &body;
  std::stringstream path(f.path);
  std::string part;
  while (std::getline(path, part, '.')) {
    if (!cur->is_object() || !cur->contains(part)) return std::nullopt;
    cur = &(*cur)[part];
  }
  const nlohmann::json& v = *cur;
  switch (f.type) {
    case IndexFieldType::kUuid: {
      if (!v.is_string()) return std::nullopt;
      auto u = Uuid::Parse(v.get<std::string>());
      if (!u.ok()) return std::nullopt;
      return u->ToString();
    }
    case IndexFieldType::kString:
      if (!v.is_string() || v.get<std::string>().size() > 255) return std::nullopt;
      return v;
    case IndexFieldType::kInt:
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) return std::nullopt;
      if (!v.is_number_integer()) return std::nullopt;
      return v.get<int64_t>();
    case IndexFieldType::kFloat:
      if (!v.is_number()) return std::nullopt;
      return v.get<double>();
    case IndexFieldType::kBool:
      if (!v.is_boolean()) return std::nullopt;
      return v;
    case IndexFieldType::kDatetime: {
      if (!v.is_string()) return std::nullopt;
      auto t = ParseRfc3339(v.get<std::string>());
      if (!t.ok()) return std::nullopt;
      return FormatRfc3339(*t);
    }
  }
  return std::nullopt;
}

// A filter value (SqlParam) as the JSON form of its field.
nlohmann::json ParamJson(const IndexField& f, const SqlParam& p) {
  switch (f.type) {
    case IndexFieldType::kUuid:
      return Uuid::FromBytes(std::get<std::string>(p)).ToString();
    case IndexFieldType::kString:
      return std::get<std::string>(p);
    case IndexFieldType::kDatetime:
      return FormatRfc3339(std::get<int64_t>(p));
    case IndexFieldType::kFloat:
      return std::get<double>(p);
    case IndexFieldType::kInt:
      return std::get<int64_t>(p);
    case IndexFieldType::kBool:
      return std::get<int64_t>(p) != 0;
  }
  return nullptr;
}

bool Holds(const IndexField& f, const IndexFilter& filter, const nlohmann::json& v) {
  if (v.is_null()) return false;  // SQL: NULL matches no comparison
  if (filter.op == IndexFilter::Op::kIn) {
    for (const auto& x : filter.values)
      if (CompareJson(f.type, v, ParamJson(f, x)) == 0) return true;
    return false;
  }
  int c = CompareJson(f.type, v, ParamJson(f, filter.values.at(0)));
  switch (filter.op) {
    case IndexFilter::Op::kEq:
      return c == 0;
    case IndexFilter::Op::kNe:
      return c != 0;
    case IndexFilter::Op::kLt:
      return c < 0;
    case IndexFilter::Op::kLe:
      return c <= 0;
    case IndexFilter::Op::kGt:
      return c > 0;
    case IndexFilter::Op::kGe:
      return c >= 0;
    default:
      return false;
  }
}

}  // namespace

std::map<std::pair<Uuid, std::string>, Cell> LatestCells(CellStore& store,
                                                         const std::string& datastore) {
  std::map<std::pair<Uuid, std::string>, Cell> out;
  for (uint32_t s = 0; s < store.config().shards; ++s) {
    uint64_t after = 0;
    while (true) {
      auto page = store.ShardLog(datastore, s, after, 5000);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      if (page->cells.empty()) {
        // Empty is also the answer while a writer of the host stays open past
        // the read's wait: the end only when nothing committed lies beyond.
        auto head = store.ShardHead(datastore, s);
        EXPECT_TRUE(head.ok()) << head.status().ToString();
        if (!head.ok() || *head <= after) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      for (Cell& c : page->cells) {
        auto it = out.find({c.row_key, c.column});
        if (it == out.end())
          out.emplace(std::make_pair(c.row_key, c.column), std::move(c));
        else if (c.ref_key > it->second.ref_key)
          it->second = std::move(c);
      }
      after = page->next_after;
    }
  }
  return out;
}

std::string Describe(const std::vector<ModelHit>& hits, size_t max) {
  std::string out = std::to_string(hits.size()) + " hits";
  for (size_t i = 0; i < hits.size() && i < max; ++i)
    out += "\n    " + hits[i].row_key.ToString() + "/" + hits[i].column + "/" +
           std::to_string(hits[i].ref_key) + " " + hits[i].fields.dump();
  return out;
}

Model::Model(const IndexDefinition& def, const std::map<std::pair<Uuid, std::string>, Cell>& latest)
    : def_(def) {
  for (const auto& [key, cell] : latest) {
    const IndexColumnDef* cd = def.FindColumnDef(key.second);
    if (!cd || cell.tombstone) continue;
    Entry e;
    e.hit.row_key = key.first;
    e.hit.column = key.second;
    e.hit.ref_key = cell.ref_key;
    e.created_at = cell.created_at;
    e.hit.fields = nlohmann::json::object();
    bool ok = true;
    for (const auto& f : def.AllFields()) {
      bool in_cd = false;
      for (const auto& x : cd->fields) in_cd |= x.path == f.path;
      if (!in_cd) {
        e.hit.fields[f.path] = nullptr;
        continue;
      }
      auto v = ModelValue(f, cell.body);
      if (!v) ok = false;
      e.hit.fields[f.path] = v ? *v : nlohmann::json();
    }
    if (ok) entries_.push_back(std::move(e));
  }
}

std::vector<ModelHit> Model::Answer(const IndexQuery& q) const {
  const auto all = def_.AllFields();
  const IndexField& shard = all.front();
  auto shard_value = TextToFieldValue(shard, q.shard_value);
  EXPECT_TRUE(shard_value.ok());
  const nlohmann::json want_shard = ParamJson(shard, *shard_value);
  const IndexField* order = q.order_by.empty() ? nullptr : def_.FindField(q.order_by);
  std::vector<const Entry*> hits;
  for (const auto& e : entries_) {
    const auto& sv = e.hit.fields[shard.path];
    if (sv.is_null() || CompareJson(shard.type, sv, want_shard) != 0) continue;
    bool ok = true;
    for (const auto& f : q.filters)
      ok = ok && Holds(*def_.FindField(f.field), f, e.hit.fields[f.field]);
    if (order && e.hit.fields[order->path].is_null()) ok = false;
    if (ok) hits.push_back(&e);
  }
  auto less = [&](const Entry* a, const Entry* b) {
    int c = order ? CompareJson(order->type, a->hit.fields[order->path], b->hit.fields[order->path])
                  : (a->created_at < b->created_at ? -1 : a->created_at > b->created_at);
    if (c != 0) return c < 0;
    if (a->hit.row_key != b->hit.row_key) return a->hit.row_key < b->hit.row_key;
    return a->hit.column < b->hit.column;
  };
  std::sort(hits.begin(), hits.end(), less);
  if (q.descending) std::reverse(hits.begin(), hits.end());
  std::vector<ModelHit> out;
  for (const Entry* e : hits) {
    ModelHit h = e->hit;
    if (!q.fields.empty()) {
      nlohmann::json only = nlohmann::json::object();
      for (const auto& name : q.fields) only[name] = h.fields[name];
      h.fields = only;
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<ModelHit> ToHits(const IndexQueryResult& r) {
  std::vector<ModelHit> out;
  for (const auto& h : r.hits)
    out.push_back(ModelHit{h.row_key, h.column_key, h.ref_key, h.fields});
  return out;
}

std::vector<ModelHit> QueryAll(IndexReader& reader, IndexQuery q, int* pages) {
  std::vector<ModelHit> out;
  std::set<std::pair<Uuid, std::string>> seen;
  int n = 0;
  q.cursor.clear();
  while (true) {
    auto r = reader.Query(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) break;
    ++n;
    EXPECT_LE(static_cast<int>(r->hits.size()), q.limit);
    for (auto& h : ToHits(*r)) {
      EXPECT_TRUE(seen.insert({h.row_key, h.column}).second)
          << "hit " << h.row_key.ToString() << " returned twice (page " << n << ")";
      out.push_back(std::move(h));
    }
    if (r->next_cursor.empty()) break;
    EXPECT_FALSE(r->hits.empty()) << "a cursor after an empty page";
    if (n > 100000 || r->hits.empty()) break;
    q.cursor = r->next_cursor;
  }
  if (pages) *pages = n;
  return out;
}

std::string Diff(const std::vector<ModelHit>& want, const std::vector<ModelHit>& got) {
  if (want == got) return "";
  std::ostringstream os;
  os << "want " << want.size() << " hits, got " << got.size();
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  os << "; first difference at " << i << ":";
  auto one = [](const ModelHit& h) {
    return h.row_key.ToString() + "/" + h.column + "/" + std::to_string(h.ref_key) + " " +
           h.fields.dump();
  };
  for (size_t k = i; k < i + 3; ++k) {
    if (k < want.size()) os << "\n    want[" << k << "] " << one(want[k]);
    if (k < got.size()) os << "\n    got[" << k << "]  " << one(got[k]);
  }
  // Which hits are missing or unexpected, regardless of order.
  std::set<std::pair<Uuid, std::string>> w, g;
  for (const auto& h : want) w.insert({h.row_key, h.column});
  for (const auto& h : got) g.insert({h.row_key, h.column});
  int shown = 0;
  for (const auto& k : w)
    if (!g.count(k) && shown++ < 3) os << "\n    missing " << k.first.ToString();
  for (const auto& k : g)
    if (!w.count(k) && shown++ < 6) os << "\n    unexpected " << k.first.ToString();
  return os.str();
}

}  // namespace cellar::idxtest
