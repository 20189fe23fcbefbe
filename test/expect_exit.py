#!/usr/bin/env python3
"""expect_exit.py CODE CMD [ARGS...]

Runs CMD and succeeds only when it exits with CODE (not a signal), writes
exactly one line to stderr, and that line starts with "kiln: error: " (or
"kiln-run: error: "). The
line is echoed to stdout for FileCheck. This is how the bad-input tests hold
kiln to "one clear line, exit 1, no crash"."""
import subprocess
import sys

code = int(sys.argv[1])
proc = subprocess.run(sys.argv[2:], capture_output=True, text=True)
lines = proc.stderr.splitlines()
print(proc.stderr, end="")
problems = []
if proc.returncode != code:
    problems.append(f"exit code {proc.returncode}, expected {code}")
if len(lines) != 1:
    problems.append(f"{len(lines)} lines on stderr, expected 1")
elif not lines[0].startswith(("kiln: error: ", "kiln-run: error: ")):
    problems.append("stderr does not start with 'kiln: error: '")
if problems:
    print("expect_exit: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
