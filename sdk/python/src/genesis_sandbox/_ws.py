"""A minimal RFC 6455 WebSocket client on the standard library, and the
sandbox terminal it carries (GET /v1/sandboxes/{id}/terminal): the
opening handshake, masked client frames, text, binary, close, ping and
pong, fragmented messages; sync (socket) and async (asyncio streams).

Terminal messages: binary frames are raw terminal bytes both ways; text
frames are JSON control messages (hello, writer, exit from the service;
resize and takeover to it)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import urlencode, urlsplit

from . import errors

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
EOF = -1  # the connection ended without a close frame
MAX_MESSAGE = 16 << 20
MAX_HEAD = 64 << 10
CLOSE_WAIT = 2.0  # seconds to wait for the service's close frame after ours


class ProtocolError(errors.StreamError):
    """The peer broke the WebSocket protocol."""


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + GUID).encode("ascii")).digest()).decode("ascii")


def mask(data: bytes, key: bytes) -> bytes:
    n = len(data)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def encode_frame(opcode: int, payload: bytes, mask_key: Optional[bytes] = None) -> bytes:
    """One final frame from the client: always masked (RFC 6455 5.3)."""
    key = os.urandom(4) if mask_key is None else mask_key
    n = len(payload)
    head = bytearray([0x80 | opcode])
    if n < 126:
        head.append(0x80 | n)
    elif n < 1 << 16:
        head.append(0x80 | 126)
        head += struct.pack(">H", n)
    else:
        head.append(0x80 | 127)
        head += struct.pack(">Q", n)
    return bytes(head) + key + mask(payload, key)


class FrameParser:
    """Turns the bytes from the server into whole messages: (opcode,
    payload), fragments joined, control frames as they come."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._op: Optional[int] = None
        self._frag = bytearray()

    def feed(self, data: bytes) -> List[Tuple[int, bytes]]:
        self._buf += data
        out: List[Tuple[int, bytes]] = []
        buf = self._buf
        while len(buf) >= 2:
            b0, b1 = buf[0], buf[1]
            fin, op, n, i = b0 & 0x80, b0 & 0x0F, b1 & 0x7F, 2
            if b0 & 0x70:
                raise ProtocolError("websocket: reserved bits set")
            if b1 & 0x80:
                raise ProtocolError("websocket: a server frame is masked")
            if n == 126:
                if len(buf) < 4:
                    break
                n, i = struct.unpack(">H", bytes(buf[2:4]))[0], 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, i = struct.unpack(">Q", bytes(buf[2:10]))[0], 10
            if op >= 8 and (not fin or n > 125):
                raise ProtocolError("websocket: a control frame is fragmented or too long")
            if op not in (OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG):
                raise ProtocolError(f"websocket: unknown opcode {op}")
            if n > MAX_MESSAGE:
                raise ProtocolError("websocket: frame too large")
            if len(buf) < i + n:
                break
            payload = bytes(buf[i:i + n])
            del buf[:i + n]
            if op >= 8:
                out.append((op, payload))
                continue
            if op == OP_CONT:
                if self._op is None:
                    raise ProtocolError("websocket: continuation without a message")
                self._frag += payload
            else:
                if self._op is not None:
                    raise ProtocolError("websocket: a new message inside a fragmented one")
                self._op, self._frag = op, bytearray(payload)
            if len(self._frag) > MAX_MESSAGE:
                raise ProtocolError("websocket: message too large")
            if fin:
                out.append((self._op, bytes(self._frag)))
                self._op, self._frag = None, bytearray()
        return out


