"""Drives `kiln-run --serve` (or `kiln serve`) with real clients: the
official `openai` package, curl and raw HTTP (test/e2e/serve.test).

    serve_client.py SCENARIO --fixtures DIR -- SERVER COMMAND...

starts the server command with `--port 0` added, waits for /health, runs
the scenario and prints "ok: ..." lines for FileCheck. The fixture is
tiny-gqa's: Meta's prompt and greedy continuation (expected.json), and
Meta's chat prompt ids for its tokenizer (chat/conversations.json). Every
wait is bounded in time, every loop in count.
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import openai

TIMEOUT = 120  # seconds: any single wait (the sanitized build is slow)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


class Server:
    """A server process on a free port of 127.0.0.1."""

    def __init__(self, command, extra=()):
        self.log = open(os.environ.get("SERVE_LOG", os.devnull), "a")
        self.proc = subprocess.Popen(
            list(command) + ["--port", "0"] + list(extra),
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self._read_line()
        match = re.search(r"listening on http://([0-9.]+):(\d+)", line)
        check(match, "no address line, got %r" % line)
        self.host, self.port = match.group(1), int(match.group(2))
        self.url = "http://%s:%d" % (self.host, self.port)
        deadline = time.time() + TIMEOUT
        while self.get("/health")[0] != 200:
            check(time.time() < deadline and self.proc.poll() is None,
                  "the server did not become healthy")
            time.sleep(0.05)

    def _read_line(self):
        result = []
        reader = threading.Thread(
            target=lambda: result.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(TIMEOUT)
        check(result, "the server printed nothing in %d s" % TIMEOUT)
        return result[0]

    def connection(self):
        return http.client.HTTPConnection(self.host, self.port,
                                          timeout=TIMEOUT)

    def request(self, method, path, body=None, headers=None):
        """(status, headers, parsed JSON or text) of one request."""
        c = self.connection()
        data = body if isinstance(body, (bytes, str)) or body is None \
            else json.dumps(body)
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        try:
            return r.status, dict(r.getheaders()), json.loads(text)
        except ValueError:
            return r.status, dict(r.getheaders()), text

    def get(self, path):
        try:
            status, _, body = self.request("GET", path)
            return status, body
        except OSError:
            return 0, None

    def metric(self, name):
        """The sum of a metric's samples whose line starts with `name`."""
        status, text = self.get("/metrics")
        check(status == 200, "/metrics answered %s" % status)
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith(name))

    def client(self, key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key,
                             timeout=TIMEOUT, max_retries=0)

    def stop(self, wait=TIMEOUT, signalled=False):
        """SIGTERM unless `signalled` already, then the exit code.

        A second SIGTERM is not sent to a draining server: once its
        signal set is gone (teardown, slow under the sanitizers) the
        default action would kill it, as a second signal should."""
        if not signalled and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("the server did not exit within %d s of SIGTERM" % wait)


class Stream:
    """A streamed completion read event by event over raw HTTP."""

    def __init__(self, server, body, path="/v1/completions"):
        self.conn = server.connection()
        self.conn.request("POST", path, body=json.dumps(dict(body,
                                                              stream=True)))
        self.response = self.conn.getresponse()
        check(self.response.status == 200,
              "a stream answered %d" % self.response.status)
        self.tokens, self.finish, self.error, self.done = [], None, None, False

    def next_event(self):
        """Reads one event; False at the end of the stream."""
        for _ in range(100000):
            line = self.response.readline()
            if not line:
                return False
            line = line.decode().strip()
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                self.done = True
                return False
            event = json.loads(data)
            if "error" in event:
                self.error = event["error"]
                return True
            for choice in event["choices"]:
                self.tokens += choice.get("token_ids", [])
                self.finish = choice.get("finish_reason") or self.finish
            return True
        return False

    def read_all(self):
        for _ in range(100000):
            if not self.next_event():
                break
        return self


