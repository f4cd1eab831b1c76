"""The SSRF guard: address classes, allow-list, resolution of every address, pinned connections."""

from __future__ import annotations

import ast
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from urllib3.connection import HTTPConnection

from topicmap.web.netguard import AddressPolicy, AddressRefused, GuardedHTTPAdapter, check_address


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.100.100.200", "cloud metadata"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "broadcast"),
        ("192.0.2.10", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fc00::1", "unique-local"),
        ("fd12:3456::1", "unique-local"),
        ("fd00:ec2::254", "cloud metadata"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("::ffff:127.0.0.1", "IPv4-mapped form of loopback"),
        ("::ffff:169.254.169.254", "IPv4-mapped form of link-local"),
        ("::ffff:10.0.0.1", "IPv4-mapped form of private"),
        ("::127.0.0.1", "IPv4-compatible form of loopback"),
        ("64:ff9b::a9fe:a9fe", "NAT64 form of link-local"),
        ("64:ff9b::7f00:1", "NAT64 form of loopback"),
        ("2002:7f00:0001::", "6to4 form of loopback"),
        ("2002:c0a8:0101::1", "6to4 form of private"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
        ("4000::1", "reserved"),
    ],
)
def test_non_public_addresses_are_refused_with_their_class(address: str, expected: str) -> None:
    reason = check_address(address)
    assert reason is not None, f"{address} must be refused"
    assert expected in reason


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "93.184.216.34",
        "151.101.1.69",
        "2606:4700::1111",
        "2a00:1450:4007:80e::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:0808:0808::1",
    ],
)
def test_public_addresses_pass(address: str) -> None:
    assert check_address(address) is None


def test_check_address_rejects_non_addresses() -> None:
    with pytest.raises(ValueError, match="not an IP address"):
        check_address("example.com")


def test_allow_list_by_cidr_and_by_port() -> None:
    demo = AddressPolicy(allow=["127.0.0.0/8"])
    assert demo.check("127.0.0.1", 8123) is None
    assert demo.check("127.9.9.9", 1) is None
    assert "private" in demo.check("10.0.0.1", 80)

    one_port = AddressPolicy(allow=["127.0.0.1:8123", "[::1]:9000"])
    assert one_port.check("127.0.0.1", 8123) is None
    assert "loopback" in one_port.check("127.0.0.1", 8124)
    assert "loopback" in one_port.check("127.0.0.2", 8123)
    assert one_port.check("::1", 9000) is None
    assert "loopback" in one_port.check("::1", 9001)


@pytest.mark.parametrize("entry", ["localhost", "127.0.0.1:99999", "[::1", "10.0.0.0/33", "1.2.3.4:port"])
def test_bad_allow_entries_raise_naming_the_entry(entry: str) -> None:
    with pytest.raises(ValueError, match="allow-list entry"):
        AddressPolicy(allow=[entry])


def test_allow_must_be_a_list() -> None:
    with pytest.raises(TypeError):
        AddressPolicy(allow="127.0.0.0/8")


def _fake_resolver(answers: dict[str, list[str]]):
    def resolve(host, port, family=0, type=0, proto=0, flags=0):
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
            for ip in answers[host]
        ]

    return resolve


def test_every_resolved_address_must_be_public() -> None:
    policy = AddressPolicy(
        resolver=_fake_resolver(
            {"mixed.example": ["93.184.216.34", "10.0.0.7"], "ok.example": ["93.184.216.34"]}
        )
    )
    assert policy.resolve("ok.example", 80) == [("93.184.216.34", 80)]
    with pytest.raises(AddressRefused, match=r"mixed\.example resolves to private address 10\.0\.0\.7"):
        policy.resolve("mixed.example", 80)
    with pytest.raises(socket.gaierror):
        policy.resolve("nowhere.example", 80)


def test_host_overrides_route_names_and_still_pass_the_guard() -> None:
    policy = AddressPolicy(allow=["127.0.0.1:8123"], host_overrides={"*.test": "127.0.0.1:8123"})
    assert policy.resolve("news.test", 80) == [("127.0.0.1", 8123)]
    assert policy.resolve("NEWS.TEST.", 443) == [("127.0.0.1", 8123)]
    unguarded = AddressPolicy(host_overrides={"*.test": "127.0.0.1:8123"})
    with pytest.raises(AddressRefused, match="host override.*loopback"):
        unguarded.resolve("news.test", 80)
    with pytest.raises(ValueError, match="IP:PORT"):
        AddressPolicy(host_overrides={"*.test": "localhost"})


