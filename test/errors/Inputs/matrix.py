#!/usr/bin/env python3
"""matrix.py WORK KILN KILN_RUN FIXTURE MAKE_BAD_MODEL: the bad-input
matrix. Every command that reads a model folder, a bundle or a tuning
database gets each damaged one, and every command some bad flags; each
case must exit 1 (bad input) or 2 (bad usage) with exactly one line on
stderr, "kiln: error: " (or "kiln-run: error: ") naming the input, no
signal or core dump, and leave no output file behind. Prints a line per
case; exits 1 if any case breaks the rule."""
import os, subprocess, sys

# The rule itself is expect_exit.py's.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from expect_exit import rule_problems  # noqa: E402

work, kiln, kiln_run, fixture, make_bad = sys.argv[1:6]
os.makedirs(work, exist_ok=True)
py = sys.executable


def path(name):
    return os.path.join(work, name)


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True)


# The damaged inputs, built once.
models = ["garbled-config", "missing-field", "heads-not-dividing",
          "not-llama", "truncated", "header-not-json", "missing-tensor",
          "int-weight"]
for m in models:
    subprocess.check_call([py, make_bad, fixture, path("model-" + m), m])
good_bundle = path("good.kiln")
subprocess.check_call([kiln, "compile", "tiny-gqa", "-o", good_bundle],
                      stdout=subprocess.DEVNULL)
