"""An https-only protocol asked of a load that fetches nothing over https is refused in one line
(it would run over HTTP/1.1 under the other protocol's name)."""

import pytest

from pltlab.archive.generate import generate
from pltlab.errors import PltError
from pltlab.run.schemes import check_protocol


@pytest.mark.parametrize("protocol", ["h2", "h3"])
def test_https_only_protocol_on_an_all_http_load_is_refused(protocol):
    page = generate(objects=5, total_bytes=10_000, origins=2, depth=2, seed=1, scheme="http")
    with pytest.raises(PltError) as e:
        check_protocol(page, (), protocol, "mypage")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("mypage: ") and f"protocol {protocol}" in msg and "--schemes https" in msg


@pytest.mark.parametrize("protocol", ["h2", "h3"])
def test_https_or_upgraded_origins_take_an_https_only_protocol(protocol):
    http = generate(objects=5, total_bytes=10_000, origins=2, depth=2, seed=1, scheme="http")
    check_protocol(http, {u.split("/")[2] for u in (o.url for o in http.objects)}, protocol, "p")  # upgraded
    check_protocol(generate(objects=5, total_bytes=10_000, origins=2, seed=1, scheme="https"), (), protocol, "p")


@pytest.mark.parametrize("protocol", ["h1", "recorded"])
def test_h1_and_recorded_run_on_http(protocol):
    check_protocol(generate(objects=5, total_bytes=10_000, origins=2, seed=1, scheme="http"), (), protocol, "p")
