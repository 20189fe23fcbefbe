#!/usr/bin/env python3
"""check_text.py TOKENIZER PROMPT OUTPUT DUMP [STOP]: holds `kiln run
--prompt` to SentencePiece's own tools. The dump's prompt ids must be the
beginning of sequence (1) and spm_encode's ids of PROMPT; the first line
kiln printed must be PROMPT followed by the continuation spm_decode makes of
the generated ids (decoded after the prompt, so spaces come out right).
With STOP, the continuation must hold STOP only at its end (the last token
completed it) and the printed text must end just before it."""
import json, struct, subprocess, sys

model, prompt, output, dump = sys.argv[1:5]
stop = sys.argv[5] if len(sys.argv) > 5 else None


def spm(tool, text, *args):
    return subprocess.run([tool, "--model=" + model, *args], input=text,
                          capture_output=True, text=True, check=True).stdout


def ids_of(path, name):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    begin, end = header[name]["data_offsets"]
    data = raw[8 + n + begin:8 + n + end]
    return list(struct.unpack("<%di" % (len(data) // 4), data))


prompt_ids = [int(x) for x in spm("spm_encode", prompt + "\n",
                                  "--output_format=id").split()]
got_prompt = ids_of(dump, "prompt_tokens")
tokens = ids_of(dump, "decode_tokens")
problems = []
if got_prompt != [1] + prompt_ids:
    problems.append(f"prompt ids {got_prompt}, spm_encode says [1] + {prompt_ids}")
decode = lambda ids: spm("spm_decode", " ".join(map(str, ids)) + "\n",
                         "--input_format=id").rstrip("\n")
continuation = decode(prompt_ids + tokens)[len(decode(prompt_ids)):]
if stop is not None:
    before = decode(prompt_ids + tokens[:-1])[len(decode(prompt_ids)):]
    if stop not in continuation or stop in before:
        problems.append(f"{stop!r} is not completed by the last token of {continuation!r}")
    continuation = continuation[:continuation.find(stop)]
expected = prompt + continuation
printed = open(output).read().split("\n")[0]
if printed != expected:
    problems.append(f"printed {printed!r}, expected {expected!r}")
if not tokens:
    problems.append("no tokens generated")
print("FAIL: " + "; ".join(problems) if problems else
      f"ok: prompt {len(got_prompt)} ids, {len(tokens)} tokens of text")
sys.exit(1 if problems else 0)
