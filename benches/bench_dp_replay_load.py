#!/usr/bin/env python3
"""Loopback figures of pltlab-dp replay and load (127.0.0.1 only, no root), over http and https:
the replay server's time for a 100 KB body (request read -> response on the socket, its own
statistics) and the loader's request -> first byte on a reused connection (200 requests one
after the other), and the loader's PLT at RTT 0 for a synthetic 191-object, 31-host page
(median of 10 loads).

    python3 benches/bench_dp_replay_load.py [--scheme http|https] [--quick] [--binary PLTLAB_DP]
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import record

META = {
    "name": "bench_dp_replay_load",
    "area": "replay",
    "title": "Replay server and built-in loader on loopback",
    "command": "python3 benches/bench_dp_replay_load.py",
    "quick": "python3 benches/bench_dp_replay_load.py --quick",
    "duration": "~10 s",
    "figures": {
        "server_time": {
            "name": "replay server time for a 100 KB body (request read -> response on the socket)",
            "unit": "us",
            "target": ("<=", 100),
            "on": "200 requests one after the other on one connection, loopback; median (p99, max beside)",
        },
        "first_byte": {
            "name": "loader: request -> first byte of a 100 KB body on a reused connection",
            "unit": "us",
            "target": None,
            "on": "the same 199 requests (the first opens the connection)",
        },
        "page_plt": {
            "name": "loader PLT at RTT 0, synthetic 191-object / 31-host page",
            "unit": "ms",
            "target": ("<=", 100),
            "on": "median of 10 loads, loopback",
        },
    },
}

N_OBJECTS, N_HOSTS = 191, 31


def files(d: str, port: int, tls: bool, chain_len: int) -> None:
    rnd = random.Random(1)
    objs, resp = [], []
    for i in range(N_OBJECTS):
        h = "h0.test" if i == 0 else f"h{rnd.randrange(N_HOSTS)}.test"
        size = 60000 if i == 0 else int(min(300000, rnd.lognormvariate(8.5, 1.3)))
        resp.append({"host": h, "path": f"/o{i}", "body": {"synth": size, "mime": "image/png"}, "chunked": i % 7 == 3})
        parent = None if i == 0 else (0 if i < 40 else rnd.randrange(1, 40))
        scheme = "https" if tls else "http"
        objs.append(
            {"url": f"{scheme}://{h}/o{i}", "host": h, "ip": "127.0.0.1", "port": port, "tls": tls, "parent": parent}
        )
    resp.append({"host": "h0.test", "path": "/big", "body": {"synth": 100_000}})  # the latency figure
    manifest = {
        "listen": [{"ip": "127.0.0.1", "port": port, "tls": tls}],
        "tls": {"cert": f"{d}/ca/hosts.pem", "key": f"{d}/ca/hosts.key"},
        "responses": resp,
    }
    chain = [
        {
            "url": f"{'https' if tls else 'http'}://h0.test/big",
            "host": "h0.test",
            "ip": "127.0.0.1",
            "port": port,
            "tls": tls,
            "parent": (i - 1 if i else None),
        }
        for i in range(chain_len)
    ]
    for name, doc in (
        ("m.json", manifest),
        ("page.json", {"objects": objs, "ca": f"{d}/ca/ca.pem"}),
        ("chain.json", {"objects": chain, "ca": f"{d}/ca/ca.pem", "max_conns_per_host": 1}),
    ):
        with open(f"{d}/{name}", "w") as f:
            json.dump(doc, f)


def load(binary: str, plan: str) -> dict:
    cp = subprocess.run([binary, "load", "--plan", plan], check=True, capture_output=True, text=True)
    return json.loads(cp.stdout)


def serve(binary: str, d: str) -> subprocess.Popen:
    srv = subprocess.Popen([binary, "replay", "--manifest", f"{d}/m.json"], stdout=subprocess.PIPE, text=True)
    srv.stdout.readline()  # listening
    return srv


def stop(srv: subprocess.Popen) -> dict:
    """SIGTERM; the server's statistics (its last stdout line)."""
    srv.terminate()
    out = srv.communicate(timeout=10)[0].strip().splitlines()
    try:
        return json.loads(out[-1])
    except (ValueError, IndexError):
        return {}


