#!/usr/bin/env python3
"""serve_load.py: load benchmark for kiln's OpenAI-compatible server.

  python3 bench/serve_load.py --url http://127.0.0.1:8000 [--clients 32]
      [--seconds 20] [--prompt-tokens 16] [--max-tokens 32] [--vocab 32000]
      [--api-key KEY] [--model NAME] [--seed 0] [--json OUT.json] [--label TEXT]

N client threads each loop for a fixed wall time, sending streaming
POST /v1/completions requests (a prompt of random token ids, greedy,
ignore_eos, max_tokens) one after another on a kept-alive connection.
Requests started before the deadline run to completion; none start after
it. Each request's server-sent events are read as they arrive, and tokens
are counted by the chunks' token_ids (kiln's extension), not their text.
Per completed request it records the time to first token (send to the
first chunk with token ids) and the inter-token latency of every later
token (the gap between successive token-bearing chunks, divided evenly
over the tokens the later chunk carries). Failures (a non-200 status, a
connection error, a stream without [DONE]) count by kind; a 429 waits its
Retry-After, at most 1 s. The report is a Markdown table (and optionally
JSON), followed by the server's kiln_ metrics from GET /metrics.
Exit status 0 when at least one request completed, 1 otherwise."""
import argparse
import collections
import http.client
import json
import math
import random
import statistics
import sys
import threading
import time
import urllib.parse

TIMEOUT = 120.0  # seconds: each socket operation, and each request in all


def percentile(values, p):
    """The p-th percentile by nearest rank: the value at rank ceil(p/100 * n)
    (1-based) of the sorted values; None for no values."""
    if not values:
        return None
    s = sorted(values)
    return s[max(1, math.ceil(p / 100 * len(s))) - 1]


def connect(url, timeout=TIMEOUT):
    """A new HTTP(S) connection to the server of the split URL."""
    cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    return cls(url.hostname, url.port, timeout=timeout)


def headers(args):
    """The request headers: JSON, plus the bearer key when one was given."""
    h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if args.api_key:
        h["Authorization"] = "Bearer " + args.api_key
    return h


def get(url, path, args, timeout=10.0):
    """GET path on the server: (status, body bytes). Raises on connection errors."""
    conn = connect(url, timeout)
    try:
        conn.request("GET", url.path.rstrip("/") + path, headers=headers(args))
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def stream_request(conn, url, args, body, stats):
    """Send one streaming completion on conn and read its events as they come.
    On success appends the request's TTFT, ITLs and token count to stats and
    returns None; otherwise returns the error's kind (a 429 after its wait)."""
    sent = time.perf_counter()
    conn.request("POST", url.path.rstrip("/") + "/v1/completions", body, headers(args))
    resp = conn.getresponse()
    if resp.status != 200:
        resp.read()
        if resp.status == 429:
            try:
                time.sleep(min(max(float(resp.getheader("Retry-After", "1")), 0.0), 1.0))
            except ValueError:
                time.sleep(1.0)
        return str(resp.status)
    first = last = None
    itl, tokens = [], 0
    while True:
        raw = resp.readline()  # one SSE line; HTTPResponse undoes the chunking
        now = time.perf_counter()
        if not raw:
            return "no_done"  # the stream ended before [DONE]
        if now - sent > TIMEOUT:
            raise TimeoutError("request ran past %.0f s" % TIMEOUT)
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue  # blank separators, comments, other SSE fields
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:
            return "stream_error"
        ids = (chunk.get("choices") or [{}])[0].get("token_ids") or []
        if ids:
            if first is None:
                first = now
            else:
                itl.extend([(now - last) / len(ids)] * len(ids))
            last = now
            tokens += len(ids)
    resp.read()  # the end of the chunked body, so that the connection can be reused
    if first is not None:
        stats["ttft"].append(first - sent)
    stats["itl"].extend(itl)
    stats["tokens"].append(tokens)
    return None


def client(index, url, args, deadline, stats):
    """One client thread: send requests until the deadline, recording
    successes into stats and failures into stats["errors"] by kind."""
    rng = random.Random(args.seed * 1_000_003 + index)  # repeatable prompts per client
    conn = connect(url)
    while time.perf_counter() < deadline:
        prompt = [rng.randint(3, args.vocab - 1) for _ in range(args.prompt_tokens)]
        body = json.dumps({"model": args.model, "prompt": prompt, "max_tokens": args.max_tokens,
                           "stream": True, "temperature": 0, "ignore_eos": True})
        try:
            kind = stream_request(conn, url, args, body, stats)
        except Exception as e:  # connection errors, timeouts, bad JSON
            kind = type(e).__name__
        if kind is not None:
            stats["errors"][kind] += 1
            if kind != "429":
                time.sleep(0.05)  # do not spin on a failing server (a 429 has waited)
            conn.close()  # drop any unread stream; the next request reconnects
    conn.close()


def scrape_metrics(url, args):
    """The server's /metrics sample lines named kiln_* (no histogram
    buckets), or None when it cannot be read."""
    try:
        status, body = get(url, "/metrics", args)
    except (OSError, http.client.HTTPException):
        return None
    lines = body.decode("utf-8", "replace").splitlines()
    return None if status != 200 else [
        ln for ln in lines if ln.startswith("kiln_") and "_bucket" not in ln.split(" ")[0]]


