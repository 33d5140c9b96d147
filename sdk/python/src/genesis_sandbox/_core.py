"""The request and response code shared by the sync and async clients:
configuration, request descriptions, answer decoding, the Server-Sent
Events parser and the state of a resumable log stream."""

from __future__ import annotations

import base64
import binascii
import json
import os
import random
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union
from urllib.parse import quote, urlsplit

from . import errors
from .types import LogEvent

DEFAULT_URL = "http://127.0.0.1:8080"
ENV_URL = "GENESIS_URL"
ENV_API_KEY = "GENESIS_API_KEY"
USER_AGENT = "genesis-python-sdk/0.1.0"

# Statuses after which a call the API calls idempotent is sent again.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
DEFAULT_RETRIES = 3
RETRY_MIN = 0.1  # seconds
RETRY_MAX = 5.0
# A log stream that delivers no byte for this long counts as dropped; the
# service sends a keepalive at least every 15 s.
DEFAULT_IDLE_TIMEOUT = 60.0
MAX_EVENT_BYTES = 64 << 20

Params = List[Tuple[str, str]]


def resolve_config(base_url: Optional[str], api_key: Optional[str]) -> Tuple[str, str]:
    """Returns the base URL and API key from the arguments, else from
    GENESIS_URL (default http://127.0.0.1:8080) and GENESIS_API_KEY."""
    url = base_url if base_url else os.environ.get(ENV_URL) or DEFAULT_URL
    key = api_key if api_key is not None else os.environ.get(ENV_API_KEY, "")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"invalid service URL {url!r}: want an absolute http or https URL")
    if parts.query or parts.fragment:
        raise ValueError(f"invalid service URL {url!r}: must not have a query or fragment")
    return url.rstrip("/"), key


def seg(value: str) -> str:
    """Escapes one path segment, refusing an empty id."""
    if not value:
        raise ValueError("empty id")
    return quote(value, safe="")


@dataclass
class Request:
    """One API call, independent of the HTTP client that sends it."""

    method: str
    path: str
    params: Params = field(default_factory=list)
    headers: Dict[str, str] = field(default_factory=dict)
    json: Any = None
    # content is sent as is (application/octet-stream): bytes or an
    # iterator of bytes (an async iterator for the async client).
    content: Any = None
    # idempotent calls are sent again after a transport error or a 429 or
    # 502-504; only those the API documents as idempotent set it.
    idempotent: bool = False
    # timeout overrides the client's for this call (seconds), e.g. an exec
    # whose own time limit is longer.
    timeout: Optional[float] = None


def build_headers(req: Request, api_key: str, act_as: str) -> Dict[str, str]:
    h = {"Accept": "application/json, application/problem+json", "User-Agent": USER_AGENT}
    if api_key:
        h["Authorization"] = "Bearer " + api_key
        if act_as:
            h["X-Genesis-Tenant"] = act_as
    if req.json is not None:
        h["Content-Type"] = "application/json"
    if req.content is not None:
        h["Content-Type"] = "application/octet-stream"
    h.update(req.headers)
    return h


def encode_json(req: Request) -> Optional[bytes]:
    if req.json is None:
        return None
    return json.dumps(req.json, separators=(",", ":")).encode("utf-8")


def decode_json(status: int, headers: Mapping[str, str], body: bytes) -> Any:
    """Decodes a 2xx JSON answer (None for an empty body) or raises the
    GenesisError of a non-2xx one."""
    if status < 200 or status > 299:
        raise errors.from_response(status, headers, body)
    if not body:
        return None
    return json.loads(body.decode("utf-8"))


def backoff(attempt: int, retry_after: Optional[float] = None) -> float:
    """The wait before retry number attempt (0-based): full jitter over
    the upper half of an exponential step, or the server's Retry-After."""
    if retry_after is not None:
        return min(retry_after, RETRY_MAX * 6)
    step = min(RETRY_MIN * (2 ** attempt), RETRY_MAX)
    return float(step / 2 + random.uniform(0, step / 2))


def compact(d: Mapping[str, Any]) -> Dict[str, Any]:
    """Drops the None values of a request body."""
    return {k: v for k, v in d.items() if v is not None}


