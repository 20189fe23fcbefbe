#!/usr/bin/env python3
"""check_eval.py EVAL.json BASE0.safetensors COMPARED0.safetensors [BASE1 COMPARED1 ...]

Recomputes kiln eval's statistics from `kiln run --max-new-tokens 0
--dump-logits` files of the base and the compared model (one pair per
sequence: their prompt_tokens and prefill_logits), independently of kiln,
and checks every number in kiln eval's --json against them within 1e-6
relative (1e-12 absolute, for zeros). Prints one line per sequence and one
overall, then "ok" or the differences. Standard library only (no numpy)."""
import json
import math
import struct
import sys


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    base = 8 + n
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        code = {"F32": "f", "F16": "e", "I32": "i", "I64": "q"}[v["dtype"]]
        s, e = v["data_offsets"]
        raw = b[base + s:base + e]
        vals = struct.unpack("<%d%s" % (len(raw) // struct.calcsize(code), code), raw)
        out[k] = (list(vals), v["shape"])
    return out


def rows(dump):
    vals, shape = dump["prefill_logits"]
    n, v = shape
    return [vals[i * v:(i + 1) * v] for i in range(n)]


def log_softmax(row):
    m = max(row)
    lse = m + math.log(math.fsum(math.exp(x - m) for x in row))
    return [x - lse for x in row]


def argmax(row):
    # The lowest id wins a tie (greedy sampling's rule).
    best = 0
    for i, x in enumerate(row):
        if x > row[best]:
            best = i
    return best


def quantile(sorted_values, q):
    # Linear interpolation between the closest ranks (numpy's default).
    at = q * (len(sorted_values) - 1)
    lo = int(math.floor(at))
    if lo + 1 >= len(sorted_values):
        return sorted_values[-1]
    f = at - lo
    return sorted_values[lo] * (1 - f) + sorted_values[lo + 1] * f


class Tally:
    def __init__(self):
        self.tokens = self.predicted = self.agree = 0
        self.kl = []
        self.max_diff = 0.0
        self.diffs = []
        self.nll_base = []
        self.nll_compared = []

    def add(self, o):
        self.tokens += o.tokens
        self.predicted += o.predicted
        self.agree += o.agree
        self.kl += o.kl
        self.max_diff = max(self.max_diff, o.max_diff)
        self.diffs += o.diffs
        self.nll_base += o.nll_base
        self.nll_compared += o.nll_compared

    def summary(self):
        kl = sorted(self.kl)
        return {
            "tokens": self.tokens,
            "predicted": self.predicted,
            "kl": {"mean": math.fsum(kl) / len(kl), "median": quantile(kl, 0.5),
                   "p99": quantile(kl, 0.99), "max": kl[-1]},
            "top1_agree": self.agree,
            "top1_agreement": self.agree / self.tokens,
            "max_abs_logit_diff": self.max_diff,
            "mean_abs_logit_diff": math.fsum(self.diffs) / len(self.diffs),
            "ppl_base": math.exp(math.fsum(self.nll_base) / self.predicted),
            "ppl_compared": math.exp(math.fsum(self.nll_compared) / self.predicted),
        }


def sequence(base_path, compared_path):
    a, b = load(base_path), load(compared_path)
    tokens = [int(t) for t in a["prompt_tokens"][0]]
    if tokens != [int(t) for t in b["prompt_tokens"][0]]:
        sys.exit(f"{base_path} and {compared_path} hold different prompts")
    t = Tally()
    t.tokens, t.predicted = len(tokens), len(tokens) - 1
    for p, (ra, rb) in enumerate(zip(rows(a), rows(b))):
        la, lb = log_softmax(ra), log_softmax(rb)
        t.kl.append(math.fsum(math.exp(x) * (x - y) for x, y in zip(la, lb)))
        t.agree += argmax(ra) == argmax(rb)
        d = [abs(x - y) for x, y in zip(ra, rb)]
        t.max_diff = max([t.max_diff] + d)
        t.diffs += d
        if p + 1 < len(tokens):
            t.nll_base.append(-la[tokens[p + 1]])
            t.nll_compared.append(-lb[tokens[p + 1]])
    return t


def flat(prefix, d):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(prefix + k + ".", v)
        else:
            yield prefix + k, v


def main():
    got = json.load(open(sys.argv[1]))
    pairs = sys.argv[2:]
    if len(pairs) % 2 or len(pairs) // 2 != len(got["sequences"]):
        sys.exit("give a base and a compared dump for each of the json's "
                 f"{len(got['sequences'])} sequences")
    tallies = [sequence(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)]
    overall = Tally()
    for t in tallies:
        overall.add(t)
    bad = []
    checked = [(f"sequence {i}", t.summary(), got["sequences"][i])
               for i, t in enumerate(tallies)]
    checked.append(("overall", overall.summary(), got["overall"]))
    for name, want, have in checked:
        have_flat = dict(flat("", have))
        for key, w in flat("", want):
            h = have_flat.get(key)
            if h is None or abs(h - w) > 1e-6 * max(abs(h), abs(w)) + 1e-12:
                bad.append(f"{name} {key}: kiln {h}, python {w}")
        print(f"{name}: KL mean {want['kl']['mean']:.4e} max {want['kl']['max']:.4e}, "
              f"top-1 {want['top1_agree']} of {want['tokens']}, "
              f"max |diff| {want['max_abs_logit_diff']:.4e}")
    print("FAIL: " + "; ".join(bad) if bad else "ok: kiln eval matches within 1e-6")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
