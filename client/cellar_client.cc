#include "client/cellar_client.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <random>
#include <thread>

#include "api/api_wire.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "client/internal/put_coalescer.h"

namespace cellar {
namespace {

using json = nlohmann::json;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string Escape(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string CellsPath(const std::string& ds, const Uuid& row) {
  return "/v1/" + Escape(ds) + "/cells/" + row.ToString();
}

std::string ColumnPath(const std::string& ds, const Uuid& row, const std::string& column) {
  return CellsPath(ds, row) + "/" + Escape(column);
}

// Compact JSON; InvalidArgument for strings that are not valid UTF-8.
Result<std::string> Serialize(const json& j) {
  try {
    return j.dump();
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("the body cannot be sent as JSON: ") + e.what());
  }
}

// One cell of a cells:batch request from a put whose body is already JSON
// text (no second serialisation of the body). The column is escaped by the
// JSON library; one that is not valid UTF-8 reaches the server replaced, is
// refused there, and its put is then sent alone (PutCoalescer).
std::string CellItemText(const internal::CoalescedPut& p) {
  std::string s = "{\"row_key\":\"" + p.cell->row_key.ToString() + "\",\"column\":";
  s += json(p.cell->column).dump(-1, ' ', false, json::error_handler_t::replace);
  s += ",\"ref_key\":" + std::to_string(p.cell->ref_key) + ",\"body\":";
  s += p.body;
  s += '}';
  return s;
}

struct Answer {
  int status = 0;
  std::string body;
};

Status DecodeError(const Answer& a) {
  std::string code, message;
  try {
    json j = json::parse(a.body);
    code = j.at("error").at("code").get<std::string>();
    message = j.at("error").at("message").get<std::string>();
  } catch (const std::exception&) {
    message = "HTTP " + std::to_string(a.status) + ": " + a.body.substr(0, 200);
  }
  StatusCode c = StatusCodeForHttp(a.status, code);
  if (c == StatusCode::kOk) c = StatusCode::kInternal;
  return Status(c, message);
}

Result<json> ParseAnswer(const Answer& a) {
  try {
    return json::parse(a.body);
  } catch (const std::exception& e) {
    return Internal(std::string("the server's answer is not JSON: ") + e.what());
  }
}

template <typename T, typename Fn>
Result<std::vector<T>> ParseList(const json& doc, const char* key, Fn&& parse_one) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_array())
    return Internal(std::string("the server's answer has no '") + key + "' list");
  std::vector<T> out;
  for (const json& item : *it) {
    auto v = parse_one(item);
    if (!v.ok()) return Internal("malformed answer: " + v.status().message());
    out.push_back(std::move(v).value());
  }
  return out;
}

}  // namespace

struct Client::Impl {
  struct Endpoint {
    std::string url;
    Mutex mu;
    std::vector<std::unique_ptr<httplib::Client>> idle GUARDED_BY(mu);
    std::atomic<int64_t> down_until_ms{0};
  };

  ClientOptions options;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::unique_ptr<internal::PutCoalescer> coalescer;  // null: every put alone
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> requests{0}, retries{0}, connection_errors{0}, unavailable{0};

  Endpoint& Pick() {
    const size_t n = endpoints.size();
    const size_t start = next.fetch_add(1) % n;
    const int64_t now = NowMs();
    for (size_t i = 0; i < n; ++i) {
      Endpoint& e = *endpoints[(start + i) % n];
      if (e.down_until_ms.load() <= now) return e;
    }
    return *endpoints[start];
  }

