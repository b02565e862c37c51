"""Small things users trip over (issue 15, part 5): -h, --version, rates as pltlab prints them,
progress on stderr only, --json on sweep and report, Mahimahi traces and one pcap per load in
`pltlab run` and experiment files."""

import json
import os
import pty
import shutil
import struct
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from pltlab import __version__, units
from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.cli import app
from pltlab.errors import PltError
from pltlab.experiments import spec
from pltlab.run import knobs, loadpcaps
from pltlab.run.config import RunConfig
from pltlab.run.pcaptrace import ACK, SYN, ipv4_tcp, read_pcap, trace_plt, write_pcap
from tests.conftest import pltlab_cmd
from tests.test_cli_help import COMMANDS
from tests.test_report import _db

# ---- -h and --version ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "pltlab")
def test_dash_h_is_help_everywhere(path):
    res = CliRunner().invoke(app, [*path, "-h"], terminal_width=100)
    assert res.exit_code == 0 and res.exception is None, repr(res.exception)
    assert "Usage:" in res.stdout and "--help" in res.stdout


def test_version_flag_prints_both_versions():
    cp = pltlab_cmd("--version")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0] == f"pltlab {__version__}"
    assert len(lines) == 2 and lines[1].startswith("pltlab-dp "), lines  # the data plane's own answer


# ---- rates as pltlab prints them ------------------------------------------------------------


@pytest.mark.parametrize(
    "text,bps",
    [
        ("4 Mbit/s", 4_000_000),
        ("256 kbit/s", 256_000),
        ("0.256 Mbit/s", 256_000),
        ("1 Gbit/s", 10**9),
        ("4Mbit/s", 4_000_000),
        ("1500 bit/s", 1500),
        (" 4 mbit / s ", 4_000_000),
    ],
)
def test_printed_rates_parse(text, bps):
    assert units.rate_bps(text) == bps


@pytest.mark.parametrize("text", ["4 Mb/s", "4 MB/s", "4 s/s", "4 /s", "4 Mbit/h", "/s"])
def test_other_per_second_forms_are_refused(text):
    with pytest.raises(PltError, match="invalid rate"):
        units.rate_bps(text)


@pytest.mark.parametrize("bps", [1_000, 256_000, 1_500_000, 4_000_000, 10**9, 100 * 10**9])
@pytest.mark.parametrize("name", ["rate", "rate_up"])
def test_what_the_report_prints_parses_back(name, bps):
    shown = knobs.KNOBS[name].describe(bps)  # "down 4 Mbit/s", as in a configuration's name
    assert shown.split(" ", 1)[1].endswith("Mbit/s")
    assert RunConfig.from_knobs({name: shown.split(" ", 1)[1]}).columns()[knobs.KNOBS[name].column] == bps


def test_experiment_files_take_printed_rates(tmp_path):
    exp = spec.from_dict({"pages": ["amazon"], "rate": ["4 Mbit/s", "1 Gbit/s"], "rate_up": "256 kbit/s"})
    assert sorted(c.rate_bps for c in exp.configs) == [4_000_000, 10**9]
    assert {c.rate_up_bps for c in exp.configs} == {256_000}
    with pytest.raises(PltError, match=r"key 'rate': invalid rate '4 Mb/s'"):
        spec.from_dict({"pages": ["amazon"], "rate": "4 Mb/s"})


def test_run_takes_a_printed_rate():
    """The rate is checked first: a printed rate passes, and the page is what is then refused."""
    ok = pltlab_cmd("run", "/nonexistent/page.har", "--rate", "4 Mbit/s", "--rate-up", "256 kbit/s")
    bad = pltlab_cmd("run", "/nonexistent/page.har", "--rate", "4 Mb/s")
    assert ok.returncode == 2 and "rate" not in ok.stderr and "/nonexistent/page.har" in ok.stderr, ok.stderr
    assert bad.returncode == 2 and "invalid --rate '4 Mb/s'" in bad.stderr, bad.stderr


# ---- traces: checked when parsed ------------------------------------------------------------