def summarize(args, wall, per_client):
    """Merge the clients' stats into the report's dict."""
    ttft = [t for s in per_client for t in s["ttft"]]
    itl = [t for s in per_client for t in s["itl"]]
    tokens = [n for s in per_client for n in s["tokens"]]
    errors = sum((s["errors"] for s in per_client), collections.Counter())

    def ms(v):
        """Seconds to milliseconds, rounded; None stays None."""
        return None if v is None else round(v * 1000, 3)
    return {
        "label": args.label, "url": args.url, "model": args.model,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "clients": args.clients, "seconds": args.seconds, "wall_s": round(wall, 3),
        "prompt_tokens": args.prompt_tokens, "max_tokens": args.max_tokens,
        "requests": len(tokens), "errors": dict(sorted(errors.items())),
        "requests_per_s": round(len(tokens) / wall, 3),
        "tokens_per_s": round(sum(tokens) / wall, 3),
        **{"ttft_p%d_ms" % p: ms(percentile(ttft, p)) for p in (50, 90, 99)},
        **{"itl_p%d_ms" % p: ms(percentile(itl, p)) for p in (50, 90, 99)},
        "mean_tokens_per_request": round(statistics.fmean(tokens), 3) if tokens else None,
    }


def print_report(r):
    """Print the report as a Markdown table, then the scraped metrics."""
    print("### serve_load: %s, %s, %s\n" % (r["label"] or "(no label)", r["url"], r["date"]))
    print("| metric | value |\n|---|---|")
    errors = ", ".join("%s: %d" % kv for kv in r["errors"].items()) or "none"
    rows = [("model", r["model"]), ("clients", r["clients"]),
            ("seconds (wall)", "%s (%s)" % (r["seconds"], r["wall_s"])),
            ("prompt / max tokens", "%d / %d" % (r["prompt_tokens"], r["max_tokens"])),
            ("requests completed", r["requests"]), ("errors", errors),
            ("requests/s", r["requests_per_s"]), ("generated tokens/s", r["tokens_per_s"])]
    for name in ("ttft", "itl"):
        vals = [r["%s_p%d_ms" % (name, p)] for p in (50, 90, 99)]
        rows.append(("%s p50 / p90 / p99 (ms)" % name.upper(),
                     " / ".join("-" if v is None else "%.2f" % v for v in vals)))
    rows.append(("mean tokens/request", r["mean_tokens_per_request"]))
    for k, v in rows:
        print("| %s | %s |" % (k, "-" if v is None else v))
    if r["metrics"] is None:
        print("\nServer metrics: GET /metrics unavailable.")
    else:
        print("\nServer metrics (/metrics, kiln_*):\n\n```\n%s\n```" % "\n".join(r["metrics"]))


def main():
    """Parse the arguments, run the clients, report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    for name, default in (("--clients", 32), ("--prompt-tokens", 16), ("--max-tokens", 32),
                          ("--vocab", 32000), ("--seed", 0)):
        ap.add_argument(name, type=int, default=default, help="default %d" % default)
    ap.add_argument("--seconds", type=float, default=20, help="default 20")
    ap.add_argument("--api-key")
    ap.add_argument("--model", help="default: the first model of GET /v1/models")
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--label", default="")
    ap.add_argument("--wait-ready", type=float, default=0, metavar="SECONDS",
                    help="first wait up to SECONDS for GET /health to answer 200 "
                         "(a server still loading its model answers 503)")
    args = ap.parse_args()
    if args.vocab < 4 or args.clients < 1 or args.prompt_tokens < 1:
        ap.error("need --vocab >= 4, --clients >= 1, --prompt-tokens >= 1")
    url = urllib.parse.urlsplit(args.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        ap.error("--url must be http://HOST[:PORT]")
    ready_by = time.monotonic() + args.wait_ready
    while time.monotonic() < ready_by:  # bounded by --wait-ready
        try:
            if get(url, "/health", args)[0] == 200:
                break
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.2)
    try:
        status, body = get(url, "/v1/models", args)
    except (OSError, http.client.HTTPException) as e:
        sys.exit("serve_load: error: cannot reach %s: %s: %s" % (args.url, type(e).__name__, e))
    if args.model is None:
        try:
            args.model = json.loads(body)["data"][0]["id"]
        except (ValueError, KeyError, IndexError, TypeError):
            sys.exit("serve_load: error: GET /v1/models gave HTTP %d and no model name;"
                     " pass --model" % status)
    per_client = [{"ttft": [], "itl": [], "tokens": [], "errors": collections.Counter()}
                  for _ in range(args.clients)]
    start = time.perf_counter()
    deadline = start + args.seconds
    threads = [threading.Thread(target=client, args=(i, url, args, deadline, per_client[i]),
                                daemon=True) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:  # each returns by the deadline plus its last request's TIMEOUT
        t.join()
    report = summarize(args, time.perf_counter() - start, per_client)
    report["metrics"] = scrape_metrics(url, args)
    print_report(report)
    if args.json:
        with open(args.json, "w") as f:
            f.write(json.dumps(report, indent=2) + "\n")
    if report["requests"] == 0:
        print("serve_load: error: no request completed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
