#!/usr/bin/env python3
"""check_sampling.py DUMP.safetensors [--temperature T] [--top-k K]
[--top-p P] [--seed S] [--repetition-penalty R] [--presence-penalty X]
[--frequency-penalty F]

Re-draws every token of a `kiln run --dump-logits` file from the logits in
it, by the sampling rule written out here on its own (runtime/Sampling.h
and codegen/SampleKernel.cpp state it in C++): token s of the run is drawn
from the logits that preceded it (the prompt's last row for s = 0, else
decode row s - 1) with the uniform of (seed, s), after the penalties for the
prompt and the tokens before it. Greedy is the first largest logit; else
softmax(logits / T), cut to the top_k largest and then to the fewest largest
holding top_p of the mass, and the token whose share of the cumulative sum
(in vocabulary order) holds u times the total.

A device computes in float32 and this in float64: a token that differs
from this one is still accepted when a nudge of 1e-5 (relative) to u or to
top_p's target draws it, and reported as such. Prints one line, which
counts the tokens that are not the largest raw logit (a sampled or a
penalized choice); exit 1 on the first token the rule cannot have drawn. Pure Python (no numpy)."""
import argparse, json, math, struct, sys

ap = argparse.ArgumentParser()
ap.add_argument("dump")
ap.add_argument("--temperature", type=float, default=0.0)
ap.add_argument("--top-k", type=int, default=0)
ap.add_argument("--top-p", type=float, default=1.0)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--repetition-penalty", type=float, default=1.0)
ap.add_argument("--presence-penalty", type=float, default=0.0)
ap.add_argument("--frequency-penalty", type=float, default=0.0)
a = ap.parse_args()


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        code = {"F32": "f", "I32": "i"}[v["dtype"]]
        s, e = v["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        out[name] = (list(struct.unpack("<%d%s" % (len(raw) // 4, code), raw)),
                     v["shape"])
    return out


def hash32(x):  # the kernel's integer hash
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def uniform(seed, step):  # 24 bits of hash(seed ^ hash(step)), in [0, 1)
    return (hash32((seed ^ hash32(step)) & 0xFFFFFFFF) >> 8) / 16777216.0


T, top_p = f32(a.temperature), f32(a.top_p)
rep, pres, freq = f32(a.repetition_penalty), f32(a.presence_penalty), f32(a.frequency_penalty)
greedy = not T > 0 or a.top_k == 1


def penalize(logits, seen):
    out = list(logits)
    for i, c in enumerate(seen):
        if c > 0:
            l = out[i]
            l = f32(l / rep) if l > 0 else f32(l * rep)
            out[i] = f32(l - f32(pres + f32(freq * c)))
    return out


def first_largest(logits):
    best = 0
    for i, l in enumerate(logits):
        if l > logits[best] or (logits[best] != logits[best] and l == l):
            best = i
    return best


def draw(logits, u, target_scale=1.0):
    """The rule's token for uniform u, top_p's target scaled by
    target_scale."""
    v = len(logits)
    finite = [l if l == l else -math.inf for l in logits]  # NaN: smallest
    top = max(finite)
    by_size = sorted(range(v), key=lambda i: -finite[i])
    keep = set(by_size)
    if 1 < a.top_k < v:
        cut = finite[by_size[a.top_k - 1]]
        keep = {i for i in range(v) if finite[i] >= cut}  # ties stay in
    w = [math.exp((finite[i] - top) / T) if i in keep else 0.0 for i in range(v)]
    if top_p < 1:
        target, mass, i = top_p * sum(w) * target_scale, 0.0, 0
        while i < v:  # the largest logits first, equal ones together
            level = finite[by_size[i]]
            while i < v and finite[by_size[i]] == level:
                mass += w[by_size[i]]
                i += 1
            if mass > 0 and mass >= target:
                break
        keep = {j for j in keep if finite[j] >= level}
        w = [w[j] if j in keep else 0.0 for j in range(v)]
    r, pick = u * sum(w), first_largest(logits)
    for i in range(v):
        if w[i] <= 0:
            continue
        pick = i
        if r < w[i]:
            break
        r -= w[i]
    return pick


d = load(a.dump)
prompt = [int(t) for t in d["prompt_tokens"][0]]
tokens = [int(t) for t in d["decode_tokens"][0]]
prefill, (p, vocab) = d["prefill_logits"][0], d["prefill_logits"][1]
decode = d["decode_logits"][0]
seen = [0] * vocab
for t in prompt:
    seen[t] += 1
nudged = not_largest = 0
for s, token in enumerate(tokens):
    raw = prefill[(p - 1) * vocab:p * vocab] if s == 0 else \
        decode[(s - 1) * vocab:s * vocab]
    logits = penalize(raw, seen)
    if greedy:
        rule = first_largest(logits)
        ok = token == rule
    else:
        u = uniform(a.seed, s)
        rule = draw(logits, u)
        ok = token == rule
        if not ok and any(draw(logits, u * (1 + du), 1 + dp) == token
                          for du in (-1e-5, 0, 1e-5) for dp in (-1e-5, 0, 1e-5)):
            ok, nudged = True, nudged + 1
    if not ok:
        print(f"FAIL: step {s}: the run drew {token}, the rule draws {rule}"
              + ("" if greedy else f" (seed {a.seed}, u = {uniform(a.seed, s):.6f})"))
        sys.exit(1)
    not_largest += token != first_largest(raw)  # sampled, or penalized
    seen[token] += 1
how = "greedy" if greedy else f"seed {a.seed}"
print(f"ok: {len(tokens)} tokens as the rule draws them ({how}), "
      f"{not_largest} of them not the largest logit"
      + (f", {nudged} within rounding" if nudged else ""))
