// TriggerRunner::Replay (trigger_runner.h): a trigger run over the cell
// tables (shard_log) instead of Kafka, on the consumer's keyed pool so each
// row keeps its one-at-a-time order with the live events.
#include <memory>

#include "base/log.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "triggers/internal/trigger_runner.h"

namespace cellar::internal {

Status TriggerRunner::Replay(const ReplayFrom& from) {
  // Shared with the submitted tasks, which may outlive an interrupted replay.
  struct State {
    Mutex mu;
    CondVar cv;
    size_t outstanding GUARDED_BY(mu) = 0;
  };
  auto state = std::make_shared<State>();
  // The pool the replay runs on (a resume replaces the consumer; this one
  // stays alive until the replay returns).
  const std::shared_ptr<KeyedConsumer> pool = consumer();
  auto interrupted = [&]() -> std::optional<Status> {
    if (stop_requested_ || pool->stopping()) return Aborted("replay interrupted by stop");
    if (paused_ || pool->paused()) return Aborted("replay interrupted: the trigger paused");
    return std::nullopt;
  };
  uint64_t submitted = 0;
  for (uint32_t shard = 0; shard < config_.shards; ++shard) {
    auto it = from.after_added_id.find(shard);
    uint64_t after = it == from.after_added_id.end() ? 0 : it->second;
    while (true) {
      auto page = store_->ShardLog(spec_.datastore, shard, after, 1000);
      if (!page.ok()) return page.status();
      if (page->cells.empty()) break;
      after = page->next_after;
      for (Cell& c : page->cells) {
        if (from.time && c.created_at < *from.time) continue;
        if (c.column != spec_.column) continue;
        if (c.tombstone ? !spec_.options.include_tombstones
                        : !MatchesFilter(spec_.options.filter, c.body))
          continue;
        auto work = std::make_shared<Work>();
        work->event.datastore = spec_.datastore;
        work->event.cell = std::move(c);
        work->source_topic = "replay";
        work->partition_label = "replay";
        {
          MutexLock lock(&state->mu);
          while (state->outstanding >= static_cast<size_t>(spec_.options.max_pending)) {
            if (auto s = interrupted()) return *s;
            state->cv.WaitFor(&state->mu, std::chrono::milliseconds(100));
          }
          ++state->outstanding;
        }
        ++submitted;
        pool->Submit(work->event.cell.row_key.ToString(), [this, work, state] {
          Work* one = work.get();
          // Abandoned (never finishes) when the replay is interrupted.
          if (Halted() || !Process({&one, 1})) return;
          MutexLock lock(&state->mu);
          --state->outstanding;
          state->cv.NotifyAll();
        });
      }
    }
  }
  // Wait for every replayed event (an abandoned one, on stop or pause, never finishes).
  MutexLock lock(&state->mu);
  while (state->outstanding > 0) {
    if (auto s = interrupted()) return *s;
    state->cv.WaitFor(&state->mu, std::chrono::milliseconds(100));
  }
  LogInfo("trigger", "replay done",
          {{"trigger", spec_.name}, {"events", std::to_string(submitted)}});
  return Status::Ok();
}

}  // namespace cellar::internal