raw = open(good_bundle, "rb").read()
bundles = {
    "bundle-truncated": raw[:len(raw) // 2],
    "bundle-flipped": raw[:len(raw) // 3] + bytes([raw[len(raw) // 3] ^ 1])
    + raw[len(raw) // 3 + 1:],
    "bundle-not-a-bundle": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
    "bundle-empty": b"",
}


def with_program(data, change):
    """The bundle `data` with its program JSON changed (the checksum is not
    updated: the reader must refuse the program before it gets there)."""
    import json, struct
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    program = json.loads(header["__metadata__"]["program"])
    change(program)
    header["__metadata__"]["program"] = json.dumps(program)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data[8 + n:]


def float_grid(program):
    launch = next(l for l in program["decode"]["launches"] if "grid" in l)
    launch["grid"][0] = 1e300


bundles["bundle-float-grid"] = with_program(raw, float_grid)
for name, data in bundles.items():
    open(path(name + ".kiln"), "wb").write(data)
open(path("db-garbled.json"), "w").write('{"format": "kiln-tuning-db", "ver')
open(path("db-not-a-db.json"), "w").write('[1, 2, 3]')
# Numbers where integers belong: casting 8.9e114 to int is undefined
# behaviour (the fuzzer's finding); they must be refused as bad input.
open(path("db-float-version.json"), "w").write(
    '{"format": "kiln-tuning-db", "version": 8.88889e+114, "entries": []}')
open(path("db-float-batch.json"), "w").write(
    '{"format": "kiln-tuning-db", "version": 1, "entries": [{"key": '
    '{"gpu": "g", "arch": "sm_90", "driver": "d", "nvrtc": "n", '
    '"family": "decode.gemv", "signature": "s", "batch": 1e300}, '
    '"source": "cost-model", "times": [], "buckets": []}]}')

# Candidate folders (kiln tune --emit-candidates) and measurements
# (kiln-run --time-candidates), damaged.
import json, shutil  # noqa: E402
good_cand = path("cand")
subprocess.check_call([kiln, "tune", "tiny-gqa", "--emit-candidates",
                       good_cand, "--families", "prefill.epilogue",
                       "--seq-lens", "4", "--knobs", "epilogue-threads=64"],
                      stdout=subprocess.DEVNULL)
manifest = json.load(open(os.path.join(good_cand, "candidates.json")))


def candidate_folder(name, damage):
    d = path(name)
    shutil.copytree(good_cand, d)
    damage(d)
    return d


def write(p, text):
    open(p, "w").write(text)


cand_folders = {
    "cand-garbled": (candidate_folder("cand-garbled", lambda d: write(
        os.path.join(d, "candidates.json"), '{"format": "kiln-cand')),
        "candidates.json"),
    "cand-version": (candidate_folder("cand-version", lambda d: write(
        os.path.join(d, "candidates.json"),
        json.dumps(dict(manifest, version=7)))), "candidates.json"),
    "cand-no-bundle": (candidate_folder("cand-no-bundle", lambda d: os.remove(
        os.path.join(d, "prefill.epilogue-0.kiln"))),
        "prefill.epilogue-0.kiln"),
    "cand-bad-bundle": (candidate_folder("cand-bad-bundle", lambda d: write(
        os.path.join(d, "default.kiln"), "not a bundle")), "default.kiln"),
    "cand-bad-case": (candidate_folder("cand-bad-case", lambda d: write(
        os.path.join(d, "candidates.json"), json.dumps(dict(
            manifest, families=[dict(manifest["families"][0],
                                     cases=[{"length": 0, "batch": 1}])])))),
        "candidates.json"),
}
measurements = {
    "meas-garbled": '{"format": "kiln-measurements", "versi',
    "meas-not-json": "\x00\x01",
    "meas-version": json.dumps({"format": "kiln-measurements",
                                "version": 3}),
    "meas-float-repeats": json.dumps({
        "format": "kiln-measurements", "version": manifest["version"],
        "model": "m", "target": "sm_90", "nvrtc": "n", "device": "d",
        "driver": "d", "source": "cuda", "repeats": -3e300,
        "families": [], "defaults": [], "candidates": []}),
}
for name, text in measurements.items():
    write(path(name + ".json"), text)

cases = []  # (expected exit, input named in the error, output that must not exist, cmd)
for name, (d, named) in cand_folders.items():
    cases.append((1, named, path("out-" + name + ".json"),
                  [kiln_run, "--time-candidates", d, "--device", "emu",
                   "--repeats", "1", "--measurements",
                   path("out-" + name + ".json")]))
for name in measurements:
    m = path(name + ".json")
    cases.append((1, m, path("db-" + name + ".json"),
                  [kiln, "tune", "--measurements", m, "--tuning-db",
                   path("db-" + name + ".json")]))
for m in models:
    d = path("model-" + m)
    out = path("out-" + m)
    cases += [
        (1, d, out + ".kiln", [kiln, "compile", d, "-o", out + ".kiln"]),
        (1, d, out + ".safetensors", [kiln, "run", d, "--prompt-ids", "1,2",
                                      "--device", "ref", "--dump-logits",
                                      out + ".safetensors"]),
        (1, d, out + ".json", [kiln, "tune", d, "--seq-lens", "1",
                               "--families", "prefill.epilogue",
                               "--tuning-db", out + ".json"]),
    ]
for name in bundles:
    b = path(name + ".kiln")
    out = path("out-" + name)
    cases += [
        (1, b, None, [kiln, "inspect", b]),
        (1, b, out + ".safetensors", [kiln, "run", b, "--random-weights",
                                      "--device", "emu", "--prompt-ids", "1",
                                      "--dump-logits", out + ".safetensors"]),
        (1, b, out + ".run.safetensors",
         [kiln_run, b, "--random-weights", "--device", "emu",
          "--prompt-ids", "1", "--dump-logits", out + ".run.safetensors"]),
    ]
for name in ("db-garbled", "db-not-a-db", "db-float-version",
             "db-float-batch"):
    db = path(name + ".json")
    cases += [
        (1, db, path("out-" + name + ".kiln"),
         [kiln, "compile", "tiny-gqa", "--tuning-db", db, "-o",
          path("out-" + name + ".kiln")]),
        (1, db, None, [kiln, "tune", "tiny-gqa", "--seq-lens", "1",
                       "--families", "prefill.epilogue", "--tuning-db", db]),
    ]
# Usage: flags and flag combinations.
cases += [
    (2, "--max-new-tokens", None, [kiln, "run", "tiny-gqa", "--prompt-ids",
                                   "1", "--max-new-tokens", "-1"]),
    (2, "--prompt", None, [kiln, "run", "tiny-gqa", "--prompt", "hi",
                           "--prompt-ids", "1"]),
    (2, "--random-weights", None, [kiln, "run", "tiny-gqa",
                                   "--random-weights", "--weights", work,
                                   "--prompt-ids", "1"]),
    (2, "--no-logits", None, [kiln, "run", "tiny-gqa", "--prompt-ids", "1",
                              "--no-logits", "--dump-logits",
                              path("x.safetensors")]),
    (2, "--kernel-options", None, [kiln, "compile", "tiny-gqa",
                                   "--kernel-options", "gemv-rows=99"]),
    (2, "--max-context", None, [kiln, "compile", "tiny-gqa",
                                "--max-context", "-5"]),
    (2, "--kv-memory", None, [kiln, "compile", "tiny-gqa", "--kv-memory",
                              "-1"]),
    (2, "--batch", None, [kiln, "tune", "tiny-gqa", "--tuning-db",
                          path("t.json"), "--batch", "0"]),
    (2, "--stop-ids", None, [kiln, "run", "tiny-gqa", "--prompt-ids", "1",
                             "--stop-ids", "99999"]),
    (2, "--device", None, [kiln_run, good_bundle, "--random-weights",
                           "--device", "tpu", "--prompt-ids", "1"]),
    (2, "--temperature", None, [kiln_run, good_bundle, "--random-weights",
                                "--prompt-ids", "1", "--temperature", "x"]),
    (2, "--weights", None, [kiln_run, good_bundle, "--prompt-ids", "1"]),
    (2, "cache", None, [kiln, "cache", "explain", "abc"]),
    (2, "--time-candidates", None, [kiln_run, "--time-candidates",
                                    good_cand, good_bundle]),
    (2, "--repeats", None, [kiln_run, "--time-candidates", good_cand,
                            "--repeats", "many"]),
    (2, "--knobs", path("cand-knobs"),
     [kiln, "tune", "tiny-gqa", "--emit-candidates", path("cand-knobs"),
      "--knobs", "gemv-rows=3"]),
    (2, "--seq-lens", path("cand-lens"),
     [kiln, "tune", "tiny-gqa", "--emit-candidates", path("cand-lens"),
      "--seq-lens", "4,2"]),
]

# Damaged GGUF files (docs/gguf.md's checks), from tiny-gqa's Q4_0 file:
# into kiln compile, run and inspect, and into kiln-run as a bundle's
# weights. The fields are found by walking the header here.
import struct  # noqa: E402
gguf_good = os.path.join(fixture, "..", "..", "gguf", "tiny-gqa-Q4_0.gguf")
graw = open(gguf_good, "rb").read()


def gguf_fields(b):
    """Offsets of each tensor info's (type, offset) fields and of the
    tensor count, walking the metadata's values."""
    at = 8
    count_at = at
    n_tensors, n_kv = struct.unpack_from("<QQ", b, at)
    at += 16
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8,
             12: 8}

    def skip(t, at):
        if t == 8:
            return at + 8 + struct.unpack_from("<Q", b, at)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, at)
            at += 12
            for _ in range(n):
                at = skip(et, at)
            return at
        return at + sizes[t]
    for _ in range(n_kv):
        at += 8 + struct.unpack_from("<Q", b, at)[0]
        t = struct.unpack_from("<I", b, at)[0]
        at = skip(t, at + 4)
    infos = []
    for _ in range(n_tensors):
        at += 8 + struct.unpack_from("<Q", b, at)[0]
        dims = struct.unpack_from("<I", b, at)[0]
        at += 4 + 8 * dims
        infos.append((at, at + 4))  # type, offset
        at += 12
    return count_at, infos


count_at, infos = gguf_fields(graw)


def patched(b, at, fmt, value):
    b = bytearray(b)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


first_offset = struct.unpack_from("<Q", graw, infos[1][1])[0]
ggufs = {
    "gguf-truncated": graw[:len(graw) // 2],
    "gguf-wrong-magic": b"GGUX" + graw[4:],
    "gguf-huge-count": patched(graw, count_at, "<Q", 1 << 62),
    "gguf-type-id": patched(graw, infos[0][0], "<I", 99),
    "gguf-misaligned": patched(graw, infos[0][1], "<Q", 4),
    "gguf-past-end": patched(graw, infos[-1][1], "<Q", 1 << 40),
    "gguf-overlap": patched(graw, infos[0][1], "<Q", first_offset),
    "gguf-shape": graw.replace(b"llama.feed_forward_length\x04\x00\x00\x00"
                               + struct.pack("<I", 192),
                               b"llama.feed_forward_length\x04\x00\x00\x00"
                               + struct.pack("<I", 256)),
}
assert ggufs["gguf-shape"] != graw
for name, data in ggufs.items():
    open(path(name + ".gguf"), "wb").write(data)
gguf_bundle = path("gguf.kiln")
subprocess.check_call([kiln, "compile", gguf_good, "-o", gguf_bundle],
                      stdout=subprocess.DEVNULL)
for name in ggufs:
    g = path(name + ".gguf")
    out = path("out-" + name)
    cases += [
        (1, g, out + ".kiln", [kiln, "compile", g, "-o", out + ".kiln"]),
        (1, g, out + ".safetensors", [kiln, "run", g, "--prompt-ids", "1,2",
                                      "--device", "ref", "--dump-logits",
                                      out + ".safetensors"]),
    ]
    # kiln-run holds the file's tensors to the bundle, not its metadata (as
    # for a folder's config.json), and inspect lists such a file.
    if name != "gguf-shape":
        cases += [
            (1, g, None, [kiln, "inspect", g]),
            (1, g, out + ".run.safetensors",
             [kiln_run, gguf_bundle, "--weights", g, "--device", "emu",
              "--prompt-ids", "1", "--dump-logits", out + ".run.safetensors"]),
        ]
# A GGUF file without a tokenizer, given a prompt as text.
no_vocab = path("gguf-no-vocab.gguf")
open(no_vocab, "wb").write(graw.replace(b"tokenizer.ggml.tokens",
                                        b"tokenizer.ggml.tokenz"))
cases.append((1, no_vocab, None, [kiln, "run", no_vocab, "--prompt", "hi",
                                  "--device", "ref"]))

bad = 0
for code, named, output, cmd in cases:
    r = run(*cmd)
    problems = rule_problems(r, code)
    if not problems and os.path.basename(named) not in r.stderr:
        problems.append(f"does not name {os.path.basename(named)}")
    if output and os.path.exists(output):
        problems.append(f"left {os.path.basename(output)} behind")
    label = " ".join(os.path.basename(c) if c.startswith(work) or c in (kiln, kiln_run) else c for c in cmd[:6])
    if problems:
        bad += 1
        print(f"FAIL {label}: {'; '.join(problems)}: {r.stderr.strip()[:300]}")
    else:
        print(f"ok   {label}")
print(f"{len(cases) - bad} of {len(cases)} cases held to the rule")
sys.exit(1 if bad else 0)
