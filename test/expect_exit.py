#!/usr/bin/env python3
"""expect_exit.py CODE CMD [ARGS...]

Runs CMD and succeeds only when it exits with CODE (not a signal), writes
exactly one line to stderr, and that line starts with "kiln: error: " (or
the same for kiln-run, kiln-opt, kiln-translate). The line is echoed to stdout for FileCheck. This is how the bad-input tests hold
kiln to "one clear line, exit 1, no crash"; errors/Inputs/matrix.py applies
the same rule (rule_problems) to a whole table of cases."""
import subprocess
import sys


def rule_problems(proc, code):
    """What breaks the rule in a finished process: its exit code, its
    stderr lines, the error prefix, a signal."""
    lines = proc.stderr.splitlines()
    problems = []
    if proc.returncode != code:
        problems.append(f"exit code {proc.returncode}, expected {code}")
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr, expected 1")
    elif not lines[0].startswith(tuple(
            t + ": error: "
            for t in ("kiln", "kiln-run", "kiln-opt", "kiln-translate"))):
        problems.append("stderr does not start with 'kiln: error: '")
    if proc.returncode < 0 or "core dumped" in proc.stderr:
        problems.append("crashed")
    return problems


if __name__ == "__main__":
    code = int(sys.argv[1])
    proc = subprocess.run(sys.argv[2:], capture_output=True, text=True)
    print(proc.stderr, end="")
    problems = rule_problems(proc, code)
    if problems:
        print("expect_exit: " + "; ".join(problems), file=sys.stderr)
        sys.exit(1)
