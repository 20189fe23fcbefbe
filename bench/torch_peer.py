#!/usr/bin/env python3
"""torch_peer.py [--model llama2-7b|tiny] [--device cuda|cpu] [--cases
P:N[:B],...] [--json FILE]: the PyTorch peers of bench/gpu_check.sh. Hugging
Face transformers' LlamaForCausalLM with random fp16 weights of the
model's shapes (fp32 on the CPU), greedy, measured two ways: eager, and
torch.compile with a static KV cache (the documented fast path). For each
case (B prompts of P tokens, N new tokens each; B defaults to 1) it
reports the time to the first token (a generate() of one token) and decode
tokens/s over the batch (the extra time of N - 1 more tokens). Prints
Markdown table rows, and with --json appends one JSON object per result to
FILE as it is measured (a time-boxed run keeps what it finished); exits 0
with a note when torch or transformers is missing."""
import argparse, json, sys, time

SHAPES = {
    "llama2-7b": dict(hidden_size=4096, intermediate_size=11008,
                      num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=32, vocab_size=32000,
                      max_position_embeddings=4096),
    # For trying the script where there is no GPU.
    "tiny": dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2,
                 vocab_size=320, max_position_embeddings=256),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama2-7b", choices=SHAPES)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cases", default="128:128,2048:128",
                    help="prompt:new[:batch] triples")
    ap.add_argument("--json", help="append each result to this file")
    args = ap.parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"PyTorch peers: not measured ({e.name} is not installed).")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("PyTorch peers: not measured (PyTorch sees no GPU).")
        return 0
    dtype = torch.float16 if args.device == "cuda" else torch.float32
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**SHAPES[args.model])
    with torch.device(args.device):
        torch.set_default_dtype(dtype)
        model = transformers.LlamaForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def timed_generate(ids, n, **kw):
        sync()
        start = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids),
                       pad_token_id=0, max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, **kw)
        sync()
        return time.perf_counter() - start

    print(f"PyTorch {torch.__version__}, transformers {transformers.__version__}, "
          f"{args.model}, {dtype}, {args.device}:")
    print()
    print("| peer | batch | prompt tokens | new tokens | time to first token | decode tokens/s |")
    print("|---|---|---|---|---|---|")
    variants = [("eager", {})]
    variants.append(("torch.compile, static cache",
                     {"cache_implementation": "static"}))
    for name, kw in variants:
        try:
            if kw:
                model.forward = torch.compile(model.forward,
                                              mode="reduce-overhead",
                                              fullgraph=True)
            for case in args.cases.split(","):
                p, n, b = (list(map(int, case.split(":"))) + [1])[:3]
                ids = torch.randint(1, config.vocab_size, (b, p),
                                    device=args.device)
                for _ in range(2):  # warm up (and compile)
                    timed_generate(ids, n, **kw)
                first = min(timed_generate(ids, 1, **kw) for _ in range(3))
                whole = min(timed_generate(ids, n, **kw) for _ in range(2))
                rate = b * (n - 1) / max(whole - first, 1e-9)
                print(f"| {name} | {b} | {p} | {n} | {first * 1e3:.1f} ms | "
                      f"{rate:.0f} |", flush=True)
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(dict(
                            peer=name, batch=b, prompt=p, new=n,
                            ttft_ms=first * 1e3, tokens_per_s=rate)) + "\n")
        except Exception as e:  # a peer that fails is reported, not fatal
            print(f"| {name} | | | | failed: {type(e).__name__}: "
                  f"{str(e).splitlines()[0][:120]} | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
