#!/usr/bin/env python3
"""llamacpp_logits.py: llama.cpp itself (through llama-cpp-python) on kiln's GGUF
fixtures, beside transformers (the fixtures' reference) and kiln (ref and emu).

For each test/fixtures/gguf/NAME.gguf with a NAME/expected.safetensors:

  llama.cpp   Llama(model_path=NAME.gguf, logits_all=True, n_ctx=the file's
              context_length, n_threads=2, seed=0, verbose=False), its defaults
              otherwise (KV cache f16; --kv-f32 adds a run with an f32 cache).
              As the fixtures define the logits: the prompt ids evaluated in one
              batch (prefill_logits = every prompt row), then one token at a time
              (decode_logits[i] = the row after feeding decode_tokens[i]). No BOS
              is added: the fixtures' prompts are the ids as given.
                greedy: llama.cpp's own argmax path, T steps (T = the fixture's);
                forced: the same, feeding a given token path (the fixture's, or
                        kiln's when kiln's greedy path differs), so that every row
                        is compared on the same context.
  kiln        build/bin/kiln run NAME.gguf --prompt-ids P --max-new-tokens T
              --device ref|emu --dump-logits OUT (its own greedy path).

Reported per file: max |logit diff| of llama.cpp against transformers
(expected.safetensors), kiln-ref and kiln-emu over every prefill and decode row
(on the other side's token path), kiln-ref/emu against transformers for context,
and how many greedy steps agree (leading steps with equal tokens) between
llama.cpp's own path and kiln-ref's, kiln-emu's and transformers'. Writes a
markdown report (default bench/llamacpp-gguf.md; its table lives in bench/RESULTS.md) with the machine and versions.

llama.cpp's CPU backend computes in its own precision: for every weight type it
converts the activations to the type's "vec_dot_type" before the dot product
(F16 weights: f16 activations; BF16: bf16; Q4_0/Q5_0/Q8_0: Q8_0 blocks of 32;
Q4_1/Q5_1: Q8_1; K-quants: Q8_K blocks of 256), the KV cache is f16 by default,
and its row order of summation differs. So it does not meet kiln's float32
tolerance (1e-3) even where the weights are the same; the table says by how much.

  /tmp/qvenv/bin/python bench/llamacpp_logits.py [--kiln build/bin/kiln]
      [--only NAME ...] [--kv-f32] [--out bench/llamacpp-gguf.md]
"""
import argparse
import ctypes
import datetime
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
from safetensors.numpy import load_file

import gguf
import llama_cpp
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
GGUF_DIR = os.path.join(REPO, "test", "fixtures", "gguf")

# ggml-cpu's vec_dot_type per weight type (ggml-cpu.c type_traits_cpu).
ACT_TYPE = {"F32": "f32", "F16": "f16", "BF16": "bf16", "Q8_0": "Q8_0",
            "Q4_0": "Q8_0", "Q5_0": "Q8_0", "Q4_1": "Q8_1", "Q5_1": "Q8_1",
            "Q2_K": "Q8_K", "Q3_K": "Q8_K", "Q4_K": "Q8_K", "Q5_K": "Q8_K",
            "Q6_K": "Q8_K"}


def fixtures(only):
    out = []
    for path in sorted(glob.glob(os.path.join(GGUF_DIR, "*.gguf"))):
        name = os.path.basename(path)[:-len(".gguf")]
        exp = os.path.join(GGUF_DIR, name, "expected.safetensors")
        if os.path.exists(exp) and (not only or name in only):
            out.append((name, path, exp))
    return out


def dh128_float_files(tmp):
    """tiny-dh128 as F16 and F32 GGUF files in tmp, written as the K-quant fixtures'
    F16 source is, with tiny-dh128/expected.safetensors as their reference."""
    sys.path.insert(0, os.path.join(REPO, "test", "fixtures"))
    import make_gguf_fixture as mgf
    import make_gguf_kquant_fixture as kq
    scratch = os.path.join(tmp, "dh128-float")
    os.makedirs(scratch)
    f16, _ = kq.write_f16(scratch)
    with kq.redirected(os.path.join(scratch, "fixtures"), os.path.join(scratch, "gguf")):
        f32, _ = mgf.write_gguf(kq.FIXTURE, "F32")
    exp = os.path.join(REPO, "test", "fixtures", kq.FIXTURE, "expected.safetensors")
    return [("tiny-dh128-F16 (scratch)", f16, exp), ("tiny-dh128-F32 (scratch)", f32, exp)]


