"""SSRF guard: decide whether the crawler may connect to an address, and connect only to checked addresses.

A topic spider fetches URLs written by strangers. Without a guard, a link (or a redirect, or a DNS name that
resolves to 10.0.0.5 or to 169.254.169.254) makes the crawler read the cloud metadata service, the database
admin page or anything else on the private network. Media Cloud had no such guard; topicmap refuses every
non-public address unless an explicit allow-list says otherwise.

Three rules make the guard hold:

1. **Every address is classified** by :func:`check_address` with explicit tables (Python's
   ``ipaddress.is_global`` is not enough: it calls 224.0.0.1 and fec0::1 global, and its answers changed between
   3.11 patch releases). IPv6 forms that embed an IPv4 address (mapped, compatible, 6to4, NAT64, SIIT) are
   judged by the embedded IPv4 address.
2. **All resolved addresses must be acceptable**: a name resolving to one public and one private address is
   refused, since the caller cannot know which one a retry would use.
3. **The socket connects to the exact address that was checked** (no DNS-rebinding time-of-check/time-of-use
   gap): :class:`AddressPolicy` resolves, checks and connects in one step (:meth:`AddressPolicy.connect`), and
   :class:`GuardedHTTPAdapter` plugs that step into urllib3's connection class, so the Host header, TLS SNI and
   certificate checks still use the URL's host name while the TCP connection goes to the pinned address.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from requests.adapters import HTTPAdapter

from topicmap.web.urllib3_internals import guarded_pool_classes

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

CLOUD_METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, DigitalOcean
        ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("fd00:ec2::254"),  # AWS IMDS over IPv6
    }
)

# Order matters only for the wording of the reason: the first matching network names it.
_IPV4_BLOCKED: list[tuple[str, str]] = [
    ("0.0.0.0/8", "unspecified ('this network') address"),
    ("127.0.0.0/8", "loopback address"),
    ("10.0.0.0/8", "private address"),
    ("172.16.0.0/12", "private address"),
    ("192.168.0.0/16", "private address"),
    ("169.254.0.0/16", "link-local address"),
    ("100.64.0.0/10", "carrier-grade NAT (shared) address"),
    ("192.0.0.0/24", "IETF protocol assignment address"),
    ("192.0.2.0/24", "documentation (TEST-NET-1) address"),
    ("198.51.100.0/24", "documentation (TEST-NET-2) address"),
    ("203.0.113.0/24", "documentation (TEST-NET-3) address"),
    ("198.18.0.0/15", "benchmarking address"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast address"),
    ("224.0.0.0/4", "multicast address"),
    ("255.255.255.255/32", "broadcast address"),
    ("240.0.0.0/4", "reserved address"),
]

_IPV6_BLOCKED: list[tuple[str, str]] = [
    ("::/128", "unspecified address"),
    ("::1/128", "loopback address"),
    ("64:ff9b:1::/48", "local-use NAT64 address"),
    ("100::/64", "discard-only address"),
    ("2001::/32", "Teredo tunnel address"),  # the client's IPv4 address is obfuscated: refuse outright
    ("2001:db8::/32", "documentation address"),
    ("2001:10::/28", "deprecated ORCHID address"),
    ("2001:20::/28", "ORCHIDv2 address"),
    ("2001::/23", "IETF protocol assignment address"),
    ("fc00::/7", "unique-local (private) address"),
    ("fe80::/10", "link-local address"),
    ("fec0::/10", "site-local (deprecated private) address"),
    ("ff00::/8", "multicast address"),
    ("3fff::/20", "documentation address"),
    ("5f00::/16", "segment-routing SID address"),
]

_IPV4_TABLE = [(ipaddress.IPv4Network(net), why) for net, why in _IPV4_BLOCKED]
_IPV6_TABLE = [(ipaddress.IPv6Network(net), why) for net, why in _IPV6_BLOCKED]

# IPv6 forms whose low (or middle) bits carry an IPv4 address that the packet will effectively reach.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIIT_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_SIXTOFOUR = ipaddress.IPv6Network("2002::/16")
# Global unicast space today; anything outside it is unallocated or special and refused.
_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


class AddressRefused(Exception):
    """A connection was refused by the SSRF guard. ``reason`` says which address and why.

    Deliberately *not* an OSError: urllib3 would otherwise wrap it into a generic "connection aborted" error
    and retry it, hiding the reason.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _parse_ip(ip: str | IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return ip
    text = str(ip).strip().strip("[]")
    # getaddrinfo reports scoped IPv6 link-local addresses as "fe80::1%eth0": the scope does not change the class.
    text = text.split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"not an IP address: {ip!r}") from None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 transition form carries, with the form's name."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "IPv4-mapped"
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
    if ip in _SIIT_TRANSLATED:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "IPv4-translated"
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "IPv4-compatible"
    if ip in _SIXTOFOUR:
        return ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF), "6to4"
    return None


