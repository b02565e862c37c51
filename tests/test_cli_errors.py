"""Nonsense parameters: one clear error line, non-zero exit, nothing created."""

import pytest

from tests.conftest import leaked, pltlab_cmd, project_state


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--rtt=-5ms"], "must not be negative"),
        (["--loss", "150%"], "between 0 and 100%"),
        (["--rate", "0"], "must be positive"),
        (["--cc", "vegas"], "unknown congestion control"),
        (["--icw", "0"], "1 to 1024"),
        (["--icw", "1000000"], "1 to 1024"),
        (["--queue", "0"], "must be positive"),
        (["--origins", "0"], "origins"),
        (["--origin-rtt", "5=10ms"], "override for origin 5"),
        (["--backend", "mininet"], "unknown backend"),
        (["--pcap", "/nonexistent/dir/x.pcap"], "does not exist"),
    ],
)
def test_bad_parameters(args, needle):
    before = project_state()
    cp = pltlab_cmd("shell", *args, "--", "true")
    assert cp.returncode != 0
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, cp.stderr
    assert lines[0].startswith("pltlab: error:") and needle in lines[0], lines[0]
    assert not leaked(before)