  std::unique_ptr<httplib::Client> Acquire(Endpoint& e) {
    {
      MutexLock lock(&e.mu);
      if (!e.idle.empty()) {
        auto c = std::move(e.idle.back());
        e.idle.pop_back();
        return c;
      }
    }
    auto c = std::make_unique<httplib::Client>(e.url);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    const int ct = options.connect_timeout_ms, rt = options.request_timeout_ms;
    c->set_connection_timeout(ct / 1000, (ct % 1000) * 1000);
    c->set_read_timeout(rt / 1000, (rt % 1000) * 1000);
    c->set_write_timeout(rt / 1000, (rt % 1000) * 1000);
    if (!options.bearer_token.empty()) c->set_bearer_token_auth(options.bearer_token);
    if (!options.ca_cert_file.empty()) c->set_ca_cert_path(options.ca_cert_file);
    c->enable_server_certificate_verification(options.verify_tls);
    return c;
  }

  void Release(Endpoint& e, std::unique_ptr<httplib::Client> c) {
    MutexLock lock(&e.mu);
    if (static_cast<int>(e.idle.size()) < options.max_idle_connections_per_endpoint)
      e.idle.push_back(std::move(c));
  }

  int BackoffMs(int attempt) {
    thread_local std::mt19937 rng(std::random_device{}());
    const int64_t cap = std::min<int64_t>(
        options.backoff_max_ms, int64_t{options.backoff_initial_ms} << std::min(attempt, 20));
    return static_cast<int>(std::uniform_int_distribution<int64_t>(cap / 2, cap)(rng));
  }

  // One request, retried on connection errors and 503 as described in the header.
  // Returns the first answer that is neither, or Unavailable.
  Result<Answer> Send(const std::string& method, const std::string& path,
                      const std::string& body = "") {
    Status last = Unavailable("no attempt was made");
    for (int attempt = 0; attempt < options.max_attempts; ++attempt) {
      if (attempt > 0) {
        ++retries;
        std::this_thread::sleep_for(std::chrono::milliseconds(BackoffMs(attempt - 1)));
      }
      Endpoint& e = Pick();
      std::unique_ptr<httplib::Client> c = Acquire(e);
      ++requests;
      httplib::Result res = method == "GET"    ? c->Get(path)
                            : method == "PUT"  ? c->Put(path, body, "application/json")
                            : method == "POST" ? c->Post(path, body, "application/json")
                                               : c->Delete(path);
      if (!res) {
        ++connection_errors;
        e.down_until_ms.store(NowMs() + options.backoff_max_ms);
        last = Unavailable(method + " " + e.url + path + ": " + httplib::to_string(res.error()));
        continue;  // the connection is dropped with `c`
      }
      Answer a{res->status, std::move(res->body)};
      Release(e, std::move(c));
      if (a.status == 503 || a.status == 502 || a.status == 504) {
        ++unavailable;
        last = DecodeError(a);
        if (last.code() != StatusCode::kUnavailable) last = Unavailable(last.message());
        continue;
      }
      return a;
    }
    return Status(
        StatusCode::kUnavailable,
        "gave up after " + std::to_string(options.max_attempts) + " attempts: " + last.message());
  }

  // Send, then decode: 2xx -> the JSON document, anything else -> its Status.
  Result<json> Call(const std::string& method, const std::string& path,
                    const std::string& body = "") {
    CELLAR_ASSIGN_OR_RETURN(Answer a, Send(method, path, body));
    if (a.status < 200 || a.status > 299) return DecodeError(a);
    return ParseAnswer(a);
  }

  Result<PutResult> CallPut(const std::string& method, const std::string& path,
                            const std::string& body = "") {
    CELLAR_ASSIGN_OR_RETURN(json doc, Call(method, path, body));
    auto r = PutResultFromJson(doc);
    if (!r.ok()) return Internal("malformed answer: " + r.status().message());
    return r;
  }

  Result<PutResult> PutAlone(const std::string& ds, const CellWrite& cell,
                             const std::string& body) {
    return CallPut("PUT",
                   ColumnPath(ds, cell.row_key, cell.column) + "/" + std::to_string(cell.ref_key),
                   body);
  }

