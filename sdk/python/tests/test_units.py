"""Tests of the client's own logic that need no service."""

from __future__ import annotations

import httpx
import pytest

from genesis_sandbox import Genesis, NotFound, QuotaExceeded, errors
from genesis_sandbox._core import LogState, SSEParser
from genesis_sandbox.types import LogEvent


def test_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENESIS_URL", "http://127.0.0.1:9/prefix/")
    monkeypatch.setenv("GENESIS_API_KEY", "k1")
    with Genesis() as c:
        assert (c.base_url, c.api_key) == ("http://127.0.0.1:9/prefix", "k1")
    with Genesis("http://127.0.0.1:10", "k2") as c:
        assert (c.base_url, c.api_key) == ("http://127.0.0.1:10", "k2")
    monkeypatch.delenv("GENESIS_URL")
    with Genesis() as c:
        assert c.base_url == "http://127.0.0.1:8080"
    with pytest.raises(ValueError):
        Genesis("ftp://x")


def test_error_classes() -> None:
    e = errors.from_response(404, {"x-request-id": "req_1"},
                             b'{"title":"Not Found","status":404,"code":"sandbox_not_found","detail":"no"}')
    assert isinstance(e, NotFound) and (e.status, e.code, e.detail, e.request_id) == (404, "sandbox_not_found", "no",
                                                                                      "req_1")
    q = errors.from_response(403, {}, b'{"status":403,"code":"quota_exceeded","request_id":"req_2"}')
    assert isinstance(q, QuotaExceeded) and q.request_id == "req_2"
    p = errors.from_response(502, {}, b"<html>bad gateway</html>")
    assert type(p) is errors.GenesisError and p.code == "bad_gateway" and "bad gateway" in p.detail


def test_sse_parser_split_anywhere() -> None:
    stream = (b"\xef\xbb\xbfid: 5\r\nevent: stdout\r\ndata: 0\r\ndata: a\r\ndata: \r\n\r\n"
              b": keepalive\n\nid: 9\nevent: exit\ndata: {\"exit_code\":0}\n\n")
    for size in (1, 2, 3, 7, len(stream)):
        p = SSEParser()
        got = []
        for i in range(0, len(stream), size):
            got += p.feed(stream[i:i + size])
        assert got == [("5", "stdout", "0\na\n"), ("9", "exit", '{"exit_code":0}')], size


def test_sse_parser_bulk_data_lines_match_line_by_line() -> None:
    # Fed whole, runs of data lines take the parser's bulk path; fed a byte
    # at a time, every line goes one by one: both must read the same.
    import random
    atoms = [b"data: ", b"data:", b"data", b"id: 1", b"event: e", b": c", b"x", b"\xc3\xa9", b"\n", b"\n\n",
             b"\r", b"\r\n", b"data: ab\n", b"retry: 5"]
    rnd = random.Random(7)
    for _ in range(3000):
        stream = b"".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 40)))
        whole, bytewise = SSEParser(), SSEParser()
        got = whole.feed(stream)
        want = [ev for i in range(len(stream)) for ev in bytewise.feed(stream[i:i + 1])]
        assert got == want and whole.last_id == bytewise.last_id, stream
    text = b"".join(b"id: %d\nevent: stdout\ndata: %d\ndata: " % (i, i) + b"\ndata: ".join([b"line"] * 500) + b"\n\n"
                    for i in range(3))
    p = SSEParser()
    got = [ev for i in range(0, len(text), 1000) for ev in p.feed(text[i:i + 1000])]
    assert got == [(str(i), "stdout", "%d\n" % i + "\n".join(["line"] * 500)) for i in range(3)]


def test_output_event_fast_path_matches_json() -> None:
    import base64
    import json

    from genesis_sandbox._core import decode_log_event

    def reference(data: str) -> "tuple[int, bytes] | None":
        try:
            o = json.loads(data)
            if int(o.get("offset", 0)) < 0:
                return None
            return int(o.get("offset", 0)), base64.b64decode(o.get("data", ""))
        except (ValueError, TypeError):
            return None

    cases = ['{"offset":0,"data":"aGkK"}', '{"offset":12,"data":"b29wcwo="}', '{"offset":01,"data":"aGkK"}',
             '{"offset":1,"data":"aG\\/kK"}', '{"offset":1,"data":"QQ=="}"}', '{"offset":-1,"data":"aGkK"}',
             '{"offset":1,"data":"Q Q=="}', '{"offset":\u0661,"data":"aGkK"}', '{"offset":7,"data":""}',
             '{"offset":7,"data":"QQ"}', '{"data":"aGkK","offset":3}',
             '{"offset":5,"data":"%s"}' % base64.b64encode(bytes(range(256)) * 10).decode()]
    for data in cases:
        want = reference(data)
        try:
            ev = decode_log_event("1", "stdout", data)
            got = None if ev is None else (ev.offset, ev.data)
        except errors.StreamError:
            got = None
        assert got == want, data


