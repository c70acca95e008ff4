#!/usr/bin/env python3
"""Runs the README's tutorials and checks that each command prints what the
text says it prints, so the text cannot drift from what runs
(tests/system_test.cc starts the stack of `scripts/up` and calls this).

In the Markdown:
- a ```console block holds commands ("$ " lines; a line ending in "\\" goes
  on) each followed by the lines it prints; "..." in an expected line stands
  for any text. Every command must exit 0 and print exactly those lines (none
  when none are given). A command ending in "# repeat until it shows" waits on
  something asynchronous: it is run again (every 0.5 s, up to 60 s) until its
  output matches.
- a block after an HTML comment "<!-- from: PATH -->" must be the text of
  that file (between its "[readme: ...]" and "[end]" lines when it has them),
  indentation aside.

All commands of the file run in one bash session, in order, in --workdir
(which looks like the repository: `.local` is the running stack's state).
Everything the session started is killed at the end.

  readme_tutorials.py --readme README.md --workdir DIR
Exit status 0 when every command and every quoted file matched.
"""
import argparse
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time

REPEAT = "# repeat until it shows"
SENTINEL = "__readme_tutorial_done__"


def parse(markdown):
    """(commands, quotes): commands as (line, text, expected lines, repeat),
    quotes as (line, path, block text)."""
    lines = markdown.split("\n")
    commands, quotes = [], []
    i, pending_from = 0, None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"<!-- from: (\S+) -->", line.strip())
        if m:
            pending_from = m.group(1)
        fence = re.match(r"```(\w*)", line)
        if not fence:
            i += 1
            continue
        lang, start = fence.group(1), i + 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        if pending_from:
            quotes.append((start, pending_from, "\n".join(body)))
            pending_from = None
        if lang != "console":
            continue
        k = 0
        while k < len(body):
            if not body[k].startswith("$ "):
                raise SystemExit(f"README line {start + k + 1}: output before any command")
            at = start + k + 1
            text = body[k][2:]
            while text.endswith("\\") and k + 1 < len(body):
                k += 1
                text += "\n" + body[k]
            k += 1
            expected = []
            while k < len(body) and not body[k].startswith("$ "):
                expected.append(body[k])
                k += 1
            commands.append((at, text, expected, text.rstrip().endswith(REPEAT)))
    return commands, quotes


def matches(expected, actual):
    if len(expected) != len(actual):
        return False
    for e, a in zip(expected, actual):
        pattern = ".*".join(re.escape(part) for part in e.rstrip().split("..."))
        if not re.fullmatch(pattern, a.rstrip()):
            return False
    return True


def region(text):
    """The lines between "[readme: ...]" and "[end]" markers, or all of it."""
    lines = text.split("\n")
    starts = [n for n, l in enumerate(lines) if "[readme:" in l]
    if starts:
        end = next(n for n in range(starts[0], len(lines)) if "[end]" in lines[n])
        lines = lines[starts[0] + 1:end]
    return textwrap.dedent("\n".join(lines)).strip("\n")


class Session:
    def __init__(self, workdir):
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], cwd=workdir, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def run(self, command, timeout):
        """(exit code, output lines); exit code None on timeout."""
        self.proc.stdin.write(f"{command}\n__rc=$?; echo; echo {SENTINEL} $__rc\n".encode())
        self.proc.stdin.flush()
        out, deadline = b"", time.time() + timeout
        while True:
            marker = out.rfind(SENTINEL.encode())
            if marker >= 0 and out.endswith(b"\n", marker):
                code = int(out[marker + len(SENTINEL):].split()[0])
                text = out[:marker].decode(errors="replace")[:-1]  # the echo's newline
                if text.endswith("\n"):
                    text = text[:-1]
                return code, text.split("\n") if text else []
            left = deadline - time.time()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return None, out.decode(errors="replace").split("\n")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None, out.decode(errors="replace").split("\n")
            out += chunk

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--readme", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    commands, quotes = parse(open(args.readme, encoding="utf-8").read())
    failures = 0
    for at, path, block in quotes:
        with open(os.path.join(args.workdir, path), encoding="utf-8") as f:
            if region(f.read()) != textwrap.dedent(block).strip("\n"):
                print(f"README line {at}: the block is not the text of {path}")
                failures += 1
    if not commands:
        print("no console blocks found")
        return 1
    session = Session(args.workdir)
    try:
        for at, text, expected, repeat in commands:
            deadline = time.time() + (60 if repeat else 0)
            while True:
                code, lines = session.run(text, timeout=120)
                ok = code == 0 and matches(expected, lines)
                if ok or code is None or time.time() >= deadline:
                    break
                time.sleep(0.5)  # the condition is re-checked, not assumed
            shown = text.split("\n")[0]
            if ok:
                print(f"ok    README line {at}: {shown}")
                continue
            failures += 1
            print(f"FAIL  README line {at}: {shown}")
            print("      exit code: " + ("timed out" if code is None else str(code)))
            print("      expected:\n" + "".join(f"        {l}\n" for l in expected), end="")
            print("      printed:\n" + "".join(f"        {l}\n" for l in lines[-40:]), end="")
            if code is None:
                break
    finally:
        session.close()
    print(f"{len(commands)} commands, {len(quotes)} quoted files, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