  // POST .../cells:batch of `items` (each one cell's JSON object text):
  // results[i] for items[i]. Cells answered 503 are sent again, up to
  // max_attempts requests in all. A request refused as a whole fails every
  // cell alike; *rejected_whole (if set) tells whether that happened to the
  // first request, i.e. a 4xx answer and nothing written.
  std::vector<Result<PutResult>> PostCells(const std::string& ds,
                                           const std::vector<std::string>& items,
                                           bool* rejected_whole) {
    std::vector<Result<PutResult>> out(items.size(),
                                       Result<PutResult>(Unavailable("not attempted")));
    std::vector<size_t> pending(items.size());
    for (size_t i = 0; i < items.size(); ++i) pending[i] = i;
    for (int round = 0; round < options.max_attempts && !pending.empty(); ++round) {
      if (round > 0) {
        ++retries;
        std::this_thread::sleep_for(std::chrono::milliseconds(BackoffMs(round - 1)));
      }
      std::string body = "{\"cells\":[";
      for (size_t k = 0; k < pending.size(); ++k) {
        if (k > 0) body += ',';
        body += items[pending[k]];
      }
      body += "]}";
      Result<json> doc = Call("POST", "/v1/" + Escape(ds) + "/cells:batch", body);
      if (!doc.ok()) {
        if (rejected_whole)
          *rejected_whole = round == 0 && doc.status().code() != StatusCode::kUnavailable;
        for (size_t i : pending) out[i] = doc.status();
        return out;
      }
      auto results = doc->find("results");
      if (results == doc->end() || !results->is_array() || results->size() != pending.size()) {
        for (size_t i : pending) out[i] = Internal("malformed batch answer");
        return out;
      }
      std::vector<size_t> again;
      for (size_t k = 0; k < pending.size(); ++k) {
        const json& item = (*results)[k];
        const auto st = item.is_object() ? item.find("status") : item.end();
        const int status = st != item.end() && st->is_number_integer() ? st->get<int>() : 0;
        if (status == 200 || status == 201) {
          auto r = PutResultFromJson(item);
          out[pending[k]] =
              r.ok() ? std::move(r) : Result<PutResult>(Internal(r.status().message()));
          continue;
        }
        out[pending[k]] = DecodeError(Answer{status, DumpJson(item)});
        if (status == 503) again.push_back(pending[k]);
      }
      pending = std::move(again);
    }
    return out;
  }

