#include "client/internal/put_coalescer.h"

#include <algorithm>

namespace cellar::internal {

PutCoalescer::PutCoalescer(PutCoalescerOptions options, SendOne send_one, SendMany send_many)
    : options_(options), send_one_(std::move(send_one)), send_many_(std::move(send_many)) {}

Result<PutResult> PutCoalescer::Put(const CoalescedPut& put) {
  Waiting me;
  me.put = &put;
  MutexLock lock(&mu_);
  queue_.push_back(&me);
  ++inside_;
  while (!me.done) {
    if (!MayStart()) {
      cv_.Wait(&mu_);
      continue;
    }
    // A free request slot: this thread sends what waits (its own put, or the
    // oldest others' if a running request already carries its own).
    std::vector<Waiting*> batch = TakeRequest();
    ++in_flight_;
    lock.Unlock();
    Send(batch);
    lock.Lock();
    --in_flight_;
    for (Waiting* w : batch) w->done = true;
    cv_.NotifyAll();  // the answered callers, and a waiter to use the free slot
  }
  --inside_;
  return std::move(me.result);
}

bool PutCoalescer::MayStart() const {
  return !queue_.empty() && in_flight_ < options_.requests_in_flight &&
         (in_flight_ == 0 ||
          queue_.size() * static_cast<size_t>(options_.requests_in_flight) >= inside_);
}

std::vector<PutCoalescer::Waiting*> PutCoalescer::TakeRequest() {
  std::vector<Waiting*> batch;
  const std::string& datastore = queue_.front()->put->datastore;
  size_t bytes = 0;
  for (auto it = queue_.begin();
       it != queue_.end() && batch.size() < static_cast<size_t>(options_.max_puts_per_request);) {
    const CoalescedPut& p = *(*it)->put;
    const bool same_row = std::any_of(batch.begin(), batch.end(), [&](const Waiting* w) {
      return w->put->cell->row_key == p.cell->row_key;
    });
    const bool fits = batch.empty() || bytes + p.body.size() <= options_.max_body_bytes_per_request;
    if (p.datastore != datastore || same_row || !fits) {
      ++it;
      continue;
    }
    bytes += p.body.size();
    batch.push_back(*it);
    it = queue_.erase(it);
  }
  return batch;
}

void PutCoalescer::Send(const std::vector<Waiting*>& batch) {
  if (batch.size() == 1) {
    batch[0]->result = send_one_(*batch[0]->put);
    return;
  }
  std::vector<const CoalescedPut*> puts;
  puts.reserve(batch.size());
  for (const Waiting* w : batch) puts.push_back(w->put);
  multi_put_requests_.fetch_add(1);
  coalesced_puts_.fetch_add(batch.size());
  MultiPutAnswer answer = send_many_(puts);
  if (answer.rejected_whole) {
    resent_alone_.fetch_add(1);
    for (Waiting* w : batch) w->result = send_one_(*w->put);
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i)
    batch[i]->result = i < answer.results.size()
                           ? std::move(answer.results[i])
                           : Result<PutResult>(Internal("the multi-put answer has no result"));
}

size_t PutCoalescer::queued() const {
  MutexLock lock(&mu_);
  return queue_.size();
}

PutCoalescerStats PutCoalescer::stats() const {
  return PutCoalescerStats{multi_put_requests_.load(), coalesced_puts_.load(),
                           resent_alone_.load()};
}

}  // namespace cellar::internal
