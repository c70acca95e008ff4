// WriteFileAtomically: a file that appears whole or not at all, for the
// "ready files" and "bootstrap files" a process writes for the scripts and
// tests that wait for it.
#pragma once

#include <string>

#include "base/status.h"

namespace cellar {

// Writes `contents` to a temporary file beside `path` (`path`.tmp.<pid>),
// flushes it to disk and renames it to `path`, so a reader sees either the
// old file (or none) or all of `contents`. Replaces an existing file.
// Internal naming the step and errno's text when a step fails (the temporary
// file is removed then). Thread-compatible (one writer per path).
[[nodiscard]] Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace cellar