def test_trace_knobs_in_run_and_experiment_files(tmp_path):
    (tmp_path / "ok.trace").write_text("".join(f"{ms}\n" for ms in range(1, 11)))
    (tmp_path / "bad.trace").write_text("1\n5\n3\n")
    (tmp_path / "exp.toml").write_text('pages = ["amazon"]\ntrace_down = "ok.trace"\ntrace_up = "ok.trace"\n')
    exp = spec.load(str(tmp_path / "exp.toml"))  # relative to the file's folder, as pages are
    cfg = exp.run_config(0)
    assert cfg.trace_down == cfg.trace_up == str(tmp_path / "ok.trace")
    assert cfg.link().rate_up_bps is None and cfg.link().rate_down_bps is None
    with pytest.raises(PltError, match=r"line 3: timestamps must not decrease"):
        RunConfig(trace_down=str(tmp_path / "bad.trace"))
    with pytest.raises(PltError, match="trace_down and rate both set the downlink's rate"):
        RunConfig(trace_down=str(tmp_path / "ok.trace"), rate="4mbit")
    # an uplink trace with a rate: the rate shapes the downlink only
    link = RunConfig(trace_up=str(tmp_path / "ok.trace"), rate="4mbit").link()
    assert (link.rate_up_bps, link.rate_down_bps) == (None, 4_000_000)
    (tmp_path / "both.toml").write_text('pages = ["amazon"]\nrate = ["unlimited", "4mbit"]\ntrace_down = "ok.trace"\n')
    cp = pltlab_cmd("sweep", str(tmp_path / "both.toml"), "-o", str(tmp_path / "out"))
    assert cp.returncode == 2 and "both.toml: trace_down and rate both set" in cp.stderr, cp.stderr
    assert not (tmp_path / "out").exists()  # refused before anything is written
    cp = pltlab_cmd("run", "amazon", "--trace-down", str(tmp_path / "bad.trace"))
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode == 2 and len(lines) == 1 and "line 3" in lines[0], cp.stderr


# ---- the per-load cut of a trace (synthetic) ------------------------------------------------

C, S = "198.18.0.1", "198.19.0.1"


def _conn(t, sport, n_data=2):
    """A connection's packets from time t: SYN, SYN-ACK, ACK, data both ways, FIN."""
    out = [
        (t, ipv4_tcp(C, S, sport, 80, 100, 0, SYN)),
        (t + 0.010, ipv4_tcp(S, C, 80, sport, 500, 101, SYN | ACK)),
        (t + 0.011, ipv4_tcp(C, S, sport, 80, 101, 501, ACK, 100)),
    ]
    for i in range(n_data):
        out.append((t + 0.020 + i * 0.001, ipv4_tcp(S, C, 80, sport, 501 + i * 1000, 201, ACK, 1000)))
    out.append((t + 0.030, ipv4_tcp(C, S, sport, 80, 201, 501 + n_data * 1000, ACK)))
    return out


def test_split_keeps_each_load_connections_only(tmp_path):
    warm = _conn(1.0, 40000)  # the warm-up visit: before any load
    load1 = _conn(2.0, 40001)
    late_fin = [(3.005, ipv4_tcp(C, S, 40001, 80, 201, 2501, 0x11))]  # load 1's close, during load 2
    load2 = _conn(3.0, 40002, n_data=3) + _conn(3.05, 40003)
    udp = bytes([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]) + bytes([198, 18, 0, 1, 198, 19, 0, 1]) + bytes(8)
    pkts = sorted(warm + load1 + load2 + late_fin + [(3.02, udp), (2.5, udp)], key=lambda p: p[0])
    whole = tmp_path / "whole.pcap"
    write_pcap(str(whole), pkts)
    a, b = str(tmp_path / "a.pcap"), str(tmp_path / "b.pcap")
    loadpcaps.split(str(whole), {b: (2.99, 3.2), a: (1.99, 2.2)})
    segs_a, segs_b = read_pcap(a), read_pcap(b)
    assert {s.sport for s in segs_a if s.src == C} == {40001}  # with its FIN sent during load 2
    assert len(segs_a) == len(load1) + 1
    assert {s.sport for s in segs_b if s.src == C} == {40002, 40003} and len(segs_b) == len(load2)
    assert os.path.getsize(b) == 24 + sum(16 + len(p) for _, p in load2) + 16 + len(udp)  # + the UDP packet in it
    assert trace_plt(segs_b, C)["connections"] == 2