def file_info(path):
    r = gguf.GGUFReader(path)
    types = {}
    for t in r.tensors:
        if len(t.shape) >= 2:
            types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    ctx = int(r.fields["llama.context_length"].contents())
    return ctx, types


class LlamaCpp:
    def __init__(self, path, n_ctx, kv_f32=False):
        kw = {}
        if kv_f32:
            kw = dict(type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
        self.llm = Llama(model_path=path, logits_all=True, n_ctx=n_ctx, n_threads=2,
                         n_threads_batch=2, seed=0, verbose=False, **kw)
        self.n_vocab = self.llm.n_vocab()

    def _row(self, i):
        return np.array(self.llm.scores[i], dtype=np.float32, copy=True)

    def run(self, prompt, steps, forced=None):
        """prefill [P, V], the tokens fed, decode [steps, V]. forced: the tokens
        to feed (else llama.cpp's own greedy argmax)."""
        llm = self.llm
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        P = len(prompt)
        llm.eval(list(prompt))                    # one batch (n_batch 512 >= P)
        assert llm.n_tokens == P
        prefill = np.stack([self._row(i) for i in range(P)])
        tokens, rows = [], []
        last = prefill[-1]
        for i in range(steps):
            tok = int(forced[i]) if forced is not None else int(np.argmax(last))
            tokens.append(tok)
            llm.eval([tok])
            assert llm.n_tokens == P + i + 1
            last = self._row(P + i)
            rows.append(last)
        decode = np.stack(rows) if rows else np.zeros((0, self.n_vocab), np.float32)
        return prefill, tokens, decode


def run_kiln(kiln, path, prompt, steps, device, out):
    cmd = [kiln, "run", path, "--prompt-ids", ",".join(str(int(t)) for t in prompt),
           "--max-new-tokens", str(steps), "--device", device, "--dump-logits", out]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.time() - t0
    if r.returncode != 0:
        return None, dt, (r.stderr.strip() or r.stdout.strip())[-400:]
    d = load_file(out)
    return {"prompt": d["prompt_tokens"].astype(np.int64),
            "prefill": d["prefill_logits"].astype(np.float32),
            "tokens": [int(x) for x in d["decode_tokens"]],
            "decode": d["decode_logits"].astype(np.float32)}, dt, None


def agree(a, b):
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def maxdiff(a_pre, a_dec, b_pre, b_dec, rows=None):
    """max |a - b| over the prefill rows and the first `rows` decode rows."""
    rows = min(len(a_dec), len(b_dec)) if rows is None else rows
    m = float(np.abs(a_pre - b_pre).max())
    if rows:
        m = max(m, float(np.abs(a_dec[:rows] - b_dec[:rows]).max()))
    return m


def fmt(x):
    if x is None:
        return "—"
    if x == 0:
        return "0"
    return f"{x:.2g}" if x < 0.01 else f"{x:.3f}"


def machine():
    lscpu = subprocess.run("lscpu | head", shell=True, capture_output=True,
                           text=True).stdout.rstrip()
    return lscpu


def versions(kiln):
    from importlib.metadata import version
    v = {"python": platform.python_version()}
    for p in ("llama_cpp_python", "gguf", "numpy", "torch", "transformers"):
        try:
            v[p] = version(p)
        except Exception:  # noqa: BLE001
            pass
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib",
                                       "libggml-base.so"))
        for fn in ("ggml_version", "ggml_commit"):
            f = getattr(lib, fn)
            f.restype = ctypes.c_char_p
            v[f"llama.cpp {fn}"] = f().decode()
    except (OSError, AttributeError):
        pass
    try:
        v["llama.cpp system_info"] = llama_cpp.llama_print_system_info().decode().strip()
    except Exception:  # noqa: BLE001
        pass
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    v["kiln"] = (f"{kiln}, built from {head}{' + uncommitted changes' if dirty else ''} "
                 f"(the checkout's HEAD when this ran)")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "bin", "kiln"))
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--kv-f32", action="store_true",
                    help="also run llama.cpp with an f32 KV cache (against transformers)")
    ap.add_argument("--no-kiln", action="store_true")
    ap.add_argument("--dh128-float", action="store_true",
                    help="add two scratch rows, not fixtures: tiny-dh128 as F16 and F32 "
                         "GGUF files (make_gguf_kquant_fixture.py's F16 file and "
                         "make_gguf_fixture.write_gguf's F32), against "
                         "tiny-dh128/expected.safetensors: the K-quant rows' float baseline")
    ap.add_argument("--out", default=os.path.join(HERE, "llamacpp-gguf.md"))
    ap.add_argument("--json", default=None, help="also write the numbers as JSON")
    a = ap.parse_args()
    a.started = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()

    llama_cpp.llama_backend_init()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        todo = fixtures(a.only)
        if a.dh128_float:
            todo += dh128_float_files(tmp)
        for name, path, exp_path in todo:
            exp = load_file(exp_path)
            prompt = exp["prompt_tokens"].astype(np.int64).tolist()
            e_pre, e_dec = exp["prefill_logits"], exp["decode_logits"]
            e_tok = [int(x) for x in exp["decode_tokens"]]
            T = len(e_tok)
            n_ctx, types = file_info(path)
            assert len(prompt) + T <= n_ctx
            res = {"name": name, "steps": T, "types": types, "n_ctx": n_ctx,
                   "logit_std": float(np.concatenate([e_pre, e_dec]).std())}

            t0 = time.time()
            lc = LlamaCpp(path, n_ctx)
            g_pre, g_tok, g_dec = lc.run(prompt, T)
            forced = {}

            def forced_run(toks, _lc=lc, _forced=forced):
                key = tuple(toks)
                if key not in _forced:
                    _forced[key] = _lc.run(prompt, len(toks), forced=toks)
                return _forced[key]

            f_pre, _, f_dec = forced_run(e_tok)
            res["lc_vs_tf"] = maxdiff(f_pre, f_dec, e_pre, e_dec)
            res["lc_vs_tf_prefill"] = float(np.abs(f_pre - e_pre).max())
            res["lc_greedy_vs_tf"] = agree(g_tok, e_tok)
            res["lc_greedy_tokens"] = g_tok
            # llama.cpp's greedy row = its forced row where the paths agree.
            k = agree(g_tok, e_tok)
            res["lc_greedy_eq_forced"] = maxdiff(g_pre, g_dec[:k], f_pre, f_dec[:k], k)
            if a.kv_f32:
                lc32 = LlamaCpp(path, n_ctx, kv_f32=True)
                p32, _, d32 = lc32.run(prompt, T, forced=e_tok)
                res["lc_kvf32_vs_tf"] = maxdiff(p32, d32, e_pre, e_dec)
                del lc32
            res["lc_seconds"] = time.time() - t0

            for dev in ([] if a.no_kiln else ["ref", "emu"]):
                out = os.path.join(tmp, f"{name}-{dev}.safetensors")
                k_res, dt, err = run_kiln(a.kiln, path, prompt, T, dev, out)
                res[f"{dev}_seconds"] = dt
                if k_res is None:
                    res[f"{dev}_error"] = err
                    print(f"[{name}] kiln {dev} FAILED: {err}", file=sys.stderr)
                    continue
                assert k_res["prompt"].tolist() == prompt
                kt = k_res["tokens"]
                res[f"{dev}_tokens"] = kt
                # kiln vs transformers over the rows whose tokens agree.
                ka = agree(kt, e_tok)
                res[f"{dev}_vs_tf"] = maxdiff(k_res["prefill"], k_res["decode"],
                                              e_pre, e_dec, ka)
                res[f"{dev}_vs_tf_tokens"] = ka
                # llama.cpp fed kiln's own path, every row.
                kp, _, kd = forced_run(kt) if kt else (f_pre, [], f_dec[:0])
                res[f"lc_vs_{dev}"] = maxdiff(kp, kd, k_res["prefill"], k_res["decode"])
                res[f"lc_greedy_vs_{dev}"] = agree(g_tok, kt)
                res[f"{dev}_steps"] = len(kt)
            del lc
            print(json.dumps({k: v for k, v in res.items() if not k.endswith("tokens")}))
            results.append(res)

    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    write_md(a, results)


