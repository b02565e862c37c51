"""Where Chromium is and which flags it runs with."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
import shutil

from pltlab.errors import PltError

# Debian's real binary (the /usr/bin/chromium wrapper adds extensions and API keys we do not want).
CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
EMULATED_NET = ipaddress.ip_network("198.18.0.0/15")  # pltlab's namespaces only

# Superset of Playwright's own --disable-features list (a later switch may replace an earlier one).
DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync",
    "DestroyProfileOnBrowserClose",
    "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable",
    "LensOverlay",
    "MediaRouter",
    "DialMediaRouteProvider",
    "PaintHolding",
    "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "AimEnabled",
    "PreconnectToSearch",
    "Translate",
    "AutofillServerCommunication",
    "CertificateTransparencyComponentUpdater",
    "InterestFeedContentSuggestions",
    "PrivacySandboxSettings4",
    # One renderer for all frames, so the page's CDP session sees cross-site iframes' requests.
    "IsolateOrigins",
    "site-per-process",
)

BASE_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--no-pings",
    "--metrics-recording-only",
    "--password-store=basic",
    "--disable-site-isolation-trials",
    "--disable-features=" + ",".join(DISABLED_FEATURES),
)


def find_executable(path: str | None = None) -> str:
    """The Chromium binary: ``path``, else $PLTLAB_CHROMIUM, else Debian's chromium."""
    given = path or os.environ.get("PLTLAB_CHROMIUM")
    if given:
        found = shutil.which(given)
        if not found:
            raise PltError(f"chromium not found at {given}")
        return found
    for c in CANDIDATES:
        if os.access(c, os.X_OK):
            return c
    raise PltError("chromium not found: apt-get install -y --no-install-recommends chromium (or set PLTLAB_CHROMIUM)")


def host_rules(mapping: dict[str, str]) -> str:
    """--host-resolver-rules value: each host to its address, every other name unresolvable."""
    rules = []
    for host, ip in mapping.items():
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise PltError(f"host rule {host}={ip}: not an IP address") from None
        rules.append(f"MAP {host} {ip}")
    return ", ".join(rules + ["MAP * ~NOTFOUND"])


def parse_host_rules(items: list[str]) -> dict[str, str]:
    """CLI form HOST=IP."""
    out = {}
    for item in items:
        host, sep, ip = item.partition("=")
        if not sep or not host or not ip:
            raise PltError(f"invalid host rule {item!r}: expected HOST=IP")
        out[host.strip().lower()] = ip.strip()
    return out


def emulated(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip) in EMULATED_NET
    except ValueError:
        return False


def spki_hash(cert_pem: bytes) -> str:
    """base64(sha256(SubjectPublicKeyInfo)) of a PEM certificate, as
    --ignore-certificate-errors-spki-list wants it."""
    from cryptography import x509  # noqa: PLC0415 (heavy: loaded only for HTTPS)
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: PLC0415

    cert = x509.load_pem_x509_certificate(cert_pem)
    der = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode("ascii")


def quic_args(h3_hosts, discovery: str = "forced") -> list[str]:
    """Chromium's switches for a load with HTTP/3 origins (``h3_hosts``: the hosts whose replay
    address serves QUIC on UDP 443; empty: QUIC stays off, ``--disable-quic`` of BASE_ARGS).
    QUIC on (``--enable-quic``); ``discovery`` "forced": QUIC from the first request to each of
    those origins (``--origin-to-force-quic-on``); "alt-svc": Chromium learns h3 from the
    replay's Alt-Svc headers (the first request to an origin goes over TCP). The certificate
    is accepted over QUIC through the SPKI pin (--ignore-certificate-errors-spki-list), not a
    trusted root (Chromium does not take a locally trusted root for QUIC)."""
    hosts = sorted(set(h3_hosts))
    if not hosts:
        return []
    out = ["--enable-quic"]
    if discovery == "forced":
        out.append("--origin-to-force-quic-on=" + ",".join(f"{h}:443" for h in hosts))
    return out


def build_args(
    rules: dict[str, str] | None = None, spki: list[str] | tuple = (), extra: list[str] | tuple = ()
) -> list[str]:
    """BASE_ARGS, the host rules, the SPKI pin and ``extra``; QUIC stays off (``--disable-quic``)
    unless ``extra`` turns it on (quic_args: ``--enable-quic``)."""
    args = list(BASE_ARGS)
    if "--enable-quic" in extra:
        args.remove("--disable-quic")
    if rules:
        args.append("--host-resolver-rules=" + host_rules(rules))
    if spki:
        args.append("--ignore-certificate-errors-spki-list=" + ",".join(spki))
    return args + list(extra)
