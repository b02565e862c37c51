"""The validity rules every loader's load is judged by (the loader's own are methods of its
`Loader`: loaders.loader). Each returns why a load is invalid, or None.

- the recording's document (`document_chain`: refused before anything is built when it has none)
  and, for a planned load, whether it arrived (`document_problem`, by plan index);
- TFO used as asked (`judge`, after the document) and what TFO could not save (`tfo_note`);
- every request over the protocol the replay offered its origin (`protocol_problem`);
- TLS resumed (and 0-RTT) on every connection that carried a request (`tls_problem`: the default
  of a loader that does not decide resumption itself).
"""

from urllib.parse import urljoin, urlsplit, urlunsplit

from pltlab import protocols
from pltlab.archive.model import Obj, Page, strip_fragment
from pltlab.errors import PltError
from pltlab.loaders import plan as plans


def page_label(page: Page) -> str:
    """How runs and messages name a page: its stable id ("<file>#<pageref>"), else its URL."""
    return page.id or page.url


def _wire_url(url: str) -> str:
    """A URL as requested: no fragment, an empty path is "/"."""
    parts = urlsplit(strip_fragment(url))
    return urlunsplit(parts._replace(path=parts.path or "/"))


def document_chain(page: Page, host_ips, https_hosts=None) -> list[tuple[int, Obj]]:
    """(plan index, object) of every hop from the main URL to its document, as the plan fetches
    them (pltlab.loaders.plan.plan_objects): object 0, then each redirect's target; a hop the
    browser's own upgrade to https makes internal (``https_hosts``, plan.upgrade_hops) is not
    fetched: the chain goes on from its https target. A URL the
    chain reaches again is answered by its next recording (the replay serves repeated URLs in
    recorded order); with none left, the chain loops. Raises PltError when the recording itself
    has no 2xx document at the end of that chain."""
    name = page_label(page)
    if not page.objects:
        raise PltError(f"{name}: the recording has no objects")
    internal = (
        plans.upgrade_hops(page, plans.effective_schemes(page, https_hosts)) if https_hosts is not None else set()
    )
    pos = {id(o): i for i, o in enumerate(plans.plan_objects(page, host_ips, hops=internal))}
    by_url: dict[str, list[Obj]] = {}
    for o in page.objects:
        by_url.setdefault(_wire_url(o.url), []).append(o)
    visits: dict[str, int] = {}
    hops, cur = [], page.objects[0]
    while True:
        if id(cur) in internal:
            pass  # never on the wire
        elif id(cur) not in pos:
            raise PltError(f"{name}: the recording's document {cur.url} cannot be replayed (scheme {cur.scheme!r})")
        else:
            hops.append((pos[id(cur)], cur))
        key = _wire_url(cur.url)
        visits[key] = visits.get(key, 0) + 1
        if not cur.redirect_url:
            break
        target = _wire_url(urljoin(cur.url, cur.redirect_url))
        recorded = by_url.get(target, [])
        if not recorded:
            raise PltError(
                f"{name}: the recording's document {cur.url} answered {cur.status} "
                f"-> {target}, which was not recorded: no document to load"
            )
        if visits.get(target, 0) >= len(recorded):
            raise PltError(
                f"{name}: the recording's document redirects in a loop "
                f"({' -> '.join(o.url for _, o in hops)} -> {target}): no document to load"
            )
        cur = recorded[visits.get(target, 0)]
    if not 200 <= cur.status < 300:
        raise PltError(f"{name}: the recording's document {cur.url} answered {cur.status}: no document to load")
    return hops


def _what_came(status: int) -> str:
    if status == 404:
        return "no recorded response matched"
    return "replay served the wrong response"


def document_problem(chain: list[tuple[int, Obj]], requests: list[dict], plan: dict | None = None) -> str | None:
    """Why a planned load did not get the page's document, or None: every hop of
    ``chain`` (document_chain) must have its request record (by plan index) with the recorded
    status and no error. A hop the plan upgraded to https (Chromium's HSTS upgrades) may instead
    get a 2xx straight away: the https URL's own recorded answer."""
    by_index = {r.get("index"): r for r in requests}
    for i, o in chain:
        r = by_index.get(i)
        url = plan["objects"][i]["url"] if plan else o.url.split("#", 1)[0]
        if r is None or not r.get("status"):
            why = f": {r['error']}" if r and r.get("error") else ""
            return f"document {url} never arrived{why}"
        if r.get("error"):
            return f"document {url} answered {r['status']} but failed: {r['error']}"
        got = r["status"]
        if got == o.status:
            if 200 <= got < 300:
                return None  # the document (a 2xx hop ends the chain: document_chain)
            continue
        upgraded = plan is not None and not url.startswith(o.scheme + ":")
        if upgraded and 200 <= got < 300:
            return None
        return f"document {url} answered {got} (recorded {o.status}): {_what_came(got)}"
    return None


def judge(
    tfo: bool, counters: dict, requests: list[dict], document: str | None = None, expected: bool | None = None
) -> str | None:
    """Why a load is invalid, or None. ``document``: why its document did not arrive (first);
    ``expected``: must some connection have used TFO (Loader.tfo_expected; default ``tfo``)."""
    if document:
        return document
    expected = tfo if expected is None else expected
    active = counters["client"].get("TCPFastOpenActive", 0)
    if expected and active == 0:
        return "TFO requested but the client's TCPFastOpenActive did not rise: no connection used TFO"
    if not tfo and active > 0:
        return "TFO off but the client's TCPFastOpenActive rose"
    if not expected and active > 0:
        return "TFO asked on plain-http connections only (knob client_hello), but the client's TCPFastOpenActive rose on a page without any"
    if counters["server"].get("TCPFastOpenListenOverflow", 0) > 0:
        return "the server's TFO queue overflowed (TCPFastOpenListenOverflow > 0)"
    return None


