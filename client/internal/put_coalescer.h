// PutCoalescer: sends concurrent Client::Put calls together, as the server's
// group commit writes concurrent puts together.
//
// Requests: at most `requests_in_flight` run at once. A put that finds none
// running is sent at once by its own thread: alone (the single-put request,
// exactly as without coalescing) when nothing else waits. While requests run,
// puts queue; a caller thread sends the queue (up to max_puts_per_request puts
// of one datastore, at most one per row, up to max_body_bytes_per_request of
// bodies) as one multi-put request when a slot is free and either no request
// runs or the waiting puts are at least the callers in Put() / the slots. So
// under load each request carries about callers / slots puts (a second
// request that went with the first few waiting puts would leave every later
// request as small: measured 5.3 puts per request and 4.9k puts/s from 16
// callers, against 7.9 and 6.1k), and a few callers never wait for each other
// (2 callers, 2 slots: each goes at once).
//
// Each put keeps its own result, as if sent alone:
//   - one put per row in a request, because the batch request commits a row's
//     cells atomically (a rejected cell would fail its row's others);
//   - a request refused as a whole (a bad cell, too large: nothing written) is
//     sent again one put at a time, so each put gets its own answer.
//
// Threading: Put() is thread-safe and blocks its caller until its result is
// known; requests are sent on caller threads (no thread of its own).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "cells/cell.h"

namespace cellar::internal {

// One Client::Put: the cell and its body already serialised.
struct CoalescedPut {
  std::string datastore;
  const CellWrite* cell = nullptr;  // owned by the caller, alive until Put returns
  std::string body;                 // cell->body as compact JSON text
};

struct PutCoalescerOptions {
  int max_puts_per_request = 32;                   // >= 1
  size_t max_body_bytes_per_request = 256 * 1024;  // a single larger put still goes, alone
  int requests_in_flight = 2;  // >= 1; requests sent at once, single or multi-put
};

// What a multi-put request answered.
struct MultiPutAnswer {
  std::vector<Result<PutResult>> results;  // results[i] for puts[i] unless rejected_whole
  // The request was refused as a whole and wrote nothing (InvalidArgument,
  // NotFound, ResourceExhausted ...): each put is sent again alone.
  bool rejected_whole = false;
};

struct PutCoalescerStats {
  uint64_t multi_put_requests = 0;  // requests that carried several puts
  uint64_t coalesced_puts = 0;      // puts sent in those requests
  uint64_t resent_alone = 0;        // multi-put requests refused whole, resent one by one
};

class PutCoalescer {
 public:
  // Sends one put alone (retries included). Called on a caller thread.
  using SendOne = std::function<Result<PutResult>(const CoalescedPut&)>;
  // Sends puts of one datastore (size >= 2, distinct rows) as one request.
  using SendMany = std::function<MultiPutAnswer(const std::vector<const CoalescedPut*>&)>;

  // REQUIRES: options' counts >= 1; both functions set.
  PutCoalescer(PutCoalescerOptions options, SendOne send_one, SendMany send_many);

  // Blocks until `put` has been sent (alone or with others) and returns its result.
  // REQUIRES: put.cell alive until this returns.
  Result<PutResult> Put(const CoalescedPut& put) EXCLUDES(mu_);

  PutCoalescerStats stats() const;
  // Puts waiting for a request slot now.
  size_t queued() const EXCLUDES(mu_);

 private:
  struct Waiting {
    const CoalescedPut* put = nullptr;
    Result<PutResult> result = Status(StatusCode::kInternal, "not sent");
    bool done = false;
  };
  // True when a waiting caller should send the queue now: a slot is free and
  // either no request runs or the waiting puts are at least the callers in
  // Put() divided by the slots. So under load requests carry about callers /
  // slots puts each, and a few callers never wait for each other.
  bool MayStart() const REQUIRES(mu_);
  // Removes the next request's puts from the queue: the first waiting put and
  // the later ones of its datastore that fit (one per row).
  std::vector<Waiting*> TakeRequest() REQUIRES(mu_);
  // Sends `batch` (without mu_) and stores each put's result.
  void Send(const std::vector<Waiting*>& batch);

  const PutCoalescerOptions options_;
  const SendOne send_one_;
  const SendMany send_many_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Waiting*> queue_ GUARDED_BY(mu_);
  int in_flight_ GUARDED_BY(mu_) = 0;
  size_t inside_ GUARDED_BY(mu_) = 0;  // callers in Put()
  std::atomic<uint64_t> multi_put_requests_{0}, coalesced_puts_{0}, resent_alone_{0};
};

}  // namespace cellar::internal
