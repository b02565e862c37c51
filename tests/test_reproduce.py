"""`pltlab reproduce tfo`: one bundled page, one repetition, the JSON object of the issue."""

import json

from tests.conftest import pltlab_cmd


def test_reproduce_tfo_json_one_page(tmp_path):
    out = tmp_path / "o"
    cp = pltlab_cmd("reproduce", "tfo", "--pages", "wikipedia", "--reps", "1", "--json", "-o", str(out),
                    timeout=300)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout)
    assert set(res) == {"rows", "invalid_runs", "output_dir"} and res["invalid_runs"] == 0
    assert [r["rtt_ms"] for r in res["rows"]] == [20, 100, 200]
    for r in res["rows"]:
        assert set(r) == {"page", "rtt_ms", "plt_notfo_ms", "plt_tfo_ms", "improvement", "improvement_ci", "n"}
        assert r["page"] == "wikipedia" and r["n"] == 1
        assert r["improvement"] == round(1 - r["plt_tfo_ms"] / r["plt_notfo_ms"], 4) or \
            abs(r["improvement"] - (1 - r["plt_tfo_ms"] / r["plt_notfo_ms"])) < 1e-3
        assert 0 < r["improvement"] < 0.6  # TFO saves handshakes; transfer time dominates at 4 Mbit/s
    imps = [r["improvement"] for r in res["rows"]]
    assert imps[0] < imps[2]  # grows with RTT
    assert (out / "report.html").is_file() and (out / "table.md").is_file()


def test_reproduce_bad_page_is_one_line(tmp_path):
    cp = pltlab_cmd("reproduce", "tfo", "--pages", "bogus", "-o", str(tmp_path / "o"))
    assert cp.returncode != 0 and cp.stderr.strip().count("\n") == 0 and "bogus" in cp.stderr
    assert not (tmp_path / "o").exists()