def test_log_state_drops_repeats() -> None:
    s = LogState()
    assert s.accept(LogEvent("1", "stdout", 0, b"abc")) is not None
    assert s.accept(LogEvent("1", "stdout", 0, b"abc")) is None
    part = s.accept(LogEvent("2", "stdout", 1, b"bcde"))
    assert part is not None and (part.offset, part.data) == (3, b"de")
    assert s.accept(LogEvent("3", "exit", payload={"exit_code": 0})) is not None
    assert s.accept(LogEvent("3", "exit", payload={"exit_code": 0})) is None


def _flaky(fail: int, status: int = 503) -> "tuple[httpx.MockTransport, dict[str, int]]":
    """A transport that answers status fail times, then 200, counting calls."""
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= fail:
            return httpx.Response(status, json={"status": status, "code": "unavailable"})
        return httpx.Response(200, json={"id": "sbx_1", "state": "ready", "job_id": "job_1", "exit_code": 0})

    return httpx.MockTransport(handler), calls


def test_retries_only_idempotent_calls() -> None:
    from genesis_sandbox import ServiceUnavailable
    from genesis_sandbox._core import Request

    transport, calls = _flaky(2)
    with Genesis("http://svc", "k", http_client=httpx.Client(transport=transport)) as c:
        assert c.get_sandbox("sbx_1").id == "sbx_1"  # a read: sent again
    assert calls["n"] == 3

    transport, calls = _flaky(1)
    with Genesis("http://svc", "k", http_client=httpx.Client(transport=transport)) as c:
        with pytest.raises(ServiceUnavailable):
            c._call(Request("POST", "/v1/sandboxes/sbx_1/exec", json={"script": "true"}))  # never repeated
    assert calls["n"] == 1

    transport, calls = _flaky(1)
    with Genesis("http://svc", "k", http_client=httpx.Client(transport=transport)) as c:
        c.create_sandbox("p", idempotency_key="key-1")  # a create with a key: safe to repeat
    assert calls["n"] == 2

    transport, calls = _flaky(5)
    with Genesis("http://svc", "k", retries=2, http_client=httpx.Client(transport=transport)) as c:
        with pytest.raises(ServiceUnavailable):
            c.delete_sandbox("sbx_1")
    assert calls["n"] == 3


def test_sends_key_and_act_as() -> None:
    seen: "dict[str, str]" = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(request.headers)
        return httpx.Response(200, json={"tenant": "t"})

    with Genesis("http://svc", "key-9", act_as="acme",
                 http_client=httpx.Client(transport=httpx.MockTransport(handler))) as c:
        c.whoami()
    assert seen["authorization"] == "Bearer key-9" and seen["x-genesis-tenant"] == "acme"


def test_error_classes_by_code() -> None:
    from genesis_sandbox import ControlHeld, PatchConflict
    c = errors.from_response(409, {"x-request-id": "req_3"}, b'{"status":409,"code":"control_held","detail":"alice"}')
    assert isinstance(c, ControlHeld) and isinstance(c, errors.Conflict) and c.request_id == "req_3"
    p = errors.from_response(409, {}, b'{"status":409,"code":"patch_conflict"}')
    assert isinstance(p, PatchConflict)


def test_mcp_reply_json_and_event_stream() -> None:
    from genesis_sandbox._core import mcp_reply
    body = b'{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"42"}]}}'
    assert mcp_reply(200, {"content-type": "application/json"}, body, 2)["content"][0]["text"] == "42"
    sse = (b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n'
           b'event: message\ndata: ' + body)  # the last event without its blank line
    assert mcp_reply(200, {"content-type": "text/event-stream"}, sse, 2)["content"][0]["text"] == "42"
    err = b'{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"unknown tool"}}'
    with pytest.raises(errors.GenesisError) as ei:
        mcp_reply(200, {"content-type": "application/json"}, err, 2)
    assert ei.value.code == "mcp_error" and "unknown tool" in ei.value.detail
    with pytest.raises(errors.StreamError):
        mcp_reply(200, {"content-type": "application/json"}, body, 3)


def test_screenshots_as_bytes() -> None:
    import base64
    from genesis_sandbox.types import ComputerResult, browser_shots
    png = b"\x89PNG\r\n\x1a\nxx"
    d = {"ok": True, "results": [{"type": "navigate", "ok": True},
                                 {"type": "screenshot", "ok": True, "value": {"mime": "image/png",
                                                                            "data": base64.b64encode(png).decode()}},
                                 {"type": "screenshot", "ok": True, "artifact": {"id": "art_1"}}]}
    assert browser_shots(d) == [png, "art_1"]
    c = ComputerResult.from_json({"ok": False, "completed": 1, "results": [
        {"action": "screenshot", "ok": True, "screenshot": base64.b64encode(png).decode()},
        {"action": "key", "ok": False, "error": "bad key"}], "screenshot": base64.b64encode(b"after").decode()})
    assert c.screenshots == [png, b"after"] and c.error == "bad key" and not c.ok


