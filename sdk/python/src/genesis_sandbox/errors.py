"""Exceptions raised by the Genesis Sandbox client.

Every non-2xx answer of the service becomes a :class:`GenesisError` (or a
subclass chosen by the problem's stable ``code``, falling back to one chosen
by the HTTP status). Catch the subclass for the case you handle, or
``GenesisError`` and look at ``.code``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Type


class GenesisError(Exception):
    """A non-2xx answer of the service (an ``application/problem+json``).

    ``status`` is the HTTP status, ``code`` the problem's stable code (for
    example ``"not_found"``), ``detail`` the human text and
    ``request_id`` the ``X-Request-ID`` of the answer (quote it when asking
    the operator about a failure).
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        request_id: str = "",
        title: str = "",
        problem: Optional[Mapping[str, Any]] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.request_id = request_id
        self.title = title
        self.problem: Dict[str, Any] = dict(problem or {})
        self.retry_after = retry_after
        super().__init__(f"{status} {code}: {detail or title}")


class BadRequest(GenesisError):
    """400: the request was malformed; nothing changed."""


class Unauthorized(GenesisError):
    """401: no API key or a wrong one."""


class Forbidden(GenesisError):
    """403: the key may not do this (policy, risk level, admin only)."""


class NotFound(GenesisError):
    """404: no such sandbox, job, file, snapshot, … for this key."""


class Conflict(GenesisError):
    """409: the resource is not in a state that allows the call."""


class PreconditionFailed(GenesisError):
    """412: the If-Match given no longer names the current version."""


class PayloadTooLarge(GenesisError):
    """413: a body over the service's limit."""


class RangeNotSatisfiable(GenesisError):
    """416: a byte range outside the file."""


class QuotaExceeded(GenesisError):
    """A tenant quota is used up (code ``quota_exceeded``)."""


class RateLimited(GenesisError):
    """429: too many requests; ``retry_after`` says when to try again."""


class ServiceUnavailable(GenesisError):
    """503: the service cannot serve the call now (capacity, a runtime)."""


class CapacityExhausted(ServiceUnavailable):
    """503 ``capacity_exhausted``: the host has no room for a sandbox."""


class RuntimeUnavailable(Conflict):
    """``runtime_unavailable``: the runtime asked for is not usable."""


class ControlHeld(Conflict):
    """409 ``control_held``: a person holds control of the desktop; the
    agent waits (``sandbox.wait_for_control``) and acts after the release."""


class PatchConflict(Conflict):
    """409 ``patch_conflict``: a hunk did not apply; nothing changed."""


class VolumeInUse(Conflict):
    """409 ``volume_in_use``: a sandbox mounts the volume; delete it after
    that sandbox ends."""


class VolumeBusy(Conflict):
    """409 ``volume_busy``: the volume has a writer (a sandbox holds it
    writable), so another mount, an upload or a delete through the API waits."""


class StreamError(Exception):
    """A log stream could not be read to its end (a protocol error, or the
    connection kept failing and resuming was not asked for)."""


# Stable problem codes with a class of their own. A code not listed here
# takes the class of its HTTP status.
_BY_CODE: Dict[str, Type[GenesisError]] = {
    "quota_exceeded": QuotaExceeded,
    "capacity_exhausted": CapacityExhausted,
    "runtime_unavailable": RuntimeUnavailable,
    "rate_limited": RateLimited,
    "unauthorized": Unauthorized,
    "control_held": ControlHeld,
    "patch_conflict": PatchConflict,
    "volume_in_use": VolumeInUse,
    "volume_busy": VolumeBusy,
}

_BY_STATUS: Dict[int, Type[GenesisError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    413: PayloadTooLarge,
    416: RangeNotSatisfiable,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_class(status: int, code: str) -> Type[GenesisError]:
    """Returns the exception class for a problem of this status and code."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    return _BY_STATUS.get(status, GenesisError)


def from_response(status: int, headers: Mapping[str, str], body: bytes) -> GenesisError:
    """Builds the exception for a non-2xx answer with the given body."""
    problem: Dict[str, Any] = {}
    try:
        decoded = json.loads(body.decode("utf-8")) if body else None
        if isinstance(decoded, dict):
            problem = decoded
    except (ValueError, UnicodeDecodeError):
        pass
    code = str(problem.get("code") or "")
    title = str(problem.get("title") or "")
    detail = str(problem.get("detail") or "")
    if not problem:
        text = body.decode("utf-8", "replace")
        detail = " ".join(text.split())[:200]
    if not code:
        code = _status_code_name(status)
    request_id = headers.get("x-request-id") or str(problem.get("request_id") or "")
    retry_after: Optional[float] = None
    ra = headers.get("retry-after")
    if ra and ra.strip().isdigit():
        retry_after = float(ra.strip())
    cls = error_class(status, code)
    return cls(status, code, detail, request_id, title, problem, retry_after)


def _status_code_name(status: int) -> str:
    names = {
        400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
        409: "conflict", 412: "precondition_failed", 413: "payload_too_large",
        416: "range_not_satisfiable", 429: "too_many_requests", 500: "internal_error",
        502: "bad_gateway", 503: "unavailable", 504: "gateway_timeout",
    }
    return names.get(status, f"http_{status}")