def target(base_url: str, path: str, params: Mapping[str, Any]) -> Tuple[str, int, bool, str]:
    """The host, port, TLS flag and request target of path under base_url."""
    u = urlsplit(base_url)
    tls = u.scheme == "https"
    host = u.hostname or "127.0.0.1"
    port = u.port or (443 if tls else 80)
    q = urlencode([(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in params.items() if v is not None])
    return host, port, tls, (u.path.rstrip("/") + path) + ("?" + q if q else "")


def handshake(host: str, port: int, tgt: str, key: str, headers: Mapping[str, str]) -> bytes:
    lines = [f"GET {tgt} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("accept", "content-type")]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(head: bytes) -> Tuple[int, Dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ProtocolError(f"websocket: bad status line {lines[0]!r}")
    hdrs: Dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
    return int(parts[1]), hdrs


def check_upgrade(hdrs: Mapping[str, str], key: str) -> None:
    if hdrs.get("upgrade", "").lower() != "websocket" or "upgrade" not in hdrs.get("connection", "").lower():
        raise ProtocolError("websocket: the answer is not an upgrade")
    if hdrs.get("sec-websocket-accept", "") != accept_key(key):
        raise ProtocolError("websocket: wrong Sec-WebSocket-Accept")


def new_key() -> str:
    return base64.b64encode(os.urandom(16)).decode("ascii")


class _Core:
    """What the sync and async terminals share: the message handling."""

    def __init__(self) -> None:
        self.id = ""          # the terminal's id (term_…): reconnect with sb.terminal(terminal=id)
        self.writer = False   # whether this connection's input and resizes count
        self.exit: Optional[Dict[str, Any]] = None  # the exit message: code, reason, signal
        self.close_code: Optional[int] = None
        self.closed = False
        self._close_sent = False
        self._parser = FrameParser()
        self._queue: List[Tuple[int, bytes]] = []

    def _handle(self, op: int, payload: bytes) -> Tuple[Optional[bytes], Optional[bytes]]:
        """(data to hand out or None, a frame to send back or None); b""
        is the end of the terminal."""
        if op == OP_BINARY:
            return payload, None
        if op == OP_TEXT:
            try:
                msg = json.loads(payload.decode("utf-8"))
            except ValueError as e:
                raise ProtocolError(f"terminal: bad control message {payload[:80]!r}") from e
            kind = msg.get("type")
            if kind == "hello":
                self.id, self.writer = str(msg.get("terminal", "")), bool(msg.get("writer"))
            elif kind == "writer":
                self.writer = bool(msg.get("writer"))
            elif kind == "exit":
                self.exit = msg
            return None, None
        if op == EOF:
            self.closed, self._close_sent = True, True
            if self.close_code is None:
                self.close_code = 1006
            return b"", None
        if op == OP_PING:
            return None, encode_frame(OP_PONG, payload)
        if op == OP_CLOSE:
            self.closed = True
            self.close_code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
            reply = None if self._close_sent else encode_frame(OP_CLOSE, payload[:2])
            self._close_sent = True
            return b"", reply
        return None, None  # pong

    def _close_frame(self) -> Optional[bytes]:
        if self._close_sent or self.closed:
            return None
        self._close_sent = True
        return encode_frame(OP_CLOSE, struct.pack(">H", 1000))

    @staticmethod
    def _resize(cols: int, rows: int) -> bytes:
        return encode_frame(OP_TEXT, json.dumps({"type": "resize", "cols": int(cols), "rows": int(rows)}).encode())

    @staticmethod
    def _takeover() -> bytes:
        return encode_frame(OP_TEXT, b'{"type":"takeover"}')


class Terminal(_Core):
    """An interactive terminal of a sandbox (sync). ``read()`` returns the
    next output bytes (b"" once the terminal ended: ``exit`` then holds the
    exit message), ``write()`` sends input, ``resize()`` the window size;
    a context manager that closes the connection (the terminal's process
    ends with it unless another connection holds it)."""

    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        super().__init__()
        self._sock = sock
        self._queue = self._parser.feed(rest)

    @classmethod
    def open(cls, base_url: str, path: str, params: Mapping[str, Any], headers: Mapping[str, str],
             timeout: float = 30.0) -> "Terminal":
        host, port, tls, tgt = target(base_url, path, params)
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            key = new_key()
            sock.sendall(handshake(host, port, tgt, key, headers))
            buf = b""
            while b"\r\n\r\n" not in buf:
                b = sock.recv(65536)
                if not b or len(buf) > MAX_HEAD:
                    raise ProtocolError("websocket: no complete answer to the handshake")
                buf += b
            head, rest = buf.split(b"\r\n\r\n", 1)
            status, hdrs = parse_head(head)
            if status != 101:
                want = min(int(hdrs.get("content-length", "0") or 0), MAX_HEAD)
                while len(rest) < want:
                    b = sock.recv(65536)
                    if not b:
                        break
                    rest += b
                raise errors.from_response(status, hdrs, rest)
            check_upgrade(hdrs, key)
            t = cls(sock, rest)
            t._until_hello(time.monotonic() + timeout)
            return t
        except BaseException:
            sock.close()
            raise

    def _until_hello(self, deadline: float) -> None:
        held: List[Tuple[int, bytes]] = []
        while not self.id and not self.closed:
            op, payload = self._next(deadline)
            if op == OP_TEXT:
                self._handle(op, payload)
            else:
                held.append((op, payload))
        self._queue = held + self._queue

    def _next(self, deadline: Optional[float]) -> Tuple[int, bytes]:
        while not self._queue:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("terminal: no message in time")
                self._sock.settimeout(left)
            else:
                self._sock.settimeout(None)
            b = self._sock.recv(65536)
            if not b:
                return EOF, b""
            self._queue = self._parser.feed(b)
        return self._queue.pop(0)

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next output bytes; b"" once the terminal ended or the
        connection closed. TimeoutError after timeout seconds without any."""
        if self.closed:
            return b""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            op, payload = self._next(deadline)
            data, reply = self._handle(op, payload)
            if reply:
                self._sock.sendall(reply)
            if data is not None:
                return data

    def read_until(self, marker: bytes, timeout: float) -> bytes:
        """Reads until the output so far holds marker and returns it all;
        TimeoutError (with that output) if it does not come in time."""
        deadline = time.monotonic() + timeout
        out = b""
        while marker not in out:
            left = deadline - time.monotonic()
            try:
                b = self.read(max(left, 0.001))
            except TimeoutError:
                raise TimeoutError(f"terminal: {marker!r} not seen in {timeout}s; got {out[-500:]!r}") from None
            if not b:
                raise errors.StreamError(f"terminal ended before {marker!r}; got {out[-500:]!r}")
            out += b
        return out

    def write(self, data: bytes | str) -> None:
        """Sends input (ignored unless this connection is the writer)."""
        self._sock.sendall(encode_frame(OP_BINARY, data.encode("utf-8") if isinstance(data, str) else bytes(data)))

    def resize(self, cols: int, rows: int) -> None:
        self._sock.sendall(self._resize(cols, rows))

    def takeover(self) -> None:
        """Makes this connection the writer."""
        self._sock.sendall(self._takeover())

    def close(self) -> None:
        """Closes the connection (a close handshake, then the socket)."""
        try:
            frame = self._close_frame()
            if frame:
                self._sock.sendall(frame)
                deadline = time.monotonic() + CLOSE_WAIT
                while not self.closed:
                    op, payload = self._next(deadline)
                    self._handle(op, payload)
        except (OSError, TimeoutError, errors.StreamError):
            pass
        finally:
            self.closed = True
            self._sock.close()

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncTerminal(_Core):
    """The asyncio form of Terminal: the same calls, awaited."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rest: bytes) -> None:
        super().__init__()
        self._r, self._w = reader, writer
        self._queue = self._parser.feed(rest)

    @classmethod
    async def open(cls, base_url: str, path: str, params: Mapping[str, Any], headers: Mapping[str, str],
                   timeout: float = 30.0) -> "AsyncTerminal":
        host, port, tls, tgt = target(base_url, path, params)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=ssl.create_default_context() if tls else None), timeout)
        try:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            key = new_key()
            writer.write(handshake(host, port, tgt, key, headers))
            await writer.drain()
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
                raise ProtocolError("websocket: no complete answer to the handshake") from e
            status, hdrs = parse_head(head[:-4])
            if status != 101:
                want = min(int(hdrs.get("content-length", "0") or 0), MAX_HEAD)
                body = b""
                try:
                    body = await asyncio.wait_for(reader.readexactly(want), timeout)
                except asyncio.IncompleteReadError as e:
                    body = e.partial
                raise errors.from_response(status, hdrs, body)
            check_upgrade(hdrs, key)
            t = cls(reader, writer, b"")
            await t._until_hello(time.monotonic() + timeout)
            return t
        except BaseException:
            writer.close()
            raise

    async def _until_hello(self, deadline: float) -> None:
        held: List[Tuple[int, bytes]] = []
        while not self.id and not self.closed:
            op, payload = await self._next(deadline)
            if op == OP_TEXT:
                self._handle(op, payload)
            else:
                held.append((op, payload))
        self._queue = held + self._queue

    async def _next(self, deadline: Optional[float]) -> Tuple[int, bytes]:
        while not self._queue:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("terminal: no message in time")
                try:
                    b = await asyncio.wait_for(self._r.read(65536), left)
                except asyncio.TimeoutError:
                    raise TimeoutError("terminal: no message in time") from None
            else:
                b = await self._r.read(65536)
            if not b:
                return EOF, b""
            self._queue = self._parser.feed(b)
        return self._queue.pop(0)

    async def _send(self, frame: bytes) -> None:
        self._w.write(frame)
        await self._w.drain()

    async def read(self, timeout: Optional[float] = None) -> bytes:
        if self.closed:
            return b""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            op, payload = await self._next(deadline)
            data, reply = self._handle(op, payload)
            if reply:
                await self._send(reply)
            if data is not None:
                return data

    async def read_until(self, marker: bytes, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        out = b""
        while marker not in out:
            left = deadline - time.monotonic()
            try:
                b = await self.read(max(left, 0.001))
            except TimeoutError:
                raise TimeoutError(f"terminal: {marker!r} not seen in {timeout}s; got {out[-500:]!r}") from None
            if not b:
                raise errors.StreamError(f"terminal ended before {marker!r}; got {out[-500:]!r}")
            out += b
        return out

    async def write(self, data: bytes | str) -> None:
        await self._send(encode_frame(OP_BINARY, data.encode("utf-8") if isinstance(data, str) else bytes(data)))

    async def resize(self, cols: int, rows: int) -> None:
        await self._send(self._resize(cols, rows))

    async def takeover(self) -> None:
        await self._send(self._takeover())

    async def close(self) -> None:
        try:
            frame = self._close_frame()
            if frame:
                await self._send(frame)
                deadline = time.monotonic() + CLOSE_WAIT
                while not self.closed:
                    op, payload = await self._next(deadline)
                    self._handle(op, payload)
        except (OSError, TimeoutError, errors.StreamError):
            pass
        finally:
            self.closed = True
            self._w.close()

    async def __aenter__(self) -> "AsyncTerminal":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