def test_pcap_true_is_for_experiment_files_only(tmp_path):
    exp = spec.from_dict({"pages": ["amazon"], "pcap": True})
    assert exp.run_config(0).pcap is True and exp.run_config(0).topology().pcap is None
    assert spec.from_dict({"pages": ["amazon"]}).digest() == exp.digest()  # where traces go: not what is measured
    with pytest.raises(PltError, match="only in experiment files"):
        loadpcaps.out_folder(True)
    (tmp_path / "f").write_text("")
    with pytest.raises(PltError, match="a file exists there"):
        loadpcaps.out_folder(str(tmp_path / "f"))


# ---- report --json, progress on stderr only -------------------------------------------------


def test_report_json_is_the_tables_as_data(tmp_path):
    plts = _db(tmp_path)
    cp = pltlab_cmd("report", str(tmp_path), "--json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)  # stdout is the JSON object alone
    assert d["runs"] == {"total": 20, "valid": 18, "invalid": 1, "failed_attempts": 1, "failed": 1}
    rows = {(r["page"], r["rtt_ms"]): r for r in d["plt"]}
    for (page, rtt), r in rows.items():
        assert r["tfo_off"]["mean"] == pytest.approx(sum(plts[page, rtt, False]) / 3)
        assert r["tfo_on"]["n"] == 3
        assert r["improvement"] == pytest.approx(1 - r["tfo_on"]["mean"] / r["tfo_off"]["mean"])
    assert d["tables"]["plt"]["rows"][0] == ["a", "20", "100", "80", "20.0"]
    assert os.path.isfile(d["files"]["report.html"]) and all(os.path.isfile(f) for f in d["figures"])
    assert any(n["warning"] for n in d["notes"])


def _with_terminal_stderr(*args: str) -> tuple[int, bytes, bytes]:
    """Run the CLI with stderr a terminal and stdout a pipe: (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "pltlab", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        env={**os.environ, "COLUMNS": "120"},
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    out, _ = p.communicate(timeout=120)
    os.close(master)
    # a line longer than the terminal is wrapped (a long tmp path): join the wrapped parts
    return p.returncode, out, shown.replace(b"\r\n", b"")


def test_report_progress_goes_to_a_terminal_stderr_and_leaves_stdout_alone(tmp_path):
    _db(tmp_path)
    rc, out, shown = _with_terminal_stderr("report", str(tmp_path), "--json")
    assert rc == 0
    assert json.loads(out)["plt"]  # stdout: the JSON object, nothing drawn into it
    assert b"report:" in shown and b"statistics, tables, figures" in shown  # the spinner, on the terminal


# ---- real runs (root) ---------------------------------------------------------------------


def _page(tmp_path, objects=6, origins=2):
    har = tmp_path / "page.har"
    write_page(generate(objects=objects, total_bytes=objects * 3000, origins=origins, depth=1, seed=7), str(har))
    return str(har)


def _pcap_packets(path: str) -> int:
    with open(path, "rb") as f:
        data = f.read()
    assert struct.unpack_from("<I", data)[0] == 0xA1B23C4D  # nanosecond pcap, raw IP
    n, off = 0, 24
    while off + 16 <= len(data):
        off += 16 + struct.unpack_from("<I", data, off + 8)[0]
        n += 1
    assert off == len(data)
    return n


@pytest.mark.root
def test_run_pcap_is_one_file_per_load_with_that_load_only(tmp_path):
    out = tmp_path / "pcaps"
    cp = pltlab_cmd("run", _page(tmp_path), "--rtt", "20ms", "--reps", "2", "--pcap", str(out), "--json")
    assert cp.returncode == 0, cp.stderr
    runs = json.loads(cp.stdout)["runs"]
    assert len(runs) == 4 and all(r["valid"] for r in runs)
    assert sorted(os.listdir(out)) == sorted(os.path.basename(r["pcap"]) for r in runs)  # nothing else
    assert len({r["pcap"] for r in runs}) == 4
    for r in runs:
        name = os.path.basename(r["pcap"])
        assert f"tfo-{'on' if r['tfo'] else 'off'}_rep{r['rep']}" in name and "rtt20ms" in name
        segs = read_pcap(r["pcap"])
        assert len(segs) == _pcap_packets(r["pcap"])
        syns = [s for s in segs if s.flags & SYN and not s.flags & ACK]
        # this load's connections, no warm-up visit's or other load's, all opened during it (the
        # loader's: one the scheduler ended up not using carried no request)
        assert len(syns) == len(r["connections"]) >= sum(q["new_conn"] for q in r["requests"])
        assert all(r["started_at"] <= s.t <= r["ended_at"] for s in syns)
        assert sum(bool(s.payload) for s in syns) == (len(syns) if r["tfo"] else 0)  # TFO: data in every SYN
        tp = trace_plt(segs)  # the load as the wire saw it: from its first SYN to its last ACK, inside the load
        assert r["started_at"] <= tp["start"] < tp["end"] <= r["ended_at"]
        assert tp["connections"] == sum(q["new_conn"] for q in r["requests"])  # those that carried data
        assert tp["plt_ms"] == pytest.approx(r["plt_ms"], rel=0.3)  # (the loader's adds its own wake-ups)
        if shutil.which("capinfos"):  # (Debian's wireshark-common, with tshark)
            tc = subprocess.run(["capinfos", "-c", "-M", r["pcap"]], capture_output=True, text=True)
            assert tc.returncode == 0 and f"{len(segs)}" in tc.stdout, tc.stdout + tc.stderr


@pytest.mark.root
def test_run_progress_bar_on_a_terminal_stderr_json_on_stdout(tmp_path):
    rc, out, shown = _with_terminal_stderr("run", _page(tmp_path), "--rtt", "10ms", "--reps", "2", "--json")
    assert rc == 0 and len(json.loads(out)["runs"]) == 4
    assert b"Experiment 2" in shown and b"/4" in shown and b"ETA" in shown  # the lines and the bar (of 4 loads)


@pytest.mark.root
def test_run_with_a_mahimahi_trace_is_shaped_by_it(tmp_path):
    page = tmp_path / "big.har"
    write_page(generate(objects=2, total_bytes=240_000, origins=1, depth=1, seed=2), str(page))
    slow = tmp_path / "slow.trace"  # one 1504-byte opportunity every 8 ms: 1.504 Mbit/s
    slow.write_text("".join(f"{ms}\n" for ms in range(8, 1001, 8)))
    fast = tmp_path / "fast.trace"  # every ms: 12.032 Mbit/s
    fast.write_text("".join(f"{ms}\n" for ms in range(1, 101)))
    plt = {}
    for name, trace in (("slow", slow), ("fast", fast)):
        cp = pltlab_cmd(
            "run", str(page), "--rtt", "20ms", "--reps", "1", "--tfo", "off", "--trace-down", str(trace), "--json"
        )
        assert cp.returncode == 0, cp.stderr
        plt[name] = json.loads(cp.stdout)["runs"][0]["plt_ms"]
    # 240 kB down at 1.504 Mbit/s take >= 1.28 s; at 12 Mbit/s about 0.16 s plus round trips
    assert plt["slow"] >= 240_000 * 8 / 1.504e6 * 1000
    assert plt["fast"] < plt["slow"] / 3


@pytest.mark.root
def test_sweep_json_and_pcap_per_load_in_the_results_folder(tmp_path):
    _page(tmp_path, objects=3, origins=1)
    (tmp_path / "exp.toml").write_text(
        'name = "small"\npages = ["page.har"]\nrtt = "10ms"\nrate = "4 Mbit/s"\ntfo = ["off", "on"]\n'
        "repetitions = 1\npcap = true\n"
    )
    out = tmp_path / "out"
    cp = pltlab_cmd("sweep", str(tmp_path / "exp.toml"), "-o", str(out), "--json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert d["runs"]["done"] == 2 and d["runs"]["failed"] == 0
    assert d["report"]["runs"]["valid"] + d["runs"]["invalid"] == 2 == d["report"]["runs"]["total"]
    assert os.path.isfile(d["files"]["results.sqlite"]) and os.path.isfile(d["files"]["runs.csv"])
    assert d["report"]["plt"][0]["knobs"]["rate_down_bps"] == 4_000_000  # "4 Mbit/s" in the file
    assert os.path.isfile(d["report"]["files"]["report.html"])
    files = sorted(os.listdir(out / "pcap"))
    assert len(files) == 2 and [f.split("_")[-2:] for f in files] == [["tfo-off", "rep1.pcap"], ["tfo-on", "rep1.pcap"]]
    for f in files:
        segs = read_pcap(str(out / "pcap" / f))
        assert segs and trace_plt(segs)["connections"] >= 1