def fixture(fixtures):
    with open(os.path.join(fixtures, "tiny-gqa", "expected.json")) as f:
        expected = json.load(f)
    return expected["prompt_tokens"], expected["greedy_continuation"]


def greedy_body(prompt, n, **extra):
    return dict({"prompt": prompt, "max_tokens": n, "temperature": 0,
                 "ignore_eos": True}, **extra)


def scenario_greedy(server, fixtures):
    prompt, greedy = fixture(fixtures)
    client = server.client()
    model = client.models.list().data[0].id
    r = client.completions.create(model=model, prompt=prompt, max_tokens=20,
                                  temperature=0,
                                  extra_body={"ignore_eos": True})
    check(r.choices[0].token_ids == greedy, "tokens %s" % r.choices[0])
    check(r.choices[0].finish_reason == "length", "finish %s" % r.choices[0])
    check((r.usage.prompt_tokens, r.usage.completion_tokens,
           r.usage.total_tokens) == (12, 20, 32), "usage %s" % r.usage)
    # Meta's continuation has end-of-sequence (2) at its ninth token.
    r = client.completions.create(model=model, prompt=prompt, max_tokens=20,
                                  temperature=0)
    check(r.choices[0].token_ids == greedy[:8] and
          r.choices[0].finish_reason == "stop", "eos: %s" % r.choices[0])
    print("ok: openai completions: Meta's greedy tokens, finish and usage")
    tokens, finish, usage = [], None, None
    for chunk in client.completions.create(
            model=model, prompt=prompt, max_tokens=20, temperature=0,
            stream=True, extra_body={"ignore_eos": True}):
        for choice in chunk.choices:
            tokens += choice.token_ids
            finish = choice.finish_reason or finish
        usage = chunk.usage or usage
    check(tokens == greedy and finish == "length" and
          usage.completion_tokens == 20, "stream: %s %s" % (tokens, finish))
    print("ok: openai streamed completions: Meta's greedy tokens")

    # Chat: the prompt is Meta's chat_completion's, token for token.
    with open(os.path.join(fixtures, "chat", "conversations.json")) as f:
        cases = {c["name"]: c for c in json.load(f)["conversations"]}
    for name in ("single-user", "system-user", "multi-turn-no-system",
                 "whitespace-strip"):
        case = cases[name]
        ids = case["results"]["tiny-gqa"]["ids"]
        r = client.chat.completions.create(
            model=model, messages=case["messages"], max_tokens=4,
            temperature=0, extra_body={"return_token_ids": True})
        check(r.prompt_token_ids == ids, "%s: prompt ids" % name)
        check(r.usage.prompt_tokens == len(ids), "%s: usage" % name)
        text, streamed = "", []
        for chunk in client.chat.completions.create(
                model=model, messages=case["messages"], max_tokens=4,
                temperature=0, stream=True):
            for choice in chunk.choices:
                text += choice.delta.content or ""
                streamed += choice.token_ids
        check(streamed == r.choices[0].token_ids and
              text == r.choices[0].message.content,
              "%s: stream %r vs %r" % (name, text, r.choices[0].message))
    print("ok: openai chat completions: Meta's chat prompt ids, streamed "
          "as whole")

    # curl, whole and streamed.
    body = json.dumps(greedy_body(prompt, 20, model=model))
    out = subprocess.run(
        ["curl", "-sS", "--max-time", str(TIMEOUT), server.url +
         "/v1/completions", "-H", "Content-Type: application/json",
         "-d", body], capture_output=True, text=True, check=True).stdout
    check(json.loads(out)["choices"][0]["token_ids"] == greedy, "curl")
    out = subprocess.run(
        ["curl", "-sSN", "--max-time", str(TIMEOUT), server.url +
         "/v1/completions", "-d", json.dumps(greedy_body(prompt, 20,
                                                         stream=True))],
        capture_output=True, text=True, check=True).stdout
    events = [l[6:] for l in out.splitlines() if l.startswith("data: ")]
    check(events[-1] == "[DONE]", "curl stream end %r" % events[-1:])
    streamed = sum((json.loads(e)["choices"][0]["token_ids"]
                    for e in events[:-1]), [])
    check(streamed == greedy, "curl stream tokens %s" % streamed)
    print("ok: curl: Meta's greedy tokens, whole and streamed to [DONE]")