def notes(a, results):
    """The reading of the table, with its numbers."""
    def kind(r):
        t = set(r["types"])
        return "float" if t <= {"F32", "F16", "BF16"} else "q"

    def rng(rows, key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return (f"{fmt(min(vals))} to {fmt(max(vals))}" if len(vals) > 1 else
                fmt(vals[0])) if vals else "—"

    by = {r["name"]: r for r in results}
    q = [r for r in results if kind(r) == "q"]
    f16 = [r for r in results if set(r["types"]) == {"F16"}]
    rel_q = [100 * r["lc_vs_tf"] / r["logit_std"] for r in q]
    rel_f16 = [100 * r["lc_vs_tf"] / r["logit_std"] for r in f16]
    out = ["Reading it:", ""]
    f32 = [r for r in results if set(r["types"]) == {"F32"}]
    if f32 and a.kv_f32:
        out.append(f"- The harness: with F32 weights and an f32 KV cache llama.cpp is "
                   f"transformers to {rng(f32, 'lc_kvf32_vs_tf')} (float32 rounding), so the "
                   f"prompt, positions, RoPE pairing and logits rows line up; with its default "
                   f"f16 KV cache, {rng(f32, 'lc_vs_tf')}: the f16 cache alone.")
    def model(r):  # the source model of a row: tiny-mha, tiny-gqa, tiny-dh128
        return r["name"].split(" ")[0].rsplit("-", 1)[0].replace("-Q4_K", "").replace(
            "-Q5_K", "")

    base = {model(r): r["lc_vs_tf"] for r in f16}
    bf16 = [r for r in results if set(r["types"]) == {"BF16"}]
    if f16:
        out.append(f"- F16 files: {rng(f16, 'lc_vs_tf')} ({min(rel_f16):.2g}-{max(rel_f16):.2g}% "
                   f"of the logits' standard deviation): ggml's CPU dot product converts the "
                   f"activations to f16 for f16 weights (its vec_dot_type), and the KV cache "
                   f"is f16." + "".join(
                       f" {r['name']}: bf16 activations, {r['lc_vs_tf'] / base[model(r)]:.0f}x "
                       f"the F16 file." for r in bf16 if model(r) in base))
    ratios = [r["lc_vs_tf"] / base[model(r)] for r in q if model(r) in base]
    if q:
        out.append(f"- Quantized files: {rng(q, 'lc_vs_tf')} ({min(rel_q):.2g}-{max(rel_q):.2g}% "
                   f"of the logits' standard deviation)" + (
                       f", {min(ratios):.0f}-{max(ratios):.0f}x the F16 file of the same "
                       f"model" if ratios else "") + f". The weights are the same values on every side (transformers and kiln "
                   f"dequantize the file's blocks exactly), so this is llama.cpp quantizing the "
                   f"activations to 8 bits before every quantized dot product (Q8_0/Q8_1: blocks "
                   f"of 32 with an f16 scale; Q8_K: blocks of 256 with an f32 scale); an f32 KV "
                   f"cache does not shrink it. The weight type hardly matters ("
                   + ", ".join(f"{n}: {fmt(by[n]['lc_vs_tf'])}" for n in (
                       "tiny-dh128-Q4_K_M", "tiny-dh128-Q6_K", "tiny-mha-Q4_0",
                       "tiny-mha-Q8_0") if n in by) + ").")
    out.append("- kiln-ref is transformers to float32 rounding (1e-5), so llama.cpp vs kiln-ref "
               "repeats llama.cpp vs transformers; kiln-emu (f16 activations and KV cache, f32 "
               "accumulation) sits within its 5e-2 tolerance of transformers, and llama.cpp vs "
               "kiln-emu is of the order of the larger of the two.")
    agree_all = all(r["lc_greedy_vs_tf"] == r["steps"] and
                    r.get("lc_greedy_vs_ref", r["steps"]) == r["steps"] and
                    r.get("lc_greedy_vs_emu", r["steps"]) == r["steps"] for r in results)
    out.append("- Greedy tokens: " + ("llama.cpp's own greedy path equals transformers', "
               "kiln-ref's and kiln-emu's at every step of every file (the fixtures keep "
               "only steps whose top-1/top-2 margin is at least 0.1, above these "
               "differences)." if agree_all else "see the table: some paths part."))
    out.append("- llama.cpp's settings: llama-cpp-python's defaults (flash attention off, "
               "KV cache f16, n_batch 512: the prompt in one batch), AVX2 build (GGML_NATIVE=OFF) "
               "with its REPACK kernels (interleaved layouts of some quantized types, Q4_0 "
               "and Q4_K among them) and LLAMAFILE (tinyBLAS) prefill matmuls. It "
               "warns `n_ctx_seq (256) > n_ctx_train (128)` for tiny-dh128: it rounds the "
               "context up to 256 cells; harmless here (52 positions). No BOS is added: "
               "`Llama.eval` takes the ids as given, like kiln's `--prompt-ids`.")
    return out


def write_md(a, results):
    kiln = os.path.abspath(a.kiln)
    v = versions(os.path.relpath(kiln, REPO) if kiln.startswith(REPO + os.sep) else kiln)
    L = []
    L.append("## llama.cpp on the GGUF fixtures (bench/llamacpp_logits.py)")
    L.append("")
    L.append(f"{datetime.date.today().isoformat()}. llama.cpp (llama-cpp-python "
             f"{v.get('llama_cpp_python')}) run on every `test/fixtures/gguf/*.gguf` with an "
             f"expected folder: the fixture's prompt ids in one batch, then greedy decoding "
             f"one token at a time, `logits_all=True`, `n_threads=2`, `n_ctx` = the file's "
             f"context length, KV cache f16 (llama.cpp's default), no BOS added. Each "
             f"max |logit diff| is over every prefill and decode row, with llama.cpp fed the "
             f"other side's token path (transformers': the fixture's `decode_tokens`; "
             f"kiln's: its own greedy tokens); \"greedy agree\" counts the leading steps "
             f"where llama.cpp's own greedy tokens equal the other's (of the fixture's "
             f"steps). kiln: `kiln run FILE.gguf --prompt-ids ... --max-new-tokens T "
             f"--device ref|emu --dump-logits`; its K-quant files run as float weights "
             f"dequantized at load (exact on ref, rounded to f16 on emu)."
             + (" The two (scratch) rows are not fixtures: tiny-dh128 written as F16 and F32 "
                "GGUF files by make_gguf_fixture.py's writer (`--dh128-float`), against "
                "`tiny-dh128/expected.safetensors`: the K-quant rows' float baseline."
                if a.dh128_float else "") + " Logit std: the standard deviation of "
             "transformers' logits, for scale.")
    L.append("")
    hdr = ["file", "weights (2-D tensors)", "llama.cpp dot product", "steps",
           "logit std", "llama.cpp vs transformers", "llama.cpp vs kiln-ref", "llama.cpp vs kiln-emu",
           "greedy agree llama.cpp / kiln-ref", "greedy agree llama.cpp / kiln-emu",
           "greedy agree llama.cpp / transformers", "kiln-ref vs transformers",
           "kiln-emu vs transformers"]
    if a.kv_f32:
        hdr.insert(6, "llama.cpp (f32 KV) vs transformers")
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + "---|" * len(hdr))
    for r in results:
        T = r["steps"]
        w = ", ".join(f"{t}×{n}" if len(r["types"]) > 1 else t
                      for t, n in sorted(r["types"].items(), key=lambda x: -x[1]))
        acts = sorted({ACT_TYPE.get(t, "?") for t in r["types"]})

        def ag(dev):
            if f"lc_greedy_vs_{dev}" not in r:
                return "failed" if f"{dev}_error" in r else "—"
            return f"{r[f'lc_greedy_vs_{dev}']}/{T}"
        nm = r["name"].replace(" (scratch)", "")
        nm = f"`{nm}` (scratch)" if nm != r["name"] else f"`{nm}`"
        row = [nm, w, ", ".join(acts), str(T), f"{r['logit_std']:.2f}", fmt(r["lc_vs_tf"]),
               fmt(r.get("lc_vs_ref")), fmt(r.get("lc_vs_emu")), ag("ref"), ag("emu"),
               f"{r['lc_greedy_vs_tf']}/{T}", fmt(r.get("ref_vs_tf")),
               fmt(r.get("emu_vs_tf"))]
        if a.kv_f32:
            row.insert(6, fmt(r.get("lc_kvf32_vs_tf")))
        L.append("| " + " | ".join(row) + " |")
    L.append("")
    L += notes(a, results)
    L.append("")
    L.append(f"Run {a.started}. Machine (`lscpu | head`):")
    L.append("")
    L.append("```")
    L.append(machine())
    L.append("```")
    L.append("")
    L.append("Versions: " + "; ".join(f"{k} {val}" for k, val in v.items()) + ".")
    L.append("")
    with open(a.out, "w") as f:
        f.write("\n".join(L))
    print(f"wrote {os.path.relpath(a.out, REPO)}")


if __name__ == "__main__":
    main()
