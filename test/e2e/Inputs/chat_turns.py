#!/usr/bin/env python3
"""chat_turns.py: checks kiln run --chat's kept KV cache.

  chat_turns.py ids REPORT OUT        writes, from an interactive chat's report,
                                      the whole conversation's tokens up to the
                                      last turn's prompt (turn 1's prompt and
                                      reply, ..., the last turn's prompt) as
                                      --prompt-ids, and the last reply's length
  chat_turns.py last REPORT OUT       the last turn's prompt alone (a control:
                                      without the earlier turns' cache)
  chat_turns.py compare REPORT RUN    the last turn's reply must be the tokens
                                      RUN (kiln run's output on those ids from
                                      scratch) generated
  chat_turns.py prompt DUMP CASES NAME TOKENIZER
                                      a --dump-logits file's prompt must be
                                      conversations.json's ids for NAME
Prints one line; exit 0 when it holds."""
import json, re, struct, sys

def turns(report):
    out = []
    for line in open(report):
        m = re.match(r"\s+turn (\d+): prefilled (\d+) tokens at positions (\d+)-(\d+) .*?: ?([\d ]*)$", line)
        if m:
            out.append({"start": int(m[3]), "reply": [int(x) for x in m[5].split()]})
        m = re.match(r"\s+prompt ids ([\d ]+)$", line)
        if m:
            out[-1]["prompt"] = [int(x) for x in m[1].split()]
    return out

mode = sys.argv[1]
if mode == "ids":
    t = turns(sys.argv[2])
    ids = []
    for turn in t[:-1]:
        assert turn["start"] == len(ids), (turn["start"], len(ids))
        ids += turn["prompt"] + turn["reply"]
    assert t[-1]["start"] == len(ids), "the last turn does not start after the others"
    ids += t[-1]["prompt"]
    open(sys.argv[3], "w").write(",".join(map(str, ids)))
    print(len(t[-1]["reply"]))
elif mode == "last":
    open(sys.argv[3], "w").write(",".join(map(str, turns(sys.argv[2])[-1]["prompt"])))
elif mode == "compare":
    last = turns(sys.argv[2])[-1]["reply"]
    got = []
    for line in open(sys.argv[3]):
        if line.strip().startswith("generated"):
            got = [int(x) for x in line.split()[1:]]
    ok = got[:len(last)] == last and len(last) > 0
    print("ok: the kept cache's reply is the fresh run's" if ok else f"FAIL: kept {last}, fresh {got}")
    sys.exit(0 if ok else 1)
elif mode == "prompt":
    b = open(sys.argv[2], "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])["prompt_tokens"]
    s, e = h["data_offsets"]
    got = list(struct.unpack("<%di" % ((e - s) // 4), b[8 + n + s:8 + n + e]))
    case = [c for c in json.load(open(sys.argv[3]))["conversations"] if c["name"] == sys.argv[4]][0]
    want = case["results"][sys.argv[5]]["ids"]
    print("ok: Meta's ids" if got == want else f"FAIL: {got} != {want}")
    sys.exit(0 if got == want else 1)
