#!/usr/bin/env python3
"""gpu_batch.py: the batched checks of bench/gpu_check.sh.

  gpu_batch.py late-plan FIXTURE
      The requests of a run where the fixture's prompt joins a running
      batch: prints PROMPT_IDS STOP_ID. Request 0 is a prefix of the
      fixture's prompt whose next token (the argmax of Meta's prefill
      logits there, by the widest margin) the fixture's greedy
      continuation never produces; with that token as the stop id,
      request 0 ends at its first token and frees its slot, so that of the
      four copies of the prompt behind it, the last is admitted at the
      second decode step while the other three decode.
  gpu_batch.py dumps EXPECTED DUMP FIRST LAST
      test/compare_logits.py on every request's dump DUMP.N (N from FIRST
      to LAST; kiln-run's naming) against EXPECTED: one line, the verdict.
  gpu_batch.py joined LOG NEW REQUESTS
      From kiln-run's report (a run of REQUESTS requests of NEW tokens
      each): whether the last request joined a batch that was running, at
      which decode step (steps = the step it joined at - 1 + NEW).
  gpu_batch.py tokens LOG [DUMP]
      Whether every request of kiln-run's report (identical prompts) has
      the same greedy tokens as the last one, which ran alone. With the
      run's dumps (DUMP.N), also how far each request's logits are from
      the lone one's, and where the tokens part, whether that was a near
      tie there (the two tokens' logits in the lone run).
Each prints one line, starting "ok" or "FAIL", and exits 1 on FAIL."""
import array
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "..", "test", "compare_logits.py")


def done(line):
    print(line)
    sys.exit(0 if line.startswith("ok") else 1)


def tensor(path, name):
    """One F32 tensor of a safetensors file: (values, shape)."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])[name]
    assert h["dtype"] == "F32", f"{path}: {name} is {h['dtype']}, not F32"
    s, e = h["data_offsets"]
    return struct.unpack(f"<{(e - s) // 4}f", b[8 + n + s:8 + n + e]), h["shape"]


def late_plan(fixture):
    expected = json.load(open(os.path.join(fixture, "expected.json")))
    prompt = expected["prompt_tokens"]
    continuation = set(expected["greedy_continuation"])
    logits, (rows, vocab) = tensor(
        os.path.join(fixture, "expected.safetensors"), "prefill_logits")
    best = None  # (margin, prefix length, token)
    for i in range(rows - 1):
        row = logits[i * vocab:(i + 1) * vocab]
        top = sorted(range(vocab), key=lambda t: -row[t])[:2]
        if top[0] in continuation:
            continue
        margin = row[top[0]] - row[top[1]]
        if best is None or margin > best[0]:
            best = (margin, i + 1, top[0])
    if best is None:
        done(f"FAIL: {fixture}: no prefix of the prompt predicts a token "
             "outside the greedy continuation")
    ids = ",".join(map(str, prompt))
    lead = ",".join(map(str, prompt[:best[1]]))
    print(f"{lead};{ids};{ids};{ids};{ids} {best[2]}")


def dumps(expected, dump, first, last):
    stem, ext = os.path.splitext(dump)
    worst = []
    for i in range(first, last + 1):
        r = subprocess.run([sys.executable, COMPARE, expected,
                            f"{stem}.{i}{ext}", "5e-2"],
                           capture_output=True, text=True)
        line = (r.stdout + r.stderr).strip().splitlines()
        line = line[-1] if line else f"compare_logits.py exited {r.returncode}"
        if r.returncode != 0:
            done(f"FAIL: request {i}: {line}")
        m = re.search(r"max abs error ([0-9.e+-]+)", line)
        worst.append(float(m.group(1)) if m else 0.0)
    done(f"ok: all {len(worst)} requests match Meta's logits (worst max abs "
         f"error {max(worst):.3g} <= 0.05, tokens exact)")


def joined(log, new, requests):
    text = open(log).read()
    steps = re.search(r"decode +(\d+) steps", text)
    peak = re.search(r"batches of up to (\d+) sequences", text)
    if not steps or not peak:
        done("FAIL: no batch report in kiln-run's output")
    steps, peak = int(steps.group(1)), int(peak.group(1))
    # The last request decodes NEW steps from the step it joined at.
    at = steps - new + 1
    others = requests - 2  # the copies admitted first (request 0 stopped)
    if 1 < at <= new and peak == others + 1:
        done(f"ok: it joined at decode step {at} of {steps}, beside "
             f"{others} running requests")
    done(f"FAIL: it did not join a running batch ({steps} decode steps, "
         f"batches of up to {peak})")


def logits(dump, i, n):
    """Request i's logits from its dump: a row per token it generated
    (the prefill's last row, then each decode step's but the last)."""
    b = open(f"{os.path.splitext(dump)[0]}.{i}{os.path.splitext(dump)[1]}",
             "rb").read()
    size = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + size])

    def rows(name):
        s, e = header[name]["data_offsets"]
        a = array.array("f")
        a.frombytes(b[8 + size + s:8 + size + e])
        return a, header[name]["shape"]

    pre, (p, vocab) = rows("prefill_logits")
    dec, _ = rows("decode_logits")
    out = [pre[(p - 1) * vocab:p * vocab]]
    out += [dec[k * vocab:(k + 1) * vocab] for k in range(n - 1)]
    return out


def tokens(log, dump=None):
    lists = re.findall(r"^ *request (\d+): .*?:((?: \d+)*)$", open(log).read(),
                       re.M)
    if len(lists) < 2:
        done("FAIL: fewer than two requests in kiln-run's output")
    lone_id, alone = lists[-1][0], [int(t) for t in lists[-1][1].split()]
    lone = logits(dump, int(lone_id), len(alone)) if dump else None
    worst = 0.0
    for i, t in lists[:-1]:
        t = [int(x) for x in t.split()]
        if t != alone:
            j = next((k for k in range(min(len(t), len(alone)))
                      if t[k] != alone[k]), min(len(t), len(alone)))
            tie = ""
            if lone and j < len(t) and j < len(alone):
                row = lone[j]
                gap = row[alone[j]] - row[t[j]]
                tie = (f"; in the lone run their logits are {gap:.3g} apart"
                       f"{' (a near tie)' if gap < 5e-2 * max(1.0, max(row)) else ''}")
            done(f"FAIL: request {i} differs from request {lone_id} (alone) "
                 f"at token {j}: {' '.join(map(str, t[j:j + 4]))} against "
                 f"{' '.join(map(str, alone[j:j + 4]))}{tie}")
        if lone:
            for a, b in zip(logits(dump, int(i), len(t)), lone):
                worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
    close = f", logits within {worst:.3g} of the lone request's" if lone else ""
    done(f"ok: the same {len(alone)} greedy tokens in all {len(lists)} "
         f"requests{close}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "late-plan":
        late_plan(*args)
    elif cmd == "dumps":
        dumps(args[0], args[1], int(args[2]), int(args[3]))
    elif cmd == "joined":
        joined(args[0], int(args[1]), int(args[2]))
    elif cmd == "tokens":
        tokens(*args)
    else:
        sys.exit(f"gpu_batch.py: unknown command {cmd}; see its docstring")