def scheme_figures(b, binary: str, tls: bool, chain_len: int, loads: int) -> None:
    scheme = "https" if tls else "http"
    d = tempfile.mkdtemp(prefix="pltlab-bench-")
    srv = None
    try:
        subprocess.run(
            [binary, "ca", "--out", f"{d}/ca"] + sum([["--host", f"h{i}.test"] for i in range(N_HOSTS)], []),
            check=True,
            capture_output=True,
        )
        port = 18400 + (os.getpid() + 7 * tls) % 500
        files(d, port, tls, chain_len)
        srv = serve(binary, d)
        out = load(binary, f"{d}/chain.json")
        fb = [(r["first_byte_ms"] - r["request_ms"]) * 1000 for r in out["requests"][1:]]
        lb = [(r["last_byte_ms"] - r["request_ms"]) * 1000 for r in out["requests"][1:]]
        stats = stop(srv)
        srv = None
        s = stats.get("service_us") or {}
        print(
            f"{scheme}: 100 KB, reused conn: request->first byte median {statistics.median(fb):.0f} us, "
            f"->last byte median {statistics.median(lb):.0f} us; server time median {s.get('p50')} us, "
            f"p99 {s.get('p99')} us (target median <= 100 us)",
            flush=True,
        )
        on = f"{scheme}, {chain_len} requests of 100 KB one after the other on one connection, loopback"
        b.figure(
            "server_time",
            s.get("p50"),
            name=f"{META['figures']['server_time']['name']}, {scheme}",
            dist={k: s.get(k) for k in ("n", "p50", "p99", "max") if k in s},
            on=on,
        )
        b.figure(
            "first_byte",
            statistics.median(fb),
            name=f"{META['figures']['first_byte']['name']}, {scheme}",
            samples=fb,
            on=on,
        )
        srv = serve(binary, d)
        plts = []
        for _ in range(loads):
            t = time.time()
            out = load(binary, f"{d}/page.json")
            wall = (time.time() - t) * 1000
            plts.append(out["plt_ms"])
        print(
            f"{scheme}: {N_OBJECTS} objects, {N_HOSTS} hosts, {out['bytes'] / 1e6:.2f} MB, {len(out['connections'])} "
            f"conns: PLT ms median {statistics.median(plts):.1f} min {min(plts):.1f} max {max(plts):.1f} "
            f"(last wall {wall:.0f} ms; target median <= 100 ms)",
            flush=True,
        )
        b.figure(
            "page_plt",
            statistics.median(plts),
            name=f"{META['figures']['page_plt']['name']}, {scheme}",
            samples=plts,
            on=f"{scheme}, {out['bytes'] / 1e6:.2f} MB over {len(out['connections'])} connections, median of {loads} loads",
        )
    finally:
        if srv is not None:
            stop(srv)
        shutil.rmtree(d, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheme", choices=("http", "https"), action="append", help="default: both")
    ap.add_argument("--quick", action="store_true", help="20 requests, 2 page loads (plumbing check)")
    ap.add_argument("--binary", help="pltlab-dp to measure (default: the one pltlab runs)")
    ap.add_argument("legacy_binary", nargs="?", help=argparse.SUPPRESS)  # the old positional form
    a = ap.parse_args()
    with record.Bench(META, quick=a.quick) as b:
        binary = a.binary or a.legacy_binary
        if binary is None:
            from pltlab import dataplane

            binary = str(dataplane.binary())
        for scheme in a.scheme or ["http", "https"]:
            scheme_figures(b, binary, scheme == "https", 20 if a.quick else 200, 2 if a.quick else 10)
    return b.exit_code


if __name__ == "__main__":
    sys.exit(main())
