"""Each load records the packets the link emulator dropped during it, per direction: by its loss
and by its full queue (metrics `link_drops`, from the emulator's per-load snapshot), so what loss
recovery (RACK, TLP) had to act on is measured, not assumed (issue 29)."""

import pytest

from pltlab.archive.generate import generate
from pltlab.run.config import RunConfig
from pltlab.run.runner import link_drops, run_page


def test_drops_per_direction_from_the_snapshot():
    snap = {
        "event": "snapshot",
        "uplink": {"packets_out": 9, "dropped_loss": 2, "dropped_queue": 0},
        "downlink": {"packets_out": 30, "dropped_loss": 0, "dropped_queue": 7},
    }
    assert link_drops(snap) == {"uplink": {"loss": 2, "queue": 0}, "downlink": {"loss": 0, "queue": 7}}
    # not measured: no emulator (netem), or one of before the counts
    assert link_drops(None) is None
    assert link_drops({"uplink": {"packets_out": 9}, "downlink": {"packets_out": 30}}) is None


def _drops(**knobs) -> dict:
    page = generate(objects=13, total_bytes=13 * 6000, origins=2, depth=1, seed=5, domain="dr")
    (r,) = run_page(page, RunConfig(rtt="20ms", reps=1, tfo_modes=(False,), **knobs))
    return r["metrics"]["link_drops"]


@pytest.mark.root
def test_a_load_records_its_link_drops():
    """No loss and the default 1000-packet queue: none; a 4-packet queue behind 1 Mbit/s drops
    downlink packets (overflow); 20 % loss on a link without a rate drops by loss alone."""
    assert _drops() == {"uplink": {"loss": 0, "queue": 0}, "downlink": {"loss": 0, "queue": 0}}
    short = _drops(rate="1mbit", queue=4)
    assert short["downlink"]["queue"] > 0 and short["downlink"]["loss"] == short["uplink"]["loss"] == 0
    lossy = _drops(loss="20%")
    assert lossy["uplink"]["loss"] + lossy["downlink"]["loss"] > 0
    assert lossy["uplink"]["queue"] == lossy["downlink"]["queue"] == 0
