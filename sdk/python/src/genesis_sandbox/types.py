"""Records the client returns. Each keeps the whole JSON answer in
``raw``, so fields this version does not name are still at hand."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class LogEvent:
    """One event of a job's log stream.

    ``event`` is ``stdout``, ``stderr``, ``truncated``, ``exit`` or (first
    on a streamed exec) ``job``. Output events carry ``offset`` (of the
    first byte in its stream) and the exact ``data`` bytes; the others their
    JSON in ``payload``. ``id`` is the cursor after this event.
    """

    id: str
    event: str
    offset: int = 0
    data: bytes = b""
    payload: Dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The output bytes decoded as UTF-8 (invalid bytes replaced)."""
        return self.data.decode("utf-8", "replace")


@dataclass
class ExecResult:
    """The result of a finished job: a non-zero exit is a result, not an error."""

    job_id: str
    exit_code: int
    exit_reason: str
    stdout: str
    stderr: str
    duration_ms: int
    stdout_truncated: bool
    stderr_truncated: bool
    raw: Dict[str, Any]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ExecResult":
        out = d.get("stdout", "")
        err = d.get("stderr", "")
        if d.get("stdout_base64"):
            out = base64.b64decode(d["stdout_base64"]).decode("utf-8", "replace")
        if d.get("stderr_base64"):
            err = base64.b64decode(d["stderr_base64"]).decode("utf-8", "replace")
        return cls(
            job_id=d.get("job_id", ""),
            exit_code=int(d.get("exit_code", 0)),
            exit_reason=d.get("exit_reason", ""),
            stdout=out,
            stderr=err,
            duration_ms=int(d.get("duration_ms", 0)),
            stdout_truncated=bool(d.get("stdout_truncated", False)),
            stderr_truncated=bool(d.get("stderr_truncated", False)),
            raw=d,
        )

    @property
    def ok(self) -> bool:
        """Whether the job exited with code 0."""
        return self.exit_reason == "exited" and self.exit_code == 0


@dataclass
class CodeResult:
    """The answer of a run in a code context."""

    job_id: str
    status: str  # ok | error
    stdout: str
    stderr: str
    value: Optional[str]
    error: Optional[Dict[str, Any]]
    outputs: List[Dict[str, Any]]
    raw: Dict[str, Any]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CodeResult":
        return cls(
            job_id=d.get("job_id", ""),
            status=d.get("status", ""),
            stdout=d.get("stdout", ""),
            stderr=d.get("stderr", ""),
            value=d.get("value"),
            error=d.get("error"),
            outputs=list(d.get("outputs") or []),
            raw=d,
        )

    def images(self) -> List[bytes]:
        """The PNG images of the run (rendered matplotlib figures)."""
        return [base64.b64decode(o["data"]) for o in self.outputs if o.get("mime") == "image/png"]


@dataclass
class FileWritten:
    """The answer of an upload."""

    path: str
    size: int
    sha256: str
    raw: Dict[str, Any]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileWritten":
        return cls(path=d.get("path", ""), size=int(d.get("size", 0)), sha256=d.get("sha256", ""), raw=d)


@dataclass
class Snapshot:
    """A saved state of a sandbox."""

    id: str
    sandbox_id: str
    state: str
    raw: Dict[str, Any]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Snapshot":
        return cls(id=d.get("id", ""), sandbox_id=d.get("sandbox_id", ""), state=d.get("state", ""), raw=d)


@dataclass
class BrowserResult:
    """What a batch of browser actions did. The actions ran in order and
    stopped at the first that failed (``ok`` false, its ``error`` in the
    last of ``results``). ``screenshots`` are the bytes of every
    screenshot the batch took, in order (answered inline with ``keep``
    false, else read back from the artifact the service kept)."""

    ok: bool
    url: str
    title: str
    results: List[Dict[str, Any]]
    screenshots: List[bytes]
    raw: Dict[str, Any]

    @property
    def error(self) -> str:
        """Why the batch stopped ("" when every action ran)."""
        for r in self.results:
            if not r.get("ok"):
                return str(r.get("error", ""))
        return ""


@dataclass
class ComputerResult:
    """What a batch of computer actions on a desktop did (see
    BrowserResult for ``ok``). ``screenshots`` are the PNG bytes of every
    screenshot or zoom step, then the one after the batch when asked."""

    ok: bool
    completed: int
    results: List[Dict[str, Any]]
    screenshots: List[bytes]
    raw: Dict[str, Any]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ComputerResult":
        results = list(d.get("results") or [])
        shots = [base64.b64decode(r["screenshot"]) for r in results if r.get("screenshot")]
        if d.get("screenshot"):
            shots.append(base64.b64decode(d["screenshot"]))
        return cls(ok=bool(d.get("ok")), completed=int(d.get("completed", 0)), results=results,
                   screenshots=shots, raw=d)

    @property
    def error(self) -> str:
        """Why the batch stopped ("" when every action ran)."""
        for r in self.results:
            if not r.get("ok"):
                return str(r.get("error", ""))
        return ""


def browser_shots(d: Dict[str, Any]) -> List[Any]:
    """The screenshots of a browser answer in order: bytes when inline,
    else the id of the artifact that keeps it."""
    out: List[Any] = []
    for r in d.get("results") or []:
        v = r.get("value")
        if r.get("type") == "screenshot" and isinstance(v, dict) and v.get("data"):
            out.append(base64.b64decode(v["data"]))
        elif r.get("type") == "screenshot" and isinstance(r.get("artifact"), dict):
            out.append(str(r["artifact"]["id"]))
    return out


def browser_result(d: Dict[str, Any], shots: List[bytes]) -> BrowserResult:
    return BrowserResult(ok=bool(d.get("ok")), url=str(d.get("url", "")), title=str(d.get("title", "")),
                         results=list(d.get("results") or []), screenshots=shots, raw=d)
