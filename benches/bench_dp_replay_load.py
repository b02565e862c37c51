"""Loopback figures for pltlab-dp replay/load: server latency (100 KB body) and
loader PLT overhead at RTT 0 for a synthetic 191-object, 31-host page."""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

# usage: python3 benches/bench_dp_replay_load.py [PLTLAB_DP_BINARY] [--tls]   (127.0.0.1 only)
args = [a for a in sys.argv[1:] if not a.startswith("--")]
if args:
    B = args[0]
else:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from pltlab import dataplane

    B = str(dataplane.binary())
d = tempfile.mkdtemp(prefix="pltlab-bench-")
tls = "--tls" in sys.argv
subprocess.run(
    [B, "ca", "--out", f"{d}/ca"] + sum([["--host", f"h{i}.test"] for i in range(31)], []),
    check=True,
    capture_output=True,
)
rnd = random.Random(1)
objs, resp = [], []
port = 18400 + os.getpid() % 500
for i in range(191):
    h = "h0.test" if i == 0 else f"h{rnd.randrange(31)}.test"
    size = 60000 if i == 0 else int(min(300000, rnd.lognormvariate(8.5, 1.3)))
    resp.append({"host": h, "path": f"/o{i}", "body": {"synth": size, "mime": "image/png"}, "chunked": i % 7 == 3})
    parent = None if i == 0 else (0 if i < 40 else rnd.randrange(1, 40))
    objs.append(
        {
            "url": f"{'https' if tls else 'http'}://{h}/o{i}",
            "host": h,
            "ip": "127.0.0.1",
            "port": port,
            "tls": tls,
            "parent": parent,
        }
    )
# 100 KB chain on one connection for the latency figure
resp.append({"host": "h0.test", "path": "/big", "body": {"synth": 100_000}})
json.dump(
    {
        "listen": [{"ip": "127.0.0.1", "port": port, "tls": tls}],
        "tls": {"cert": f"{d}/ca/hosts.pem", "key": f"{d}/ca/hosts.key"},
        "responses": resp,
    },
    open(f"{d}/m.json", "w"),
)
json.dump({"objects": objs, "ca": f"{d}/ca/ca.pem"}, open(f"{d}/page.json", "w"))
chain = [
    {
        "url": "http://h0.test/big",
        "host": "h0.test",
        "ip": "127.0.0.1",
        "port": port,
        "tls": tls,
        "parent": (i - 1 if i else None),
    }
    for i in range(200)
]
for c in chain:
    c["url"] = c["url"].replace("http:", "https:" if tls else "http:")
json.dump({"objects": chain, "ca": f"{d}/ca/ca.pem", "max_conns_per_host": 1}, open(f"{d}/chain.json", "w"))
srv = subprocess.Popen([B, "replay", "--manifest", f"{d}/m.json"], stdout=subprocess.PIPE, text=True)
try:
    print(srv.stdout.readline().strip()[:80])
    out = json.loads(
        subprocess.run([B, "load", "--plan", f"{d}/chain.json"], check=True, capture_output=True, text=True).stdout
    )
    fb = [r["first_byte_ms"] - r["request_ms"] for r in out["requests"][1:]]
    lb = [r["last_byte_ms"] - r["request_ms"] for r in out["requests"][1:]]
    print(
        f"100 KB, reused conn: request->first byte median {statistics.median(fb) * 1000:.0f} us p90 {sorted(fb)[len(fb) * 9 // 10] * 1000:.0f} us; ->last byte median {statistics.median(lb) * 1000:.0f} us"
    )
    srv.terminate()
    print("100KB-only server stats:", srv.communicate()[0].strip()[-160:])
    srv = subprocess.Popen([B, "replay", "--manifest", f"{d}/m.json"], stdout=subprocess.PIPE, text=True)
    srv.stdout.readline()
    plts = []
    for _ in range(10):
        t = time.time()
        out = json.loads(
            subprocess.run([B, "load", "--plan", f"{d}/page.json"], check=True, capture_output=True, text=True).stdout
        )
        wall = (time.time() - t) * 1000
        plts.append(out["plt_ms"])
    print(
        f"191 objects, {len(set(o['host'] for o in objs))} hosts, {out['bytes'] / 1e6:.2f} MB, {len(out['connections'])} conns: PLT ms median {statistics.median(plts):.1f} min {min(plts):.1f} max {max(plts):.1f} (last wall {wall:.0f} ms)"
    )
finally:
    srv.terminate()
    print(srv.communicate()[0].strip()[-200:])
    import shutil

    shutil.rmtree(d, ignore_errors=True)