def scenario_concurrent(server, fixtures):
    """32 clients at once, each a prompt that is Meta's prompt and the
    first k tokens of its continuation: each continues it as Meta does."""
    prompt, greedy = fixture(fixtures)
    results, errors = {}, []

    def run(i):
        k, n = i % 8, 20 - i % 8 - i // 8
        try:
            if i % 4 == 3:  # some through the openai client, unstreamed
                r = server.client().completions.create(
                    model="", prompt=prompt + greedy[:k], max_tokens=n,
                    temperature=0, extra_body={"ignore_eos": True})
                results[i] = r.choices[0].token_ids
            else:
                s = Stream(server, greedy_body(prompt + greedy[:k], n))
                s.read_all()
                results[i] = s.tokens if s.done else None
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append("client %d: %r" % (i, e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    check(not errors, "; ".join(errors))
    for i in range(32):
        k, n = i % 8, 20 - i % 8 - i // 8
        check(results.get(i) == greedy[k:k + n],
              "client %d: %s, not %s" % (i, results.get(i), greedy[k:k + n]))
    check(server.metric("kiln_requests_total") == 32, "requests_total")
    wait_for(lambda: server.metric("kiln_kv_blocks_used") == 0,
             "the blocks to come back", 30)
    print("ok: 32 concurrent clients, each Meta's tokens")


def wait_for(condition, what, seconds=TIMEOUT):
    deadline = time.time() + seconds
    while not condition():
        check(time.time() < deadline, "waited %d s for %s" % (seconds, what))
        time.sleep(0.02)


def scenario_disconnect(server, fixtures):
    prompt, greedy = fixture(fixtures)
    s = Stream(server, greedy_body(prompt, 100))
    for _ in range(2):
        check(s.next_event(), "the stream ended early")
    check(server.metric("kiln_kv_blocks_used") > 0, "no blocks held")
    s.conn.sock.shutdown(2)
    s.conn.close()
    wait_for(lambda: server.metric("kiln_requests_running") == 0 and
             server.metric("kiln_kv_blocks_used") == 0,
             "the blocks to come back")
    check(server.metric('kiln_errors_total{kind="client_disconnected"}') == 1,
          "no disconnect counted")
    check(server.metric('kiln_requests_total{model="gqa",finish='
                        '"cancelled"}') == 1, "not cancelled")
    generated = server.metric("kiln_generation_tokens_total")
    check(generated < 100, "it generated all %d tokens" % generated)
    r = server.client().completions.create(
        model="gqa", prompt=prompt, max_tokens=20, temperature=0,
        extra_body={"ignore_eos": True})
    check(r.choices[0].token_ids == greedy, "after the disconnect")
    print("ok: a client that left: cancelled after %d of 100 tokens, its KV "
          "blocks free" % generated)


def error_of(status, body):
    check(isinstance(body, dict) and "error" in body and
          {"message", "type", "param", "code"} <= set(body["error"]),
          "not OpenAI's error object: %r" % (body,))
    return status, body["error"]["type"], body["error"]["code"]


def scenario_errors(server, fixtures):
    prompt, _ = fixture(fixtures)
    key = {"Authorization": "Bearer k1"}
    cases = [
        ("no key", {}, {"prompt": prompt}, (401, "authentication_error",
                                            "invalid_api_key")),
        ("wrong key", {"Authorization": "Bearer nope"}, {"prompt": prompt},
         (401, "authentication_error", "invalid_api_key")),
        ("malformed JSON", key, '{"prompt": [1, 2', (400,
                                                     "invalid_request_error",
                                                     "invalid_json")),
        ("wrong type", key, {"prompt": prompt, "temperature": "hot"},
         (400, "invalid_request_error", "invalid_type")),
        ("wrong type", key, {"prompt": prompt, "max_tokens": 1.5},
         (400, "invalid_request_error", "invalid_type")),
        ("unknown model", key, {"prompt": prompt, "model": "gpt-5"},
         (404, "not_found_error", "model_not_found")),
        ("oversized body", key, {"prompt": prompt, "pad": "x" * 10000},
         (413, "invalid_request_error", "request_too_large")),
        ("too many tokens", key, {"prompt": prompt, "max_tokens": 200},
         (400, "invalid_request_error", "context_length_exceeded")),
        ("token id", key, {"prompt": [5, 999]},
         (400, "invalid_request_error", "invalid_value")),
        ("n > 1", key, {"prompt": prompt, "n": 2},
         (400, "invalid_request_error", "unsupported_parameter")),
        ("logprobs", key, {"prompt": prompt, "logprobs": 3},
         (400, "invalid_request_error", "unsupported_parameter")),
    ]
    for what, headers, body, want in cases:
        status, _, got = server.request("POST", "/v1/completions", body,
                                        headers)
        check(error_of(status, got) == want,
              "%s: %s %r" % (what, status, got))
        print("ok: %s -> %d %s" % (what, want[0], want[2]))
    # Not HTTP at all: a 400 too, and the connection closes.
    with socket.create_connection((server.host, server.port),
                                  timeout=TIMEOUT) as raw:
        raw.sendall(b"GARBAGE\r\n\r\n")
        answer = b""
        for _ in range(1000):  # until the server closes
            piece = raw.recv(65536)
            if not piece:
                break
            answer += piece
    head, _, text = answer.decode().partition("\r\n\r\n")
    check(head.startswith("HTTP/1.1 400") and
          error_of(400, json.loads(text))[2] == "bad_request",
          "not HTTP: %r" % answer)
    print("ok: not HTTP -> 400 bad_request")
    check(server.request("GET", "/v1/nothing", None, key)[0] == 404, "404")
    check(server.request("GET", "/v1/completions", None, key)[0] == 405,
          "405")
    check(server.get("/health")[0] == 200 and server.get("/metrics")[0] == 200,
          "health and metrics need no key")
    for exc, client_key in ((openai.AuthenticationError, "none"),
                            (openai.BadRequestError, "k1")):
        try:
            server.client(client_key).completions.create(
                model="gqa", prompt=prompt, n=2)
            fail("no %s" % exc.__name__)
        except exc:
            pass
    print("ok: the openai client raises AuthenticationError and "
          "BadRequestError")


def scenario_queue(server, fixtures):
    """--max-batch 1 --max-queue 1: one runs, one waits, the third is 429."""
    prompt, greedy = fixture(fixtures)
    running = Stream(server, greedy_body(prompt, 100))
    check(running.next_event(), "the first stream ended early")
    waited = {}

    def second():
        waited["r"] = server.request("POST", "/v1/completions",
                                     greedy_body(prompt, 20))

    t = threading.Thread(target=second)
    t.start()
    wait_for(lambda: server.get("/health")[1]["waiting"] == 1,
             "the second request to wait")
    status, headers, body = server.request("POST", "/v1/completions",
                                           greedy_body(prompt, 4))
    check(error_of(status, body) == (429, "rate_limit_error", "queue_full"),
          "third: %s %r" % (status, body))
    check(int(headers.get("Retry-After", "0")) >= 1, "no Retry-After")
    print("ok: a full queue -> 429 queue_full, Retry-After %s" %
          headers["Retry-After"])
    running.read_all()
    t.join(TIMEOUT)
    check(running.tokens[-1:] and running.done, "the first stream")
    check(waited["r"][0] == 200 and
          waited["r"][2]["choices"][0]["token_ids"] == greedy,
          "the waiting request: %r" % (waited["r"],))
    print("ok: the queued request ran after the running one")


def scenario_ratelimit(server, fixtures):
    """--rate-limit 1,2 --api-key k1,k2: a bucket of 2 per key."""
    codes = []
    for key in ("k1", "k1", "k1", "k2"):
        status, headers, body = server.request(
            "GET", "/v1/models", None, {"Authorization": "Bearer " + key})
        codes.append(status)
    check(codes == [200, 200, 429, 200], "codes %s" % codes)
    status, headers, body = server.request(
        "GET", "/v1/models", None, {"Authorization": "Bearer k1"})
    check(error_of(status, body) == (429, "rate_limit_error",
                                     "rate_limit_exceeded") and
          int(headers["Retry-After"]) >= 1, "429: %r" % (body,))
    print("ok: the third request of a key in a second -> 429 "
          "rate_limit_exceeded; another key's bucket is its own")


def scenario_drain(server, fixtures, expect_cancel):
    prompt, greedy = fixture(fixtures)
    s = Stream(server, greedy_body(prompt, 40))
    check(s.next_event(), "the stream ended early")
    server.proc.send_signal(signal.SIGTERM)

    def refused():
        try:
            c = server.connection()
            c.connect()
            c.close()
            return False
        except ConnectionRefusedError:
            return True

    wait_for(refused, "new connections to be refused", 10)
    s.read_all()
    code = server.stop(signalled=True)
    check(code == 0, "exit code %d" % code)
    if expect_cancel:
        check(s.error and s.error["code"] == "server_shutting_down" and s.done,
              "the stream: %r" % (s.error,))
        print("ok: SIGTERM past --drain-seconds: the stream ends with "
              "server_shutting_down after %d tokens; exit 0" % len(s.tokens))
    else:
        check(s.tokens[:20] == greedy and len(s.tokens) == 40 and
              s.finish == "length" and s.done,
              "the drained stream: %d tokens, %s" % (len(s.tokens), s.finish))
        print("ok: SIGTERM: new connections refused, the running stream "
              "finished (40 tokens), exit 0")


def scenario_fallback(server, fixtures):
    """--max-batch 1 --max-queue 10: with 9 waiting (above 80%), a new
    request goes to the fallback, marked in the response."""
    prompt, greedy = fixture(fixtures)
    running = Stream(server, greedy_body(prompt, 100, model="gqa"))
    check(running.next_event(), "the stream ended early")
    results = []
    threads = [threading.Thread(target=lambda: results.append(server.request(
        "POST", "/v1/completions", greedy_body(prompt, 2))))
        for _ in range(9)]
    for t in threads:
        t.start()
    wait_for(lambda: server.get("/health")[1]["waiting"] == 9,
             "9 waiting requests")
    status, headers, body = server.request("POST", "/v1/completions",
                                           greedy_body(prompt, 20))
    check(status == 200 and body["model"] == "small" and
          headers.get("X-Kiln-Fallback") == "small" and
          body["choices"][0]["token_ids"] == greedy,
          "fallback: %s %s %r" % (status, headers, body))
    check(server.metric("kiln_fallback_requests_total") == 1, "metric")
    running.read_all()
    for t in threads:
        t.join(TIMEOUT)
    check(len(results) == 9 and all(r[0] == 200 and r[2]["model"] == "gqa"
                                    for r in results), "the 9 waiting")
    print("ok: above 80% of the queue a request went to the fallback "
          "'small' (X-Kiln-Fallback), the 9 waiting ran on 'gqa'")


def main():
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--fixtures", required=True)
    args = parser.parse_args(sys.argv[1:split])
    server = Server(sys.argv[split + 1:])
    try:
        name = args.scenario
        if name in ("drain", "drain-cancel"):
            scenario_drain(server, args.fixtures, name == "drain-cancel")
            return
        globals()["scenario_" + name](server, args.fixtures)
        code = server.stop()
        check(code == 0, "exit code %d after SIGTERM" % code)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()


if __name__ == "__main__":
    main()
