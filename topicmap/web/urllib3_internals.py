"""Every use of urllib3's private or undocumented API, in one place.

urllib3 has no public hook for how a connection opens its socket, and the SSRF guard (``topicmap.web.netguard``)
must connect to the exact address it checked while the Host header, TLS SNI and certificate checks keep the URL's
host name. So the connection classes here override urllib3's private ``_new_conn`` (with the same error mapping as
urllib3's own) and read its undocumented ``_dns_host``; nowhere else uses a private name of urllib3's.
``tests/test_netguard.py`` checks the names below against the installed urllib3, and pyproject.toml pins urllib3 to
the minor version tested.
"""

from __future__ import annotations

import socket
import sys
from typing import Any, Protocol

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

#: urllib3's private methods overridden here, as ``Class.method``
PRIVATE_METHODS = ("HTTPConnection._new_conn",)
#: urllib3's undocumented attributes read here, as ``Class.attribute``
UNDOCUMENTED_ATTRIBUTES = ("HTTPConnection._dns_host",)


class Connector(Protocol):
    """What decides where a socket may go and opens it (``netguard.AddressPolicy``)."""

    def connect(
        self, host: str, port: int, timeout: Any, source_address: Any = None, socket_options: Any = None
    ) -> socket.socket: ...


class _ConnectorConnectionMixin:
    """urllib3 connection whose socket comes from ``_connector.connect`` (Host header and SNI unchanged)."""

    _connector: Connector

    def _new_conn(self) -> socket.socket:
        # Same error mapping as urllib3's own _new_conn, so requests reports timeouts as timeouts.
        try:
            sock = self._connector.connect(
                self._dns_host,  # type: ignore[attr-defined]
                self.port,  # type: ignore[attr-defined]
                self.timeout,  # type: ignore[attr-defined]
                source_address=self.source_address,  # type: ignore[attr-defined]
                socket_options=self.socket_options,  # type: ignore[attr-defined]
            )
        except socket.gaierror as error:
            raise NameResolutionError(self.host, self, error) from error  # type: ignore[attr-defined,arg-type]
        except TimeoutError as error:
            raise ConnectTimeoutError(
                self,
                f"Connection to {self.host} timed out. (connect timeout={self.timeout})",  # type: ignore[attr-defined]
            ) from error
        except OSError as error:
            raise NewConnectionError(self, f"Failed to establish a new connection: {error}") from error  # type: ignore[arg-type]
        sys.audit("http.client.connect", self, self.host, self.port)  # type: ignore[attr-defined]
        return sock


def guarded_pool_classes(connector: Connector) -> dict[str, type[HTTPConnectionPool]]:
    """urllib3's scheme -> pool class map, with connections that open their sockets through ``connector``."""
    http_conn = type(
        "GuardedHTTPConnection", (_ConnectorConnectionMixin, HTTPConnection), {"_connector": connector}
    )
    https_conn = type(
        "GuardedHTTPSConnection", (_ConnectorConnectionMixin, HTTPSConnection), {"_connector": connector}
    )
    http_pool = type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn})
    https_pool = type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn})
    return {"http": http_pool, "https": https_pool}
