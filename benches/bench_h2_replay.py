#!/usr/bin/env python3
"""Replay server time for a 100 KB body over HTTP/2 and over HTTP/1.1 (TLS, loopback): the
server's own figure (`service_us` of its stats: request read -> the response's last byte
handed to the TLS stream and flushed, the same moment over HTTP/1.1 and over h2 with either
server priority: over h2 the flush after its END_STREAM frame, replay/h2_sent.rs), and curl's per-request times on the reused
connection (request -> first byte, -> last byte: the end-to-end figure for both), N requests on
one connection (libcurl with nghttp2), over h2 with either server priority. Target (issue 14):
median <= 100 us over h2, as over HTTP/1.1.

    python3 benches/bench_h2_replay.py [--requests 300] [--quick]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import record

META = {
    "name": "bench_h2_replay",
    "area": "replay",
    "title": "Replay server over HTTP/2 and HTTP/1.1 (TLS, loopback)",
    "command": "python3 benches/bench_h2_replay.py",
    "quick": "python3 benches/bench_h2_replay.py --quick",
    "duration": "~10 s",
    "needs": "curl with HTTP/2",
    "figures": {
        "server_time": {
            "name": "replay server time for a 100 KB body",
            "unit": "us",
            "target": ("<=", 100),
            "on": "300 requests on one TLS connection (curl), loopback; median (p99, max beside)",
        },
        "last_byte": {
            "name": "curl: request -> last byte of a 100 KB body",
            "unit": "us",
            "target": None,
            "on": "the same requests after the first (connection set up); median",
        },
    },
}

VARIANTS = (
    ("h2, server priority rfc9218 (the default)", ["h2", "http/1.1"], "--http2", "rfc9218"),
    ("h2, server priority round-robin", ["h2", "http/1.1"], "--http2", "round-robin"),
    ("HTTP/1.1", ["http/1.1"], "--http1.1", "rfc9218"),
)


def serve_and_fetch(b: str, d: str, port: int, alpn: list[str], curl_flag: str, n: int, prio: str) -> dict:
    m = {
        "listen": [{"ip": "127.0.0.1", "port": port, "tls": True, "alpn": alpn}],
        "tls": {"cert": f"{d}/ca/hosts.pem", "key": f"{d}/ca/hosts.key"},
        "responses": [{"host": "a.test", "path": "/big", "body": {"synth": 100_000}}],
        "h2_priority": prio,
    }
    with open(f"{d}/m.json", "w") as f:
        json.dump(m, f)
    srv = subprocess.Popen([b, "replay", "--manifest", f"{d}/m.json"], stdout=subprocess.PIPE, text=True)
    try:
        srv.stdout.readline()
        url = f"https://a.test:{port}/big"
        cp = subprocess.run(
            ["curl", "-s", curl_flag, "--cacert", f"{d}/ca/ca.pem", "--resolve", f"a.test:{port}:127.0.0.1"]
            + ["-w", "%{http_version} %{size_download} %{time_starttransfer} %{time_total}\\n"]
            + ["-o", "/dev/null", url] * n,
            capture_output=True,
            text=True,
            check=True,
        )
        rows = [line.split() for line in cp.stdout.splitlines()]
        want = ["2" if curl_flag == "--http2" else "1.1", "100000"]
        assert all(r[:2] == want for r in rows) and len(rows) == n, rows[:2]
        # the client's view of each request after the first (connection set up): first and last byte
        fb = sorted(float(r[2]) * 1e6 for r in rows[1:])
        lb = sorted(float(r[3]) * 1e6 for r in rows[1:])
        srv.send_signal(signal.SIGTERM)
        stats = json.loads(srv.communicate(timeout=10)[0].strip().splitlines()[-1])
        stats["client_us"] = {"first_byte": fb[len(fb) // 2], "last_byte": lb[len(lb) // 2], "last_bytes": lb}
    finally:
        if srv.poll() is None:
            srv.kill()
    return stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=None, help="requests per variant (default 300, --quick 20)")
    ap.add_argument("--quick", action="store_true", help="20 requests per variant (plumbing check)")
    a = ap.parse_args()
    with record.Bench(META, quick=a.quick) as bench:
        measure(bench, a.requests or (20 if a.quick else 300))
    return bench.exit_code


def measure(bench, n: int) -> None:
    if not shutil.which("curl"):
        bench.skip("needs curl (with HTTP/2: libcurl + nghttp2)")
        return
    from pltlab import dataplane

    b = dataplane.binary()
    d = tempfile.mkdtemp(prefix="pltlab-bench-h2-")
    try:
        subprocess.run([b, "ca", "--out", f"{d}/ca", "--host", "a.test"], check=True, capture_output=True)
        port = 18900 + os.getpid() % 500
        for name, alpn, flag, prio in VARIANTS:
            st = serve_and_fetch(b, d, port, alpn, flag, n, prio)
            s = st["service_us"]
            c = st["client_us"]
            print(
                f"100 KB over {name}: {s['n']} responses on {st['connections']} connection(s), server time "
                f"median {s['p50']:.0f} us, p99 {s['p99']:.0f} us, max {s['max']:.0f} us (target median <= 100 us); "
                f"curl request -> first byte median {c['first_byte']:.0f} us, -> last byte {c['last_byte']:.0f} us",
                flush=True,
            )
            on = f"{name}: {n} requests on {st['connections']} connection(s), loopback"
            bench.figure(
                "server_time",
                s["p50"],
                name=f"{META['figures']['server_time']['name']}, {name}",
                dist={k: s[k] for k in ("n", "p50", "p99", "max") if k in s},
                on=on,
            )
            bench.figure(
                "last_byte",
                c["last_byte"],
                name=f"{META['figures']['last_byte']['name']}, {name}",
                samples=c["last_bytes"],
                on=on,
            )
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