def _check_ipv4(ip: ipaddress.IPv4Address) -> str | None:
    for network, why in _IPV4_TABLE:
        if ip in network:
            if ip in CLOUD_METADATA_ADDRESSES:
                return f"{why} {ip} (cloud metadata endpoint)"
            return f"{why} {ip}"
    if ip in CLOUD_METADATA_ADDRESSES:
        return f"cloud metadata endpoint {ip}"
    return None


def check_address(ip: str | IPAddress) -> str | None:
    """Return why connecting to ``ip`` is refused, or None when it is a public unicast address.

    Raises ValueError when ``ip`` is not an IP address.
    """
    address = _parse_ip(ip)
    if isinstance(address, ipaddress.IPv4Address):
        return _check_ipv4(address)
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        inner, form = embedded
        inner_reason = _check_ipv4(inner)
        return f"{form} form of {inner_reason} ({address})" if inner_reason else None
    if address in CLOUD_METADATA_ADDRESSES:
        return f"cloud metadata endpoint {address}"
    for network, why in _IPV6_TABLE:
        if address in network:
            return f"{why} {address}"
    if address not in _IPV6_GLOBAL_UNICAST:
        return f"reserved (unallocated) address {address}"
    return None


@dataclass(frozen=True)
class _AllowEntry:
    network: IPNetwork
    port: int | None

    def matches(self, address: IPAddress, port: int | None) -> bool:
        if self.port is not None and port != self.port:
            return False
        return address.version == self.network.version and address in self.network


def _parse_allow_entry(entry: str) -> _AllowEntry:
    """Parse "CIDR", "IP", "IP:PORT", "CIDR:PORT", "[IPv6]:PORT" or "[IPv6/len]:PORT"."""
    text = entry.strip()
    port: int | None = None
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise ValueError(f"allow-list entry {entry!r}: missing ']'")
        rest = text[close + 1 :]
        text = text[1:close]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"allow-list entry {entry!r}: expected ':PORT' after ']'")
            port = _parse_port(rest[1:], entry)
    elif text.count(":") == 1:  # IPv4 (or IPv4 CIDR) with a port; bare IPv6 has several colons
        text, port_text = text.split(":")
        port = _parse_port(port_text, entry)
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError as error:
        raise ValueError(f"allow-list entry {entry!r} is not an IP, CIDR or IP:PORT: {error}") from None
    return _AllowEntry(network, port)


def _parse_port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"allow-list entry {entry!r}: bad port {text!r}")
    return int(text)


def _parse_override(pattern: str, target: str) -> tuple[str, str, int]:
    text = target.strip()
    if text.startswith("["):
        host, _, port_text = text[1:].partition("]:")
    else:
        host, _, port_text = text.rpartition(":")
    if not host or not port_text.isdigit():
        raise ValueError(f"host override {pattern!r} -> {target!r}: expected 'IP:PORT' or '[IPv6]:PORT'")
    _parse_ip(host)  # an override must name an address: a name would reintroduce an unchecked lookup
    return pattern.lower(), host, int(port_text)