class _HostEcho(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        return

    def do_GET(self):
        body = (self.headers.get("Host") or "").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HostEcho)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_adapter_connects_to_the_checked_address_not_a_second_lookup(echo_server: int) -> None:
    """DNS rebinding: the first answer is public, every later one loopback. The connection must use the
    answer that was checked; a guard that checks and then lets urllib3 resolve again would connect to the
    second (internal) answer."""
    port = echo_server
    calls = []

    def rebinding(host, port_, family=0, type=0, proto=0, flags=0):
        calls.append(host)
        ip = "127.0.0.1" if len(calls) == 1 else "10.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port_))]

    policy = AddressPolicy(allow=[f"127.0.0.1:{port}"], resolver=rebinding)
    session = requests.Session()
    session.trust_env = False
    session.mount("http://", GuardedHTTPAdapter(policy))
    response = session.get(f"http://rebind.example:{port}/", timeout=5)
    assert response.status_code == 200
    assert response.text == f"rebind.example:{port}"  # Host header keeps the name
    assert calls == ["rebind.example"]  # resolved once, connected to that answer


def test_adapter_refuses_before_connecting(echo_server: int) -> None:
    session = requests.Session()
    session.trust_env = False
    session.mount("http://", GuardedHTTPAdapter(AddressPolicy()))
    with pytest.raises(AddressRefused, match="loopback address 127.0.0.1"):
        session.get(f"http://127.0.0.1:{echo_server}/", timeout=5)


def test_adapter_refuses_proxies() -> None:
    session = requests.Session()
    session.mount("http://", GuardedHTTPAdapter(AddressPolicy()))
    with pytest.raises(AddressRefused, match="proxies"):
        session.get("http://93.184.216.34/", proxies={"http": "http://10.0.0.1:3128"}, timeout=1)


# urllib3's private API is used in one module only (topicmap.web.urllib3_internals), which lists what it uses.
URLLIB3_INTERNALS = Path(__file__).resolve().parent.parent / "topicmap" / "web" / "urllib3_internals.py"


def _private_attributes(path: Path) -> set[str]:
    """The underscore names (not dunders) a module defines or reads as attributes."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "name", None)
        if isinstance(name, str) and name.startswith("_") and not name.startswith("__"):
            names.add(name)
    return names


def test_urllib3_private_api_is_used_only_in_urllib3_internals() -> None:
    from topicmap.web import urllib3_internals

    listed = {
        entry.split(".")[1]
        for entry in (*urllib3_internals.PRIVATE_METHODS, *urllib3_internals.UNDOCUMENTED_ATTRIBUTES)
    }
    root = URLLIB3_INTERNALS.parents[2]
    offenders = [
        f"{path.relative_to(root)} uses urllib3's {name}"
        for package in ("topicmap", "assets", "resources", "sensors", "orchestration")
        for path in sorted((root / package).rglob("*.py"))
        if path != URLLIB3_INTERNALS
        for name in sorted(_private_attributes(path) & listed)
    ]
    assert offenders == [], "urllib3's private API belongs in topicmap/web/urllib3_internals.py"
    # what it overrides or reads is its own listing, and urllib3 still has it
    used = _private_attributes(URLLIB3_INTERNALS) - {"_connector", "_ConnectorConnectionMixin"}
    assert used == listed
    connection = HTTPConnection("example.org", 80)
    assert callable(getattr(HTTPConnection, "_new_conn", None)), (
        "urllib3 no longer has HTTPConnection._new_conn"
    )
    assert connection._dns_host == "example.org", "urllib3 no longer has HTTPConnection._dns_host"


def test_urllib3_is_pinned_to_the_minor_version_tested() -> None:
    import urllib3

    pyproject = (URLLIB3_INTERNALS.parents[2] / "pyproject.toml").read_text()
    major, minor = urllib3.__version__.split(".")[:2]
    assert f'"urllib3>={major}.{minor}' in pyproject and f'<{major}.{int(minor) + 1}"' in pyproject