def exec_body(
    command: Union[str, Iterable[str], None],
    script: Optional[str],
    stdin: Union[str, bytes, None],
    extra: Mapping[str, Any],
) -> Dict[str, Any]:
    """The body of POST /v1/sandboxes/{id}/exec. A command given as a
    string is run by /bin/sh -c (use script for several lines)."""
    if (command is None) == (script is None):
        raise ValueError("give exactly one of command and script")
    body: Dict[str, Any] = dict(compact(extra))
    if isinstance(command, str):
        body["script"] = command
    elif command is not None:
        body["command"] = list(command)
    else:
        body["script"] = script
    if isinstance(stdin, bytes):
        body["stdin_base64"] = base64.b64encode(stdin).decode("ascii")
    elif stdin is not None:
        body["stdin"] = stdin
    return body


def call_timeout(timeout_ms: Optional[int]) -> Optional[float]:
    """The HTTP timeout of a call that waits for a job of this limit: the
    limit and a margin for starting and answering."""
    if not timeout_ms:
        return None
    return timeout_ms / 1000 + 30


def range_header(offset: int, length: Optional[int]) -> str:
    if offset < 0 or (length is not None and length <= 0):
        raise ValueError("a range needs offset >= 0 and length > 0")
    if length is None:
        return f"bytes={offset}-"
    return f"bytes={offset}-{offset + length - 1}"


class SSEParser:
    """An incremental text/event-stream parser (WHATWG HTML): lines end in
    CRLF, LF or CR; a leading BOM is skipped; ':' lines are comments; data
    lines join with LF; an empty line dispatches. Feed it bytes as they
    come; it returns the events completed so far as (id, event, data).

    Its cost is linear in the bytes fed: a line that spans chunks is kept
    as a list of its pieces and joined once, line ends are searched once
    per chunk, and a run of complete ``data: `` lines without CR (the text
    form of job output: a line of output per data line) is taken in one
    step rather than line by line."""

    def __init__(self) -> None:
        self._pending: List[bytes] = []  # pieces of an unfinished line
        self._pending_size = 0
        self._started = False
        self._skip_lf = False
        self._event = ""
        self._data: List[bytes] = []
        self._size = 0
        self.last_id = ""

    def feed(self, chunk: bytes) -> List[Tuple[str, str, str]]:
        out: List[Tuple[str, str, str]] = []
        if not chunk:
            return out
        if self._pending:
            if b"\n" not in chunk and b"\r" not in chunk:
                self._keep(chunk)
                return out
            buf = b"".join(self._pending) + chunk
            self._pending, self._pending_size = [], 0
        else:
            buf = chunk
        if not self._started:
            if len(buf) < 3 and b"\xef\xbb\xbf".startswith(buf):
                self._keep(buf)
                return out
            self._started = True
            if buf.startswith(b"\xef\xbb\xbf"):
                buf = buf[3:]
        pos = 0
        n = len(buf)
        cr = buf.find(b"\r")
        lf = buf.find(b"\n")
        last_lf = buf.rfind(b"\n")
        plain_until = -1  # below this, lines go one by one
        while pos < n:
            if self._skip_lf:
                self._skip_lf = False
                if buf[pos] == 0x0A:
                    pos += 1
                    continue
            if 0 <= cr < pos:
                cr = buf.find(b"\r", pos)
            if 0 <= lf < pos:
                lf = buf.find(b"\n", pos)
            if lf < 0 and cr < 0:
                break
            if cr < 0 and pos >= plain_until and lf < last_lf and buf[lf + 1] != 0x0A and buf.startswith(b"data: ", pos):
                # Complete lines up to the event's end (or the chunk's last
                # line end): if all are data lines, take them at once.
                end = buf.find(b"\n\n", pos)
                if end < 0 or end > last_lf:
                    end = last_lf
                run = buf[pos:end]
                value = run[6:].replace(b"\ndata: ", b"\n")
                # Every line of the run is a data line when each of its line
                # ends was one of the prefixes replaced (6 bytes shorter each).
                if value.count(b"\n") * 6 == len(run) - 6 - len(value):
                    self._size += len(value) + 1
                    if self._size > MAX_EVENT_BYTES:
                        raise errors.StreamError("server-sent event too large")
                    self._data.append(value)
                    pos = end + 1
                    continue
                plain_until = end
            end = lf if cr < 0 or 0 <= lf < cr else cr
            line = buf[pos:end]
            self._skip_lf = end == cr
            pos = end + 1
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        if pos < n:
            self._keep(buf[pos:])
        return out

    def _keep(self, piece: bytes) -> None:
        self._pending.append(piece)
        self._pending_size += len(piece)
        if self._pending_size > MAX_EVENT_BYTES:
            raise errors.StreamError("server-sent event too large")

    def _line(self, line: bytes) -> Optional[Tuple[str, str, str]]:
        if not line:
            if not self._data:
                self._event = ""
                return None
            ev = (self.last_id, self._event or "message", b"\n".join(self._data).decode("utf-8", "replace"))
            self._event, self._data, self._size = "", [], 0
            return ev
        if line[:1] == b":":
            return None
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"data":
            self._size += len(value) + 1
            if self._size > MAX_EVENT_BYTES:
                raise errors.StreamError("server-sent event too large")
            self._data.append(value)
        elif name == b"id":
            if b"\x00" not in value:
                self.last_id = value.decode("utf-8", "replace")
        return None