class AddressPolicy:
    """Which addresses the crawler may connect to, how names resolve, and the guarded connect.

    ``allow`` lists exceptions to :func:`check_address`: CIDRs or IPs, optionally with a port
    ("127.0.0.0/8", "127.0.0.1:8123", "[::1]:8080"). A port-qualified entry allows only that port, so a
    test can allow its own loopback server while a redirect to another loopback port stays refused.

    ``host_overrides`` maps host-name patterns (fnmatch, e.g. "*.test") to "IP:PORT": matching hosts are
    connected there instead of being resolved (the demo's .test web on loopback). Overridden targets
    still pass the guard, so the allow-list must admit them.
    """

    def __init__(
        self,
        allow: Iterable[str] = (),
        host_overrides: Mapping[str, str] | None = None,
        resolver=socket.getaddrinfo,
    ) -> None:
        if isinstance(allow, str):
            raise TypeError("allow must be a list of CIDR/IP[:PORT] strings, not a single string")
        self.allow = [_parse_allow_entry(entry) for entry in allow]
        self.host_overrides = [
            _parse_override(pattern, target) for pattern, target in (host_overrides or {}).items()
        ]
        self._resolver = resolver

    def with_overrides(self, host_overrides: Mapping[str, str] | None) -> AddressPolicy:
        """A copy of this policy with extra host overrides (they take precedence over existing ones)."""
        clone = AddressPolicy((), None, self._resolver)
        clone.allow = list(self.allow)
        extra = [_parse_override(pattern, target) for pattern, target in (host_overrides or {}).items()]
        clone.host_overrides = extra + list(self.host_overrides)
        return clone

    def check(self, ip: str | IPAddress, port: int | None = None) -> str | None:
        """Why connecting to ``ip``:``port`` is refused under this policy, or None if it is allowed."""
        address = _parse_ip(ip)
        if any(entry.matches(address, port) for entry in self.allow):
            return None
        reason = check_address(address)
        if reason is None:
            return None
        return f"{reason}, port {port}" if port is not None else reason

    def override_for(self, host: str) -> tuple[str, int] | None:
        name = host.lower().rstrip(".")
        for pattern, ip, port in self.host_overrides:
            if fnmatch.fnmatchcase(name, pattern):
                return ip, port
        return None

    def resolve(self, host: str, port: int) -> list[tuple[str, int]]:
        """Resolve ``host`` and check every address; return the (ip, port) pairs to connect to, in order.

        Raises AddressRefused when any resolved address is refused, socket.gaierror when the name does not
        resolve.
        """
        override = self.override_for(host)
        if override is not None:
            candidates = [override]
            origin = f"{host} (host override)"
        else:
            bare = host.strip("[]")
            try:
                literal = _parse_ip(bare)
            except ValueError:
                literal = None
            if literal is not None:
                candidates = [(str(literal), port)]
            else:
                infos = self._resolver(bare, port, 0, socket.SOCK_STREAM)
                candidates = []
                for _family, _type, _proto, _canon, sockaddr in infos:
                    pair = (str(_parse_ip(sockaddr[0])), port)
                    if pair not in candidates:
                        candidates.append(pair)
            origin = host
        if not candidates:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} resolved to no address")
        for ip, target_port in candidates:
            reason = self.check(ip, target_port)
            if reason is not None:
                raise AddressRefused(f"{origin} resolves to {reason}")
        return candidates

    def connect(
        self,
        host: str,
        port: int,
        timeout: float | None,
        source_address: tuple[str, int] | None = None,
        socket_options: Iterable[tuple[int, int, int]] | None = None,
    ) -> socket.socket:
        """Resolve, check and connect to a checked address (never re-resolving between check and connect)."""
        last_error: OSError | None = None
        for ip, target_port in self.resolve(host, port):
            family = socket.AF_INET6 if ":" in ip else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                for option in socket_options or ():
                    sock.setsockopt(*option)
                if timeout is not None:
                    sock.settimeout(timeout)
                if source_address:
                    sock.bind(source_address)
                sock.connect((ip, target_port))
                return sock
            except OSError as error:
                sock.close()
                last_error = error
        assert last_error is not None
        raise last_error


class GuardedHTTPAdapter(HTTPAdapter):
    """A requests adapter whose every new connection goes through ``policy`` (thread-safe, shareable).

    Proxies are refused: a proxy would make the connection to the proxy, not to the checked address.
    """

    def __init__(self, policy: AddressPolicy, **kwargs) -> None:
        self.policy = policy
        super().__init__(**kwargs)

    def init_poolmanager(self, connections, maxsize, block=False, **pool_kwargs) -> None:
        super().init_poolmanager(connections, maxsize, block=block, **pool_kwargs)
        # Per-instance override of urllib3's scheme -> pool class map.
        self.poolmanager.pool_classes_by_scheme = guarded_pool_classes(self.policy)

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        raise AddressRefused(f"proxies are not supported by the SSRF guard (proxy {proxy!r})")
