// Preloaded into the ThreadSanitizer test run only (CELLAR_SANITIZE=thread;
// scripts/test sets LD_PRELOAD). librdkafka uses C11 threads (thrd_create,
// mtx_*, cnd_*), which glibc implements by calling its pthread internals
// directly, past TSan's pthread interceptors: GCC 12's (and clang 14's) TSan
// runtime then never sees librdkafka's threads start (they crash on their first
// malloc) nor its locks (every hand-over between its threads and Cellar's
// reads as a race). These definitions route the C11 calls through the public
// pthread functions, which TSan intercepts; glibc's mtx_t/cnd_t/thrd_t are
// its pthread types, so the layouts agree. Built without -fsanitize=thread and
// against libc only, so that the child processes the tests start (mariadbd,
// ...) load it too without harm.
#include <pthread.h>
#include <threads.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace {

struct Start {
  thrd_start_t fn;
  void* arg;
};

void* Trampoline(void* p) {
  Start s = *static_cast<Start*>(p);
  std::free(p);
  // glibc's thrd_join reads the int back from the void* (intptr_t) result.
  return reinterpret_cast<void*>(static_cast<intptr_t>(s.fn(s.arg)));
}

int Result(int err) {
  switch (err) {
    case 0:
      return thrd_success;
    case ENOMEM:
    case EAGAIN:
      return thrd_nomem;
    case EBUSY:
      return thrd_busy;
    case ETIMEDOUT:
      return thrd_timedout;
    default:
      return thrd_error;
  }
}

pthread_mutex_t* M(mtx_t* m) { return reinterpret_cast<pthread_mutex_t*>(m); }
pthread_cond_t* C(cnd_t* c) { return reinterpret_cast<pthread_cond_t*>(c); }

}  // namespace

extern "C" {

int thrd_create(thrd_t* thr, thrd_start_t fn, void* arg) {
  auto* s = static_cast<Start*>(std::malloc(sizeof(Start)));
  if (!s) return thrd_nomem;
  *s = Start{fn, arg};
  const int err = pthread_create(thr, nullptr, Trampoline, s);
  if (err != 0) std::free(s);
  return Result(err);
}

int thrd_join(thrd_t thr, int* res) {
  void* out = nullptr;
  const int err = pthread_join(thr, &out);
  if (err == 0 && res) *res = static_cast<int>(reinterpret_cast<intptr_t>(out));
  return Result(err);
}

int thrd_detach(thrd_t thr) { return Result(pthread_detach(thr)); }

int mtx_init(mtx_t* m, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(
      &attr, (type & mtx_recursive) ? PTHREAD_MUTEX_RECURSIVE : PTHREAD_MUTEX_NORMAL);
  const int err = pthread_mutex_init(M(m), &attr);
  pthread_mutexattr_destroy(&attr);
  return Result(err);
}
int mtx_lock(mtx_t* m) { return Result(pthread_mutex_lock(M(m))); }
int mtx_trylock(mtx_t* m) { return Result(pthread_mutex_trylock(M(m))); }
int mtx_timedlock(mtx_t* m, const struct timespec* ts) {
  return Result(pthread_mutex_timedlock(M(m), ts));
}
int mtx_unlock(mtx_t* m) { return Result(pthread_mutex_unlock(M(m))); }
void mtx_destroy(mtx_t* m) { pthread_mutex_destroy(M(m)); }

int cnd_init(cnd_t* c) { return Result(pthread_cond_init(C(c), nullptr)); }
int cnd_signal(cnd_t* c) { return Result(pthread_cond_signal(C(c))); }
int cnd_broadcast(cnd_t* c) { return Result(pthread_cond_broadcast(C(c))); }
int cnd_wait(cnd_t* c, mtx_t* m) { return Result(pthread_cond_wait(C(c), M(m))); }
int cnd_timedwait(cnd_t* c, mtx_t* m, const struct timespec* ts) {
  return Result(pthread_cond_timedwait(C(c), M(m), ts));
}
void cnd_destroy(cnd_t* c) { pthread_cond_destroy(C(c)); }

}  // extern "C"