def _decode_output_json(ev_id: str, name: str, data: str) -> Optional[LogEvent]:
    """The JSON form of an output event exactly as the service writes it,
    {"offset":N,"data":"<base64>"}, decoded without json.loads (which scans
    and copies the whole string); None for anything else, which the caller
    decodes with json.loads as before."""
    if not (data.startswith('{"offset":') and data.endswith('"}')):
        return None
    i = data.find(',"data":"', 10, 40)
    head = data[10:i]
    if i < 0 or not (head.isascii() and head.isdigit()) or (len(head) > 1 and head[0] == "0"):
        return None
    try:
        # validate: any byte outside the alphabet (a quote, an escape) is
        # left to json.loads.
        b = base64.b64decode(data[i + 9:-2], validate=True)
    except (binascii.Error, ValueError):
        return None
    return LogEvent(id=ev_id, event=name, offset=int(head), data=b)


def decode_log_event(ev_id: str, name: str, data: str) -> Optional[LogEvent]:
    """Decodes one event of a job's log; None for events of other names."""
    try:
        if name in ("stdout", "stderr"):
            head, nl, text = data.partition("\n")
            if nl and head.isdigit():
                return LogEvent(id=ev_id, event=name, offset=int(head), data=text.encode("utf-8"))
            fast = _decode_output_json(ev_id, name, data)
            if fast is not None:
                return fast
            o = json.loads(data)
            off = int(o.get("offset", 0))
            if off < 0:
                raise ValueError("negative offset")
            return LogEvent(id=ev_id, event=name, offset=off, data=base64.b64decode(o.get("data", "")))
        if name in ("exit", "truncated", "job"):
            payload = json.loads(data)
            if not isinstance(payload, dict):
                raise ValueError("not an object")
            return LogEvent(id=ev_id, event=name, payload=payload)
    except (ValueError, TypeError) as e:
        raise errors.StreamError(f"malformed {name} event {ev_id!r}: {e}") from e
    return None


