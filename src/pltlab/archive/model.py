"""The page model: a page, its objects, their origins and dependency structure."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pltlab.archive import urls

DEFAULT_PORTS = {"http": 80, "https": 443}


def strip_fragment(url: str) -> str:
    """The URL as sent on the wire (a fragment is never requested); an empty query ("x?") is
    dropped as urljoin drops it, so parsed references still match."""
    if "#" in url:
        url = url.split("#", 1)[0]
    return url[:-1] if url.endswith("?") else url


@dataclass
class Obj:
    """One request of a page load and its response."""

    url: str
    method: str = "GET"
    status: int = 200
    status_text: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    mime: str = ""
    body: bytes | None = None  # None: only the size is known (replay synthesizes a body)
    size: int = 0  # body size in bytes; len(body) when the body is known
    initiator: str | None = None  # URL of the object that caused this one to load
    initiator_type: str | None = None  # recorded kind (parser, script, ...), or css/timing/redirect
    start_ms: float | None = None  # discovery/start relative to the page start
    end_ms: float | None = None
    redirect_url: str = ""
    extras: dict = field(default_factory=dict)  # written as the entry's `_pltlab`
    # Bytes on the wire (docs/conformance.md): the recorded Content-Encoding ("" = identity;
    # gzip, br, deflate, zstd), and the encoded body's size as it crossed the wire (None: not
    # recorded; then it is `size` for identity). `size` is always the decoded size.
    encoding: str = ""
    transfer_size: int | None = None
    protocol: str = ""  # as recorded, normalized: "http/1.0", "http/1.1", "h2", "h3", "spdy"; "": unknown
    server_ip: str = ""  # the address the recording browser talked to (HAR serverIPAddress)
    from_cache: bool = False  # the recording got it from its cache (304, or nothing transferred)
    request_body: bytes | None = None  # POST/PUT body as recorded (postData), for matching
    # The body exactly as it crossed the wire with its Content-Encoding (chunk framing removed),
    # where the recording kept it (Mahimahi, Web Page Replay): the replay sends these bytes as
    # they are (archive.wire). None: encoded from `body` at the recorded transfer size.
    wire_body: bytes | None = None

    def __post_init__(self):
        if self.body is not None:
            self.size = len(self.body)

    @property
    def wire_size(self) -> int:
        """Encoded body bytes the replay sends: the recorded transfer size, else the decoded size."""
        return self.transfer_size if self.transfer_size is not None else self.size

    def _parts(self) -> tuple[str, str, int | None]:
        """(scheme, host, explicit port) of the URL, kept beside the URL they were parsed from
        (planning asks for them many times per object; a changed URL is parsed again)."""
        got = self.__dict__.get("_url_parts")
        if got is None or got[0] != self.url:
            scheme, netloc = urls.split(self.url)
            host, port = urls.host_port(netloc)  # port -1: invalid, raised by .port alone
            got = (self.url, (scheme, host, port))
            self.__dict__["_url_parts"] = got
        return got[1]

    @property
    def scheme(self) -> str:
        return self._parts()[0]

    @property
    def host(self) -> str:
        return self._parts()[1]

    @property
    def port(self) -> int:
        scheme, _, p = self._parts()
        if p == -1:
            p = urlsplit(self.url).port  # raises ValueError, naming the port
        return p if p is not None else DEFAULT_PORTS.get(scheme, 80)

    @property
    def origin(self) -> str:
        """scheme://host[:port], the unit of connections and of the replay's servers."""
        scheme, host, _ = self._parts()
        port = self.port
        suffix = "" if port == DEFAULT_PORTS.get(scheme) else f":{port}"
        return f"{scheme}://{host}{suffix}"

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)


@dataclass
class Page:
    """A page: its main URL and every object its load fetched, main document first."""

    url: str
    objects: list[Obj] = field(default_factory=list)
    title: str = ""
    started: str = "1970-01-01T00:00:00.000Z"  # ISO time of the page start (HAR startedDateTime)
    on_load_ms: float | None = None
    extras: dict = field(default_factory=dict)  # page-level `_pltlab` (source, recorder stats, ...)
    # Stable id "<file>#<pageref>" (pageref as in the file; "#1", "#2"... where it has none), set
    # by whatever read the page; "" for pages made in memory. extras["repairs"]: {kind: count}.
    id: str = ""

    @property
    def main(self) -> Obj | None:
        return self.objects[0] if self.objects else None

    @property
    def origins(self) -> list[str]:
        return sorted({o.origin for o in self.objects})

    @property
    def hosts(self) -> list[str]:
        return sorted({o.host for o in self.objects})

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.objects)

    def find(self, url: str) -> Obj | None:
        """The first object with this URL (fragments ignored). A scan: for many look-ups in a
        page that does not change meanwhile, use url_index()."""
        url = strip_fragment(url)
        return next((o for o in self.objects if strip_fragment(o.url) == url), None)

    def url_index(self) -> dict[str, Obj]:
        """strip_fragment(url) -> the first object with it: Page.find as one dict, valid until
        an object is added, removed, moved or changes its URL."""
        out: dict[str, Obj] = {}
        for o in self.objects:
            out.setdefault(strip_fragment(o.url), o)
        return out

    def summary(self) -> dict:
        with_body = sum(1 for o in self.objects if o.body is not None)
        return {
            "page": self.url,
            "objects": len(self.objects),
            "with_body": with_body,
            "size_only": len(self.objects) - with_body,
            "origins": len(self.origins),
            "bytes": self.total_bytes,
            "protocols": self.protocols(),
        }

    def protocols(self) -> dict[str, int]:
        """Objects per recorded protocol, most used first ("unknown": not recorded)."""
        n: dict[str, int] = {}
        for o in self.objects:
            k = o.protocol or "unknown"
            n[k] = n.get(k, 0) + 1
        return dict(sorted(n.items(), key=lambda kv: (-kv[1], kv[0])))