  Result<Cell> CallCell(const std::string& path) {
    CELLAR_ASSIGN_OR_RETURN(json doc, Call("GET", path));
    auto c = CellFromJson(doc);
    if (!c.ok()) return Internal("malformed answer: " + c.status().message());
    return c;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  if (options.endpoints.empty()) return InvalidArgument("ClientOptions.endpoints is empty");
  if (options.max_attempts < 1) return InvalidArgument("max_attempts must be >= 1");
  if (options.max_puts_per_request < 1)
    return InvalidArgument("max_puts_per_request must be >= 1 (1: every put alone)");
  if (options.put_requests_in_flight < 0)
    return InvalidArgument("put_requests_in_flight must be >= 0 (0: two per endpoint)");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  for (const std::string& url : options.endpoints) {
    const bool http = url.rfind("http://", 0) == 0, https = url.rfind("https://", 0) == 0;
    const size_t host_at = http ? 7 : 8;
    if ((!http && !https) || url.size() <= host_at || url.find('/', host_at) != std::string::npos)
      return InvalidArgument("endpoint '" + url + "' is not an http(s)://host:port URL");
    auto e = std::make_unique<Impl::Endpoint>();
    e->url = url;
    impl->endpoints.push_back(std::move(e));
  }
  if (options.max_puts_per_request > 1) {
    internal::PutCoalescerOptions co;
    co.max_puts_per_request = options.max_puts_per_request;
    co.requests_in_flight = options.put_requests_in_flight > 0
                                ? options.put_requests_in_flight
                                : 2 * static_cast<int>(options.endpoints.size());
    Impl* m = impl.get();
    impl->coalescer = std::make_unique<internal::PutCoalescer>(
        co,
        [m](const internal::CoalescedPut& p) { return m->PutAlone(p.datastore, *p.cell, p.body); },
        [m](const std::vector<const internal::CoalescedPut*>& puts) {
          std::vector<std::string> items;
          items.reserve(puts.size());
          for (const internal::CoalescedPut* p : puts) items.push_back(CellItemText(*p));
          internal::MultiPutAnswer a;
          a.results = m->PostCells(puts.front()->datastore, items, &a.rejected_whole);
          return a;
        });
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<PutResult> Client::Put(const std::string& ds, const CellWrite& cell) {
  CELLAR_ASSIGN_OR_RETURN(std::string body, Serialize(cell.body));
  if (!impl_->coalescer) return impl_->PutAlone(ds, cell, body);
  return impl_->coalescer->Put(internal::CoalescedPut{ds, &cell, std::move(body)});
}

std::vector<Result<PutResult>> Client::PutBatch(const std::string& ds,
                                                const std::vector<CellWrite>& cells) {
  std::vector<std::string> items;
  items.reserve(cells.size());
  for (const CellWrite& w : cells) {
    auto item = Serialize({{"row_key", w.row_key.ToString()},
                           {"column", w.column},
                           {"ref_key", w.ref_key},
                           {"body", w.body}});
    if (!item.ok()) return std::vector<Result<PutResult>>(cells.size(), item.status());
    items.push_back(std::move(item).value());
  }
  return impl_->PostCells(ds, items, nullptr);
}

namespace {

// "read=replica&after=<token>" for `read` ("" for the defaults), joined to a
// path that has a query already when `more` is true.
std::string ReadQuery(const ReadOptions& read, bool more) {
  std::string q;
  if (read.preference == ReadPreference::kReplica) q += "read=replica";
  if (!read.after.empty()) q += std::string(q.empty() ? "" : "&") + "after=" + Escape(read.after);
  if (q.empty()) return q;
  return (more ? "&" : "?") + q;
}

}  // namespace

Result<Cell> Client::Get(const std::string& ds, const Uuid& row, const std::string& column,
                         int64_t ref_key, const ReadOptions& read) {
  return impl_->CallCell(ColumnPath(ds, row, column) + "/" + std::to_string(ref_key) +
                         ReadQuery(read, false));
}

Result<Cell> Client::Latest(const std::string& ds, const Uuid& row, const std::string& column,
                            const ReadOptions& read) {
  return impl_->CallCell(ColumnPath(ds, row, column) + ReadQuery(read, false));
}

Result<std::vector<Cell>> Client::Row(const std::string& ds, const Uuid& row,
                                      const ReadOptions& read) {
  CELLAR_ASSIGN_OR_RETURN(json doc,
                          impl_->Call("GET", CellsPath(ds, row) + ReadQuery(read, false)));
  return ParseList<Cell>(doc, "cells", [](const json& j) { return CellFromJson(j); });
}

Result<std::vector<Cell>> Client::Versions(const std::string& ds, const Uuid& row,
                                           const std::string& column, const VersionQuery& q,
                                           const ReadOptions& read) {
  std::string query = "?limit=" + std::to_string(q.limit);
  if (q.max_ref) query += "&max_ref=" + std::to_string(*q.max_ref);
  if (q.min_ref) query += "&min_ref=" + std::to_string(*q.min_ref);
  if (q.as_of) query += "&as_of=" + Escape(FormatRfc3339(*q.as_of));
  if (q.since) query += "&since=" + Escape(FormatRfc3339(*q.since));
  query += ReadQuery(read, true);
  CELLAR_ASSIGN_OR_RETURN(json doc,
                          impl_->Call("GET", ColumnPath(ds, row, column) + "/versions" + query));
  return ParseList<Cell>(doc, "cells", [](const json& j) { return CellFromJson(j); });
}

Result<PutResult> Client::Erase(const std::string& ds, const Uuid& row, const std::string& column,
                                std::optional<int64_t> expected_ref_key) {
  std::string path = ColumnPath(ds, row, column);
  if (expected_ref_key) path += "?expected_ref_key=" + std::to_string(*expected_ref_key);
  return impl_->CallPut("DELETE", path);
}

Result<ShardLogPage> Client::ShardLog(const std::string& ds, uint32_t shard,
                                      uint64_t after_added_id, int limit) {
  CELLAR_ASSIGN_OR_RETURN(
      json doc, impl_->Call("GET", "/v1/" + Escape(ds) + "/shards/" + std::to_string(shard) +
                                       "/log?after=" + std::to_string(after_added_id) +
                                       "&limit=" + std::to_string(limit)));
  ShardLogPage page;
  CELLAR_ASSIGN_OR_RETURN(
      page.cells, ParseList<Cell>(doc, "cells", [](const json& j) { return CellFromJson(j); }));
  try {
    page.next_after = doc.at("next_after").get<uint64_t>();
  } catch (const std::exception&) {
    return Internal("malformed answer: no next_after");
  }
  return page;
}

Result<IndexQueryPage> Client::QueryIndex(const std::string& ds, const std::string& index,
                                          const IndexQueryRequest& q) {
  std::string path = "/v1/" + Escape(ds) + "/indexes/" + Escape(index) +
                     "?shard_value=" + Escape(q.shard_value) + "&limit=" + std::to_string(q.limit) +
                     "&order=" + (q.descending ? "desc" : "asc");
  for (const auto& w : q.where) path += "&where=" + Escape(w);
  for (const auto& f : q.fields) path += "&field=" + Escape(f);
  if (!q.order_by.empty()) path += "&order_by=" + Escape(q.order_by);
  if (!q.cursor.empty()) path += "&cursor=" + Escape(q.cursor);
  if (q.verify) path += "&verify=true";
  ReadOptions read;
  read.preference = q.read;
  read.after = q.after;
  path += ReadQuery(read, /*more=*/true);
  CELLAR_ASSIGN_OR_RETURN(json doc, impl_->Call("GET", path));
  IndexQueryPage page;
  try {
    page.version = doc.at("version").get<int>();
    page.next_cursor = doc.value("next_cursor", "");
    page.dropped_by_verify = doc.value("dropped_by_verify", 0);
    for (const json& h : doc.at("hits")) {
      IndexQueryHit hit;
      auto row = Uuid::Parse(h.at("row_key").get<std::string>());
      if (!row.ok()) return Internal("malformed answer: bad row_key in hits");
      hit.row_key = *row;
      hit.column = h.at("column").get<std::string>();
      hit.ref_key = h.at("ref_key").get<int64_t>();
      hit.fields = h.at("fields");
      page.hits.push_back(std::move(hit));
    }
  } catch (const std::exception& e) {
    return Internal(std::string("malformed index answer: ") + e.what());
  }
  return page;
}

Status Client::Ready() {
  Status last = Unavailable("no endpoint");
  for (auto& e : impl_->endpoints) {
    auto c = impl_->Acquire(*e);
    auto res = c->Get("/readyz");
    if (res && res->status == 200) return Status::Ok();
    last = res ? DecodeError(Answer{res->status, res->body})
               : Unavailable(e->url + ": " + httplib::to_string(res.error()));
  }
  return last;
}

ClientStats Client::stats() const {
  ClientStats s{impl_->requests.load(), impl_->retries.load(), impl_->connection_errors.load(),
                impl_->unavailable.load()};
  if (impl_->coalescer) {
    const internal::PutCoalescerStats c = impl_->coalescer->stats();
    s.multi_put_requests = c.multi_put_requests;
    s.coalesced_puts = c.coalesced_puts;
    s.multi_puts_resent_alone = c.resent_alone;
  }
  return s;
}

}  // namespace cellar
