#!/usr/bin/env bash
# Each program given is linked so that jemalloc, not glibc's malloc, serves the
# whole process (CMakeLists.txt, cellar_use_jemalloc): with MALLOC_CONF asking
# for statistics, jemalloc prints them at exit; glibc ignores the variable.
set -uo pipefail
status=0
for program in "$@"; do
  if MALLOC_CONF=stats_print:true "$program" --help 2>&1 >/dev/null |
      grep -q "Begin jemalloc statistics"; then
    echo "ok: $(basename "$program") allocates with jemalloc"
  else
    echo "FAILED: $(basename "$program") does not allocate with jemalloc" >&2
    status=1
  fi
done
exit $status
