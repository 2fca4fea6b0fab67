#!/usr/bin/env python3
"""Share of acquisitions per agent on one busy lock, for the README's "Which lock should you
use?": 2 Rust agents and 1 Java agent (Redisson), one owner each, all running `stress` (with
recorded intervals) on the same lock and counter, first on a `Lock`, then on a `FairLock`.
Counts the acquisitions made while all three were still running, and each agent's longest wait
between two of its sections in that window.

Usage (after interop/build): bench/fairness/share.py <repo root> [lock iterations] [fair iterations]
Starts its own redis-server on a free port of 127.0.0.1 and stops it (by its pid) at the end."""
import json, shutil, socket, subprocess, sys, tempfile, threading, time

ROOT = sys.argv[1]
LOCK_ITER = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
FAIR_ITER = int(sys.argv[3]) if len(sys.argv) > 3 else 600

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

port = free_port()
d = tempfile.mkdtemp()
redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d],
                         stdout=subprocess.DEVNULL)
time.sleep(0.5)
url = f"redis://127.0.0.1:{port}"

class Agent:
    def __init__(self, imp):
        self.imp = imp
        self.p = subprocess.Popen([f"{ROOT}/interop/agent", imp, "--redis", url], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        while True:
            ev = json.loads(self.p.stdout.readline())
            if ev.get("event") == "ready": break
        self.n = 0
    def call(self, req):
        self.n += 1; req["id"] = self.n
        self.p.stdin.write(json.dumps(req) + "\n"); self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())
    def close(self):
        self.p.stdin.close(); self.p.wait(timeout=20)

agents = [Agent("rust"), Agent("rust"), Agent("java")]
# warm the JVM a little
for a in agents:
    a.call({"op": "stress", "kind": "lock", "name": "warm", "owner": 1, "iterations": 200, "counter": "warmc"})
results = {}
for kind in ["lock", "fair"]:
    ITER = LOCK_ITER if kind == "lock" else FAIR_ITER
    name = f"share-{kind}"
    out = [None] * 3
    def run(i):
        out[i] = agents[i].call({"op": "stress", "kind": kind, "name": name, "owner": 1, "iterations": ITER,
                                 "counter": name + ":c", "hold_us": 100, "record": True})
    ts = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in ts: t.start()
    for t in ts: t.join()
    ivs = [o["intervals"] for o in out]
    start = max(iv[0][0] for iv in ivs)              # all three running
    end = min(iv[-1][1] for iv in ivs)               # until the first one finished
    counts = [sum(1 for a, b in iv if start <= a <= end) for iv in ivs]
    total = sum(counts)
    waits = []
    for iv in ivs:
        # gaps between this agent's sections inside the window, the window's edges included
        inside = [(a, b) for a, b in iv if start <= a <= end]
        edges = [start] + [x for a, b in inside for x in (a, b)] + [end]
        w = [(edges[k + 1] - edges[k]) / 1e9 for k in range(0, len(edges) - 1, 2)]
        waits.append(max(w) if w else (end - start) / 1e9)
    results[kind] = (counts, total, waits, (end - start) / 1e9)
    print(f"{kind}: window {(end - start) / 1e9:.2f} s; acquisitions rust1 {counts[0]} ({100 * counts[0] / total:.1f} %), "
          f"rust2 {counts[1]} ({100 * counts[1] / total:.1f} %), java {counts[2]} ({100 * counts[2] / total:.1f} %); "
          f"longest wait between two sections: rust1 {waits[0]:.3f} s, rust2 {waits[1]:.3f} s, java {waits[2]:.3f} s", flush=True)
for a in agents: a.close()
redis.kill(); redis.wait()
shutil.rmtree(d, ignore_errors=True)