class LogState:
    """The state of one logical log stream across connections: the last
    event id seen (sent as Last-Event-ID when resuming) and the next
    expected offset of each output stream, which drops bytes a server
    sends twice. Every event reaches the caller once, without gaps."""

    def __init__(self, cursor: str = "") -> None:
        self.cursor = cursor
        self.last_id = ""
        self._next = {"stdout": -1, "stderr": -1}
        self._truncated = {"stdout": False, "stderr": False}
        self.exited = False
        self.job_seen = False
        self.delivered = 0

    def params_headers(self, follow: bool, encoding: str) -> Tuple[Params, Dict[str, str]]:
        params: Params = [("follow", "true" if follow else "false"), ("encoding", encoding)]
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        # The service prefers ?cursor= over Last-Event-ID: send one only.
        if self.last_id:
            headers["Last-Event-ID"] = self.last_id
        elif self.cursor:
            params.append(("cursor", self.cursor))
        return params, headers

    def accept(self, ev: LogEvent) -> Optional[LogEvent]:
        """Returns the part of ev not yet delivered (None if nothing)."""
        if ev.event in ("stdout", "stderr"):
            nxt = self._next[ev.event]
            if nxt >= 0 and ev.offset < nxt:
                end = ev.offset + len(ev.data)
                if end <= nxt:
                    return None
                ev = LogEvent(id=ev.id, event=ev.event, offset=nxt, data=ev.data[nxt - ev.offset:])
            self._next[ev.event] = ev.offset + len(ev.data)
        elif ev.event == "truncated":
            stream = str(ev.payload.get("stream", "stdout"))
            if self._truncated.get(stream):
                return None
            self._truncated[stream] = True
        elif ev.event == "job":
            if self.job_seen:
                return None
            self.job_seen = True
        elif ev.event == "exit":
            if self.exited:
                return None
            self.exited = True
        self.delivered += 1
        return ev

    def events(self, parser: SSEParser, chunk: bytes) -> List[LogEvent]:
        """Feeds a chunk of the stream and returns the new events to deliver."""
        out: List[LogEvent] = []
        for ev_id, name, data in parser.feed(chunk):
            if self.exited:
                break
            le = decode_log_event(ev_id, name, data)
            if le is not None:
                got = self.accept(le)
                if got is not None:
                    out.append(got)
            if ev_id:
                self.last_id = ev_id
        return out


def is_event_stream(headers: Mapping[str, str]) -> bool:
    return headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream"


def mcp_reply(status: int, headers: Mapping[str, str], body: bytes, want_id: int) -> Dict[str, Any]:
    """The JSON-RPC answer of id want_id to a POST to an MCP endpoint,
    answered as JSON or as an event stream; a JSON-RPC error raises
    GenesisError with the error's message."""
    if status < 200 or status > 299:
        raise errors.from_response(status, headers, body)
    messages: List[Any] = []
    if is_event_stream(headers):
        parser = SSEParser()
        for _, _, data in parser.feed(body) + parser.feed(b"\n\n"):
            if data:
                messages.append(json.loads(data))
    elif body:
        decoded = json.loads(body.decode("utf-8"))
        messages = decoded if isinstance(decoded, list) else [decoded]
    for m in messages:
        if isinstance(m, dict) and m.get("id") == want_id:
            if "error" in m:
                e = m["error"]
                raise errors.GenesisError(status, "mcp_error", f"{e.get('code')}: {e.get('message')}",
                                          headers.get("x-request-id", ""))
            res: Dict[str, Any] = m.get("result") or {}
            return res
    raise errors.StreamError(f"no JSON-RPC answer of id {want_id} in the MCP endpoint's reply")


# The MCP protocol version the client speaks to an MCP server instance.
MCP_PROTOCOL = "2025-06-18"


def mcp_initialize(msg_id: int) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
            "params": {"protocolVersion": MCP_PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "genesis-python-sdk", "version": "0.1.0"}}}


def multipart(files: Mapping[str, bytes]) -> Tuple[bytes, str]:
    """Encodes files (target path → content) as a multipart/form-data body,
    each part's filename the path (RFC 2231 encoded when not plain ASCII);
    returns the body and its Content-Type."""
    boundary = "genesis-" + "".join(random.choice("0123456789abcdef") for _ in range(32))
    out: List[bytes] = []
    for i, (name, data) in enumerate(files.items()):
        if not name:
            raise ValueError("empty file name")
        if all(32 <= ord(ch) < 127 and ch not in '"\\' for ch in name):
            disp = f'form-data; name="f{i}"; filename="{name}"'
        else:
            disp = f"form-data; name=\"f{i}\"; filename*=UTF-8''{quote(name, safe='')}"
        out.append(f"--{boundary}\r\nContent-Disposition: {disp}\r\n"
                   "Content-Type: application/octet-stream\r\n\r\n".encode("utf-8"))
        out.append(bytes(data))
        out.append(b"\r\n")
    out.append(f"--{boundary}--\r\n".encode("ascii"))
    return b"".join(out), "multipart/form-data; boundary=" + boundary