def expected_protocol(url: str, host_ips: dict, offered: dict) -> str:
    """The protocol a request should go over (pltlab.protocols.expected): what its https origin's
    address offers (``offered``: address -> Protocol; ALPN, the loaders offer every row's), else
    HTTP/1.1."""
    parts = urlsplit(url)
    return protocols.expected(parts.scheme, offered.get(host_ips.get(parts.hostname or "")))


def protocol_problem(requests: list[dict], host_ips: dict, offered: dict, alt_svc: bool = False) -> str | None:
    """Why a load's requests did not go over the protocols offered, or None (the first one named;
    requests without a reported protocol, e.g. failed ones, are not judged). A load that asked
    for h3 (an address serving QUIC) and got another says so first ("asked for h3, got h2: ...").
    ``alt_svc`` (knob h3_discovery "alt-svc"): the client learns h3 from Alt-Svc headers, so a
    request to an h3 address may also go over what its TCP offers (before it knows, or while its
    TCP connection is up)."""
    bad = []
    for r in requests:
        got = (r.get("protocol") or "").lower()
        if not got or not str(r.get("url", "")).startswith(("http://", "https://")):
            continue
        want = expected_protocol(r["url"], host_ips, offered)
        h3 = protocols.by_alpn(want)
        if alt_svc and h3 is not None and h3.transport == "udp" and got == protocols.over_tcp(h3).alpn:
            continue
        if got != want:
            bad.append((r["url"], got, want))
    if not bad:
        return None
    url, got, want = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    row = protocols.by_alpn(want)
    asked = f"asked for {want}, got {got}: " if row is not None and row.transport == "udp" else ""
    return f"{asked}protocol: {url} went over {got} where the replay offered {want}{more}"


def quic_problem(server: dict | None, requests: list[dict]) -> str | None:
    """Why a load over QUIC is not what it should be, or None: a QUIC handshake the replay saw
    fail (``quic_handshake_errors``: closed before it completed, by either side) costs the
    client a new connection and its round trips, so the load is not the protocol's."""
    errors = (server or {}).get("quic_handshake_errors", 0)
    if not errors:
        return None
    failed = [r["url"] for r in requests if "QUIC" in str(r.get("error") or "")]
    also = f"; {len(failed)} request(s) failed over QUIC, first {failed[0]}" if failed else ""
    return (
        f"{errors} of the {server.get('quic_connections', 0)} QUIC connections the replay saw ended "
        f"in their handshake (quic_handshake_errors){also}"
    )


def tls_used(mode: str, server: dict | None) -> tuple[int, int] | str | None:
    """The TLS handshakes of the connections that carried a request (``server``: the replay's
    counts during the load; spare connections that carried nothing are not judged): (full,
    resumed), TLS over TCP and inside QUIC together; None when there is nothing to judge (mode full, no counts); a reason when
    resume/0rtt was asked and no request went over TLS."""
    if mode == "full" or server is None:
        return None
    full, resumed = (server.get(f"tls_{k}_used", 0) + server.get(f"quic_{k}_used", 0) for k in ("full", "resumed"))
    if full + resumed == 0:
        return f"TLS {mode} asked but no request went over TLS (no https origin loaded)"
    return full, resumed


def early_used(server: dict) -> int:
    """Connections that carried a request and sent it as early data (0-RTT), TLS over TCP and
    QUIC together."""
    return server.get("tls_early_used", 0) + server.get("quic_early_used", 0)


def tls_problem(mode: str, server: dict | None, requests: list[dict]) -> str | None:
    """Why a load did not get the TLS handshakes its ``mode`` asked for, or None: resume/0rtt need
    the handshake of every connection that carried a request resumed, 0rtt also each such
    connection's early data accepted (the loader's records say which were refused and sent again
    at 1-RTT)."""
    used = tls_used(mode, server)
    if used is None or isinstance(used, str):
        return used
    full, resumed = used
    n = full + resumed
    if full:
        return (
            f"TLS {mode} asked but {full} of the {n} TLS connections that carried requests had full "
            "handshakes (no ticket resumed)"
        )
    if mode == "0rtt":
        refused = [r["url"] for r in requests if r.get("early_data") == "rejected"]
        if refused:
            more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
            return f"TLS 0rtt asked but the early data with {refused[0]} was refused (sent again at 1-RTT){more}"
        early = early_used(server)
        if early < n:
            return f"TLS 0rtt asked but only {early} of {n} resumed connections that carried requests sent early data"
    return None


def tfo_note(tfo: bool, server: dict | None) -> str | None:
    """Why TFO, although used, could not save a round trip on some connections, or None."""
    if not tfo or not server or not server.get("tfo_tls_hello_split"):
        return None
    return (
        f"TFO was used, but on {server['tfo_tls_hello_split']} of {server['tfo_tls_connections']} https "
        f"connections with SYN data the TLS ClientHello ({server.get('tfo_tls_hello_max')} B) was larger "
        f"than the data the SYN carried ({server.get('tfo_syn_bytes_max')} B): no round trip saved there"
    )
