"""The WebSocket client (frames, unit) and sandbox terminals against the
real service under runc and runsc, sync and async."""

from __future__ import annotations

import asyncio
import struct
from typing import Iterator

import pytest

from conftest import Service
from genesis_sandbox import AsyncGenesis, Genesis, Sandbox, Unauthorized
from genesis_sandbox._ws import (OP_BINARY, OP_CLOSE, OP_PING, OP_TEXT, FrameParser, ProtocolError, _Core,
                                 accept_key, encode_frame, mask)

PROFILE = "code-python-basic"
TIMEOUT = 60.0


def server_frame(op: int, payload: bytes, fin: bool = True) -> bytes:
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | op])
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack(">H", n)
    else:
        head += bytes([127]) + struct.pack(">Q", n)
    return head + payload


def test_accept_key_rfc_example() -> None:
    # RFC 6455 section 1.3.
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_client_frames_are_masked() -> None:
    for n in (0, 5, 125, 126, 70000):
        payload = bytes(i % 251 for i in range(n))
        f = encode_frame(OP_BINARY, payload, b"\x01\x02\x03\x04")
        assert f[0] == 0x82 and f[1] & 0x80
        ln, i = f[1] & 0x7F, 2
        if ln == 126:
            ln, i = struct.unpack(">H", f[2:4])[0], 4
        elif ln == 127:
            ln, i = struct.unpack(">Q", f[2:10])[0], 10
        assert ln == n and f[i:i + 4] == b"\x01\x02\x03\x04"
        assert mask(f[i + 4:], b"\x01\x02\x03\x04") == payload


def test_parser_split_anywhere_and_fragments() -> None:
    stream = (server_frame(OP_TEXT, b'{"type":"hello"}') + server_frame(OP_BINARY, b"ab", fin=False)
              + server_frame(OP_PING, b"p") + server_frame(0, b"c" * 300) + server_frame(OP_CLOSE, b"\x03\xe8"))
    for size in (1, 2, 3, 7, len(stream)):
        p = FrameParser()
        got = []
        for i in range(0, len(stream), size):
            got += p.feed(stream[i:i + size])
        assert got == [(OP_TEXT, b'{"type":"hello"}'), (OP_PING, b"p"), (OP_BINARY, b"ab" + b"c" * 300),
                       (OP_CLOSE, b"\x03\xe8")], size


def test_parser_refuses_masked_and_bad_frames() -> None:
    with pytest.raises(ProtocolError):
        FrameParser().feed(bytes([0x82, 0x81, 0, 0, 0, 0, 0]))   # masked server frame
    with pytest.raises(ProtocolError):
        FrameParser().feed(server_frame(0, b"x"))                  # continuation of nothing
    with pytest.raises(ProtocolError):
        FrameParser().feed(server_frame(OP_PING, b"x", fin=False))  # fragmented control frame


def test_control_messages() -> None:
    """A ping is answered with a pong of its payload; hello, writer and exit
    set the terminal's fields; a close is echoed once and ends reading."""
    t = _Core()
    data, reply = t._handle(OP_TEXT, b'{"type":"hello","terminal":"term_1","writer":true}')
    assert (data, reply, t.id, t.writer) == (None, None, "term_1", True)
    t._handle(OP_TEXT, b'{"type":"writer","writer":false}')
    assert not t.writer
    data, reply = t._handle(OP_PING, b"hi")
    assert data is None and reply is not None and reply[0] == 0x8A and mask(reply[6:], reply[2:6]) == b"hi"
    t._handle(OP_TEXT, b'{"type":"exit","code":7,"reason":"exited"}')
    assert t.exit is not None and t.exit["code"] == 7
    data, reply = t._handle(OP_CLOSE, b"\x03\xe8bye")
    assert data == b"" and t.closed and t.close_code == 1000
    assert reply is not None and reply[0] == 0x88 and mask(reply[6:], reply[2:6]) == b"\x03\xe8"
    assert t._close_frame() is None  # already closed: nothing more to send


@pytest.fixture(scope="module", params=["runc", "runsc"])
def sb(request: pytest.FixtureRequest, service: Service) -> Iterator[Sandbox]:
    risk = "low" if request.param == "runc" else "medium"
    with Genesis(service.url, service.api_key) as c:
        with c.sandbox(PROFILE, runtime=request.param, risk_level=risk, ttl_seconds=600) as s:
            yield s


def test_terminal_echo_resize_exit(sb: Sandbox) -> None:
    with sb.terminal(cols=100, rows=30) as t:
        assert t.id.startswith("term_") and t.writer
        t.write("echo pysdk-$((6*7))\n")
        t.read_until(b"pysdk-42", TIMEOUT)
        t.resize(132, 43)
        t.write("stty size\n")
        t.read_until(b"43 132", TIMEOUT)
        t.write("exit 3\n")
        while t.read(TIMEOUT):
            pass
        assert t.exit is not None and t.exit["code"] == 3, t.exit
        assert t.closed and t.close_code == 1000


def test_terminal_wrong_key(sb: Sandbox, service: Service) -> None:
    with Genesis(service.url, "wrong-key") as c:
        other = Sandbox(c, {"id": sb.id})
        with pytest.raises(Unauthorized):
            other.terminal()


def test_terminal_async(sb: Sandbox, service: Service) -> None:
    async def main() -> None:
        async with AsyncGenesis(service.url, service.api_key) as c:
            s = await c.get_sandbox(sb.id)
            async with s.terminal() as t:
                assert t.id.startswith("term_")
                await t.write(b"printf 'a%sb\\n' async\n")
                await t.read_until(b"aasyncb", TIMEOUT)
                await t.resize(90, 20)
                await t.write("stty size\n")
                await t.read_until(b"20 90", TIMEOUT)
            assert t.closed

    asyncio.run(main())