def test_connections_set_tcp_nodelay() -> None:
    """Without TCP_NODELAY a call with a body waits for the service's
    delayed ACK of the request's head (about 40 ms): the transports set it."""
    import asyncio
    import http.server
    import socket
    import threading

    from genesis_sandbox import AsyncGenesis

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % srv.server_address[1]

    def nodelay(resp: httpx.Response) -> int:
        sock = resp.extensions["network_stream"].get_extra_info("socket")
        return int(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    try:
        with Genesis(url, "k") as c:
            assert nodelay(c._http.post(url + "/x", json={"a": 1})) == 1

        async def main() -> int:
            async with AsyncGenesis(url, "k") as ac:
                return nodelay(await ac._http.post(url + "/x", json={"a": 1}))

        assert asyncio.run(main()) == 1
    finally:
        srv.shutdown()


def test_sync_client_is_generated() -> None:
    """_sync.py is tools/unasync.py's output from _async.py: edit the async
    client, then run the tool, and the two cannot drift apart."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("unasync", root / "tools" / "unasync.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pkg = root / "src" / "genesis_sandbox"
    assert mod.unasync((pkg / "_async.py").read_text()) == (pkg / "_sync.py").read_text(), \
        "_sync.py differs from what tools/unasync.py makes of _async.py: run python3 sdk/python/tools/unasync.py"


def test_only_idempotent_calls_are_retried() -> None:
    """The new areas mark as retryable exactly what the API documents as
    idempotent: reads and deletes; actions, creates and patches never."""
    from genesis_sandbox import _ops

    retried = [_ops.browser_status("s"), _ops.get_control("s", 3, 1000), _ops.release_control("s"),
               _ops.trace_page("s", 0, 10), _ops.export_trace("s"), _ops.diff("s", None, True),
               _ops.list_mcp_servers(), _ops.get_mcp_server("m"), _ops.delete_mcp_server("m"),
               _ops.mcp_server_tools("m"), _ops.list_skills(), _ops.get_skill("k")]
    never = [_ops.port_link("s", 80, 60), _ops.browser_actions("s", [{"type": "reload"}]),
             _ops.computer_actions("s", [{"action": "screenshot"}], True, None),
             _ops.take_control("s", "agent", None, None), _ops.add_trace_event("s", "annotation", None, {}),
             _ops.apply_patch("s", "p", False), _ops.create_mcp_server("c", None, {}),
             _ops.mcp_message("/e", "t", "", {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
             _ops.push_skill(b"x", "application/gzip"), _ops.run_skill("k", "a.py", {})]
    assert all(r.idempotent and r.method in ("GET", "DELETE") for r in retried)
    assert not any(r.idempotent for r in never)
    with pytest.raises(ValueError):
        _ops.create_mcp_server(None, None, {})


def test_volume_mounts_and_errors() -> None:
    from genesis_sandbox import VolumeBusy, VolumeInUse
    from genesis_sandbox._ops import acquire_lease, create_sandbox, volume_mounts
    assert volume_mounts(None) is None and volume_mounts([]) is None
    assert volume_mounts(["a:/mnt/a", "b:/mnt/b:ro", {"volume": "c", "path": "/mnt/c", "read_only": None}]) == [
        {"volume": "a", "path": "/mnt/a"}, {"volume": "b", "path": "/mnt/b", "read_only": True},
        {"volume": "c", "path": "/mnt/c"}]
    for bad in ("a", ":/mnt/a", "a:", "a:/mnt/a:rw", "a:/mnt/a:ro:x"):
        with pytest.raises(ValueError):
            volume_mounts([bad])
    r = create_sandbox("p", None, None, None, None, None, {}, None, ["v:/mnt/v"])
    assert r.json == {"profile": "p", "volumes": [{"volume": "v", "path": "/mnt/v"}]}
    r = acquire_lease("p", None, None, None, None, None, None, ["v:/mnt/v:ro"])
    assert r.json == {"profile": "p", "volumes": [{"volume": "v", "path": "/mnt/v", "read_only": True}]}
    assert "volumes" not in (create_sandbox("p", None, None, None, None, None, {}, None).json or {})
    u = errors.from_response(409, {}, b'{"status":409,"code":"volume_in_use"}')
    b = errors.from_response(409, {}, b'{"status":409,"code":"volume_busy"}')
    assert isinstance(u, VolumeInUse) and isinstance(b, VolumeBusy) and isinstance(u, errors.Conflict)
