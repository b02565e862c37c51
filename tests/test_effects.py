"""What each feature saves (pltlab.report.effects): paired differences by page, RTT, the other
knobs and repetition, in ms and round trips, per page and pooled over pages."""

import pytest

from pltlab.report.effects import effects, table_rows


def _runs():
    """Two pages at RTT 100: PLT = base - 100 ms with TFO - 200 ms with 0-RTT (+ rep jitter)."""
    out = []
    for page, base in (("a", 1000.0), ("b", 3000.0)):
        for rep in (1, 2, 3):
            for tls in ("full", "0rtt"):
                for tfo in (0, 1):
                    plt = base - 100 * tfo - 200 * (tls == "0rtt") + rep
                    out.append(
                        {"status": "ok", "valid": 1, "page": page, "rtt_ms": 100.0, "rep": rep, "tls": tls, "tfo": tfo}
                        | {"plt_ms": plt, "protocol": "h2"}
                    )
    # an invalid run is never paired in
    out.append(out[0] | {"valid": 0, "plt_ms": 99999.0, "rep": 4})
    return out


def _row(rows, feature, context, page):
    (r,) = [r for r in rows if (r["feature"], r["context"], r["page"]) == (feature, context, page)]
    return r


def test_paired_savings_per_feature_context_and_page():
    rows = effects(_runs())
    r = _row(rows, "TLS full -> TLS 0rtt", "TFO off", "a")
    assert r["n"] == 3 and r["saved_ms"] == pytest.approx(200) and r["saved_rtts"] == pytest.approx(2)
    assert r["ci"] == pytest.approx([200, 200]) and r["baseline_context"]
    r = _row(rows, "TFO off -> TFO on", "TLS 0rtt", "b")
    assert r["saved_ms"] == pytest.approx(100) and not r["baseline_context"]
    pooled = _row(rows, "TFO off -> TFO on", "TLS full", "all pages")
    assert pooled["n"] == 6 and pooled["saved_rtts"] == pytest.approx(1) and pooled["saved_ms"] is None
    # protocol did not vary: not a feature; 2 features x 2 contexts x (2 pages + pooled)
    assert {r["feature"] for r in rows} == {"TLS full -> TLS 0rtt", "TFO off -> TFO on"}
    assert len(rows) == 12
    assert all(len(t) == 9 for t in table_rows(rows))


def test_nothing_varied_nothing_to_say():
    runs = [r for r in _runs() if r["tls"] == "full" and r["tfo"] == 0]
    assert effects(runs) == []
