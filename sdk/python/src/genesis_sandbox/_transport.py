"""HTTP transports with TCP_NODELAY.

httpx writes a request's head and its body in two writes. Without
TCP_NODELAY the kernel holds the body back (Nagle) until the service
acknowledges the head, which a delayed ACK does only after up to 40 ms:
every call with a body (an exec, a file write) would wait that long.
httpx 0.24 and later take socket options; older ones (Debian 12 ships
0.23) get a network backend that sets the option on each connection.
"""

from __future__ import annotations

import socket
from typing import Any, Dict, List, Tuple

import httpx

NODELAY: List[Tuple[int, int, int]] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

# httpx's own pool defaults (httpx.Limits()), kept when the pool is rebuilt.
_POOL: Dict[str, Any] = {"max_connections": 100, "max_keepalive_connections": 20, "keepalive_expiry": 5.0}


def _set_nodelay(stream: Any) -> Any:
    sock = stream.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return stream


def sync_transport() -> httpx.BaseTransport:
    """An httpx.HTTPTransport whose connections set TCP_NODELAY."""
    try:
        t: Any = httpx.HTTPTransport(socket_options=NODELAY)  # type: ignore[call-arg]
        return t  # type: ignore[no-any-return]
    except TypeError:
        pass
    t = httpx.HTTPTransport()
    try:
        import httpcore
        from httpcore.backends.sync import SyncBackend
    except ImportError:  # a layout this module does not know: leave it be
        return t  # type: ignore[no-any-return]

    class NoDelayBackend(SyncBackend):
        def connect_tcp(self, *a: Any, **kw: Any) -> Any:
            return _set_nodelay(super().connect_tcp(*a, **kw))

    t._pool = httpcore.ConnectionPool(ssl_context=t._pool._ssl_context, network_backend=NoDelayBackend(), **_POOL)
    return t  # type: ignore[no-any-return]


def async_transport() -> httpx.AsyncBaseTransport:
    """An httpx.AsyncHTTPTransport whose connections set TCP_NODELAY."""
    try:
        t: Any = httpx.AsyncHTTPTransport(socket_options=NODELAY)  # type: ignore[call-arg]
        return t  # type: ignore[no-any-return]
    except TypeError:
        pass
    t = httpx.AsyncHTTPTransport()
    try:
        import httpcore
        from httpcore.backends.auto import AutoBackend
    except ImportError:
        return t  # type: ignore[no-any-return]

    class NoDelayBackend(AutoBackend):
        async def connect_tcp(self, *a: Any, **kw: Any) -> Any:
            return _set_nodelay(await super().connect_tcp(*a, **kw))

    t._pool = httpcore.AsyncConnectionPool(ssl_context=t._pool._ssl_context, network_backend=NoDelayBackend(), **_POOL)
    return t  # type: ignore[no-any-return]
