// Clang thread-safety analysis attributes
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), as macros that
// expand to nothing under other compilers (GCC ignores them).
//
// Usage:
//   class Queue {
//    public:
//     void Push(int v) EXCLUDES(mu_) { MutexLock lock(&mu_); PushLocked(v); }
//    private:
//     void PushLocked(int v) REQUIRES(mu_);
//     Mutex mu_;
//     std::deque<int> items_ GUARDED_BY(mu_);
//   };
// A clang build with -Wthread-safety (CMake option CELLAR_THREAD_SAFETY) then
// rejects any access to items_ without mu_ held. Annotated types: base/mutex.h.
#pragma once

#if defined(__clang__)
#define CELLAR_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CELLAR_THREAD_ANNOTATION(x)
#endif

// On a class: instances are capabilities (locks) named `x` in diagnostics.
#define CAPABILITY(x) CELLAR_THREAD_ANNOTATION(capability(x))
// On a class: an RAII object that holds a capability for its lifetime.
#define SCOPED_CAPABILITY CELLAR_THREAD_ANNOTATION(scoped_lockable)
// On a data member: read and written only with capability `x` held.
#define GUARDED_BY(x) CELLAR_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: the pointee is read and written only with `x` held.
#define PT_GUARDED_BY(x) CELLAR_THREAD_ANNOTATION(pt_guarded_by(x))
// On a function: the caller must hold the capabilities (exclusively).
#define REQUIRES(...) CELLAR_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// On a function: the caller must hold the capabilities, at least shared.
#define REQUIRES_SHARED(...) CELLAR_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold the capabilities (it takes them).
#define EXCLUDES(...) CELLAR_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: acquires the capabilities (`this` when none named).
#define ACQUIRE(...) CELLAR_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) CELLAR_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
// On a function: acquires the capability when it returns `x` (the first argument).
#define TRY_ACQUIRE(...) CELLAR_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: releases the capabilities (`this` when none named).
#define RELEASE(...) CELLAR_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) CELLAR_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
// On a function: checks at run time that the capability is held; the analysis
// assumes it is held afterwards.
#define ASSERT_CAPABILITY(x) CELLAR_THREAD_ANNOTATION(assert_capability(x))
// On a function: returns a reference to the capability `x`.
#define RETURN_CAPABILITY(x) CELLAR_THREAD_ANNOTATION(lock_returned(x))
// On a function: the analysis skips its body. Use sparingly, with a comment
// saying why the code is safe.
#define NO_THREAD_SAFETY_ANALYSIS CELLAR_THREAD_ANNOTATION(no_thread_safety_analysis)
