#!/usr/bin/env python3
"""run_ranks.py: start a split model's ranks as processes, as torchrun does.

    run_ranks.py --world-size W [--only-rank R] [--bundle-of R=PATH]
                 [--args-of R=ARGS]
                 [--kill-rank R --after SECONDS] [--launcher N]
                 -- COMMAND BUNDLE ARGS...

Runs `COMMAND BUNDLE ARGS... --rendezvous 127.0.0.1:PORT --rank R
--world-size W` once per rank, all at once, on a free port (rank R runs
PATH in place of BUNDLE with --bundle-of R=PATH, and ARGS, split at
spaces, after the others with --args-of R=ARGS). --kill-rank sends
SIGKILL to rank R after SECONDS, as a rank that dies. With --launcher N,
the first N words start rank 0's command (a client that starts the server
it talks to: serve_client.py ... --) and the other ranks run the rest.
Prints each rank's
stdout and stderr lines as "rank R| LINE", then "rank R: exit CODE" for
every rank in order, and exits 0 (the test checks the lines). A rank that
is still running 120 s after the start is killed and reported as hanging.
"""
import argparse
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--only-rank", type=int)
    ap.add_argument("--bundle-of", action="append", default=[])
    ap.add_argument("--args-of", action="append", default=[])
    ap.add_argument("--kill-rank", type=int)
    ap.add_argument("--after", type=float, default=1.0)
    ap.add_argument("--launcher", type=int, default=0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    bundles = dict(b.split("=", 1) for b in a.bundle_of)
    extra = dict(b.split("=", 1) for b in a.args_of)
    port = free_port()
    ranks = [a.only_rank] if a.only_rank is not None else range(a.world_size)
    procs = {}
    for r in ranks:
        cmd = list(command) if r == 0 else list(command[a.launcher:])
        if str(r) in bundles:
            cmd[1 + (a.launcher if r == 0 else 0)] = bundles[str(r)]
        cmd += extra.get(str(r), "").split()
        cmd += ["--rendezvous", "127.0.0.1:%d" % port, "--rank", str(r),
                "--world-size", str(a.world_size)]
        procs[r] = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
    start = time.time()
    if a.kill_rank is not None:
        time.sleep(a.after)
        procs[a.kill_rank].send_signal(signal.SIGKILL)
    codes = {}
    for r, p in procs.items():
        try:
            out, _ = p.communicate(timeout=max(1.0, 120 - (time.time() - start)))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "HANG: still running after 120 s\n"
        for line in out.splitlines():
            print("rank %d| %s" % (r, line))
        codes[r] = p.returncode
    for r in procs:
        print("rank %d: exit %d" % (r, codes[r]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
