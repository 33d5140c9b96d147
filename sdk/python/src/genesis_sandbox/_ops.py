"""Request builders of every call, shared by the sync and async clients."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Union
from urllib.parse import quote

from ._core import MCP_PROTOCOL, Request, call_timeout, compact, exec_body, range_header, seg

# A volume mount: {"volume": name, "path": "/mnt/x", "read_only": bool}, or
# the same as the CLI's "name:/mnt/x" or "name:/mnt/x:ro".
VolumeMount = Union[str, Mapping[str, Any]]


def volume_mounts(volumes: Optional[Iterable[VolumeMount]]) -> Optional[List[Dict[str, Any]]]:
    """The ``volumes`` of a create or lease body (None when there are none)."""
    if volumes is None:
        return None
    out: List[Dict[str, Any]] = []
    for v in volumes:
        if isinstance(v, str):
            parts = v.split(":")
            if len(parts) not in (2, 3) or not parts[0] or not parts[1] or (len(parts) == 3 and parts[2] != "ro"):
                raise ValueError(f"volume mount {v!r}: want NAME:/PATH or NAME:/PATH:ro")
            m: Dict[str, Any] = {"volume": parts[0], "path": parts[1]}
            if len(parts) == 3:
                m["read_only"] = True
            out.append(m)
        else:
            out.append(compact(dict(v)))
    return out or None


def create_sandbox(
    profile: str,
    runtime: Optional[str],
    risk_level: Optional[str],
    ttl_seconds: Optional[int],
    env: Optional[Mapping[str, str]],
    metadata: Optional[Mapping[str, str]],
    extra: Mapping[str, Any],
    idempotency_key: Optional[str],
    volumes: Optional[Iterable[VolumeMount]] = None,
) -> Request:
    body = compact({"profile": profile, "runtime": runtime, "risk_level": risk_level,
                    "ttl_seconds": ttl_seconds, "env": dict(env) if env else None,
                    "metadata": dict(metadata) if metadata else None,
                    "volumes": volume_mounts(volumes)})
    body.update(compact(extra))
    r = Request("POST", "/v1/sandboxes", json=body)
    if idempotency_key:
        # The API makes a create with an Idempotency-Key safe to repeat.
        r.headers["Idempotency-Key"] = idempotency_key
        r.idempotent = True
    return r


def get_sandbox(sid: str) -> Request:
    return Request("GET", "/v1/sandboxes/" + seg(sid), idempotent=True)


def list_sandboxes(states: Iterable[str], profile: Optional[str], metadata: Optional[Mapping[str, str]]) -> Request:
    params = [("state", s) for s in states]
    if profile:
        params.append(("profile", profile))
    for k in sorted(metadata or {}):
        params.append(("metadata", f"{k}={(metadata or {})[k]}"))
    return Request("GET", "/v1/sandboxes", params=params, idempotent=True)


def delete_sandbox(sid: str) -> Request:
    # Documented idempotent: deleting a destroyed sandbox is 204 too.
    return Request("DELETE", "/v1/sandboxes/" + seg(sid), idempotent=True)


def exec_(sid: str, command: Union[str, Iterable[str], None], script: Optional[str],
          stdin: Union[str, bytes, None], extra: Mapping[str, Any]) -> Request:
    r = Request("POST", f"/v1/sandboxes/{seg(sid)}/exec", json=exec_body(command, script, stdin, extra))
    if not extra.get("background"):
        r.timeout = call_timeout(extra.get("timeout_ms"))
    return r


def exec_stream(sid: str, command: Union[str, Iterable[str], None], script: Optional[str],
                stdin: Union[str, bytes, None], extra: Mapping[str, Any], encoding: str) -> Request:
    r = exec_(sid, command, script, stdin, extra)
    r.params = [("encoding", encoding)]
    r.headers.update({"Accept": "text/event-stream", "Cache-Control": "no-cache"})
    return r


def create_session(sid: str) -> Request:
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/sessions")


def session_exec(session_id: str, command: Union[str, Iterable[str], None], script: Optional[str],
                 stdin: Union[str, bytes, None], extra: Mapping[str, Any]) -> Request:
    r = Request("POST", f"/v1/sessions/{seg(session_id)}/exec", json=exec_body(command, script, stdin, extra))
    r.timeout = call_timeout(extra.get("timeout_ms"))
    return r


def delete_session(session_id: str) -> Request:
    # Documented idempotent: closing a closed session is 204 too.
    return Request("DELETE", "/v1/sessions/" + seg(session_id), idempotent=True)


def sandbox_action(sid: str, action: str, body: Optional[Dict[str, Any]] = None) -> Request:
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/{action}", json=body)


def create_snapshot(sid: str, name: Optional[str], memory: Optional[bool]) -> Request:
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/snapshots", json=compact({"name": name, "memory": memory}))


def list_snapshots(sid: Optional[str]) -> Request:
    path = f"/v1/sandboxes/{seg(sid)}/snapshots" if sid else "/v1/snapshots"
    return Request("GET", path, idempotent=True)


def get_snapshot(snap_id: str) -> Request:
    return Request("GET", "/v1/snapshots/" + seg(snap_id), idempotent=True)


def delete_snapshot(snap_id: str) -> Request:
    return Request("DELETE", "/v1/snapshots/" + seg(snap_id), idempotent=True)


def fork(sid: str, count: int, ttl_seconds: Optional[int], metadata: Optional[Mapping[str, str]]) -> Request:
    if count <= 0:
        raise ValueError("fork count must be positive")
    body = compact({"count": count, "ttl_seconds": ttl_seconds, "metadata": dict(metadata) if metadata else None})
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/fork", json=body)


def get_job(job_id: str) -> Request:
    return Request("GET", "/v1/jobs/" + seg(job_id), idempotent=True)


def cancel_job(job_id: str) -> Request:
    return Request("POST", f"/v1/jobs/{seg(job_id)}/cancel")


def job_logs_path(job_id: str) -> str:
    return f"/v1/jobs/{seg(job_id)}/logs"


def write_stdin(job_id: str, content: Any) -> Request:
    return Request("PUT", f"/v1/jobs/{seg(job_id)}/stdin", content=content)


def close_stdin(job_id: str) -> Request:
    # Documented idempotent.
    return Request("POST", f"/v1/jobs/{seg(job_id)}/stdin/close", idempotent=True)


def create_context(sid: str, language: str) -> Request:
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/contexts", json={"language": language})


def run_code(ctx_id: str, code: str, timeout_ms: Optional[int]) -> Request:
    r = Request("POST", f"/v1/contexts/{seg(ctx_id)}/run", json=compact({"code": code, "timeout_ms": timeout_ms}))
    r.timeout = call_timeout(timeout_ms)
    return r


def delete_context(ctx_id: str) -> Request:
    return Request("DELETE", "/v1/contexts/" + seg(ctx_id), idempotent=True)


def write_file(sid: str, path: str, content: Any, size: Optional[int], mode: Optional[str], overwrite: bool) -> Request:
    params = [("path", path)]
    if mode:
        params.append(("mode", mode))
    if not overwrite:
        params.append(("overwrite", "false"))
    r = Request("PUT", f"/v1/sandboxes/{seg(sid)}/files", params=params, content=content)
    if size is not None and size >= 0:
        r.headers["Content-Length"] = str(size)
    return r


def read_file(sid: str, path: str, offset: int, length: Optional[int]) -> Request:
    r = Request("GET", f"/v1/sandboxes/{seg(sid)}/files", params=[("path", path)], idempotent=True)
    r.headers["Accept"] = "*/*"
    if offset or length is not None:
        r.headers["Range"] = range_header(offset, length)
    return r


def list_files(sid: str, path: str) -> Request:
    return Request("GET", f"/v1/sandboxes/{seg(sid)}/files/list", params=[("path", path)], idempotent=True)


def acquire_lease(profile: str, runtime: Optional[str], risk_level: Optional[str], ttl_seconds: Optional[int],
                  holder: Optional[str], wait_seconds: Optional[int], metadata: Optional[Mapping[str, str]],
                  volumes: Optional[Iterable[VolumeMount]] = None) -> Request:
    body = compact({"profile": profile, "runtime": runtime, "risk_level": risk_level, "ttl_seconds": ttl_seconds,
                    "holder": holder, "wait_seconds": wait_seconds,
                    "metadata": dict(metadata) if metadata else None, "volumes": volume_mounts(volumes)})
    return Request("POST", "/v1/leases", json=body)


def get_lease(lease_id: str) -> Request:
    return Request("GET", "/v1/leases/" + seg(lease_id), idempotent=True)


def renew_lease(lease_id: str, ttl_seconds: Optional[int]) -> Request:
    return Request("POST", f"/v1/leases/{seg(lease_id)}/renew", json=compact({"ttl_seconds": ttl_seconds}))


def release_lease(lease_id: str) -> Request:
    return Request("DELETE", "/v1/leases/" + seg(lease_id), idempotent=True)


def whoami() -> Request:
    return Request("GET", "/v1/whoami", idempotent=True)


def list_artifacts(job_id: str) -> Request:
    return Request("GET", f"/v1/jobs/{seg(job_id)}/artifacts", idempotent=True)


def get_artifact(artifact_id: str) -> Request:
    return Request("GET", f"/v1/artifacts/{seg(artifact_id)}/meta", idempotent=True)


def read_artifact(artifact_id: str, offset: int, length: Optional[int]) -> Request:
    r = Request("GET", "/v1/artifacts/" + seg(artifact_id), idempotent=True)
    r.headers["Accept"] = "*/*"
    if offset or length is not None:
        r.headers["Range"] = range_header(offset, length)
    return r


# ---- ports -----------------------------------------------------------------

def port_link(sid: str, port: int, ttl_seconds: int) -> Request:
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/ports/{int(port)}/links", json={"ttl_seconds": ttl_seconds})


# ---- browser and desktop ---------------------------------------------------

def browser_status(sid: str) -> Request:
    return Request("GET", f"/v1/sandboxes/{seg(sid)}/browser", idempotent=True)


def browser_actions(sid: str, actions: Iterable[Mapping[str, Any]]) -> Request:
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/browser/actions", json={"actions": [dict(a) for a in actions]})


def computer_actions(sid: str, actions: Iterable[Mapping[str, Any]], screenshot: bool,
                     display: Optional[Mapping[str, int]]) -> Request:
    body = compact({"actions": [dict(a) for a in actions], "screenshot": screenshot or None,
                    "display": dict(display) if display else None})
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/computer/actions", json=body)


def get_control(sid: str, after: Optional[int], wait_ms: Optional[int]) -> Request:
    params = []
    if after is not None:
        params.append(("after", str(after)))
    if wait_ms is not None:
        params.append(("wait_ms", str(wait_ms)))
    r = Request("GET", f"/v1/sandboxes/{seg(sid)}/control", params=params, idempotent=True)
    if wait_ms is not None:
        r.timeout = wait_ms / 1000 + 30
    return r


def take_control(sid: str, holder: str, reason: Optional[str], allow_screenshots: Optional[bool]) -> Request:
    body = compact({"holder": holder, "reason": reason, "allow_screenshots": allow_screenshots})
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/control", json=body)


def release_control(sid: str) -> Request:
    # Documented idempotent.
    return Request("DELETE", f"/v1/sandboxes/{seg(sid)}/control", idempotent=True)


# ---- trace -----------------------------------------------------------------

def trace_page(sid: str, after: int, limit: int) -> Request:
    params = [("format", "json"), ("follow", "false"), ("after", str(after)), ("limit", str(limit))]
    return Request("GET", f"/v1/sandboxes/{seg(sid)}/trace", params=params, idempotent=True)


def add_trace_event(sid: str, kind: str, actor: Optional[str], data: Optional[Mapping[str, Any]]) -> Request:
    body = compact({"kind": kind, "actor": actor, "data": dict(data) if data is not None else None})
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/trace/events", json=body)


def export_trace(sid: str) -> Request:
    r = Request("GET", f"/v1/sandboxes/{seg(sid)}/trace/export", idempotent=True)
    r.headers["Accept"] = "application/gzip, application/problem+json"
    return r


# ---- diff and patch --------------------------------------------------------

def diff(sid: str, base: Optional[str], patch: bool) -> Request:
    params = [("base", base)] if base else []
    if patch:
        params.append(("format", "patch"))
    r = Request("GET", f"/v1/sandboxes/{seg(sid)}/diff", params=params, idempotent=True)
    if patch:
        r.headers["Accept"] = "text/x-patch, application/problem+json"
    return r


def apply_patch(sid: str, patch: str, dry_run: bool) -> Request:
    return Request("POST", f"/v1/sandboxes/{seg(sid)}/patch", json=compact({"patch": patch, "dry_run": dry_run or None}))


# ---- MCP servers -----------------------------------------------------------

def create_mcp_server(catalog: Optional[str], spec: Optional[Mapping[str, Any]], extra: Mapping[str, Any]) -> Request:
    if (catalog is None) == (spec is None):
        raise ValueError("give exactly one of catalog and spec")
    body = compact({"catalog": catalog, "spec": dict(spec) if spec else None})
    body.update(compact(extra))
    return Request("POST", "/v1/mcp/servers", json=body)


def list_mcp_servers() -> Request:
    return Request("GET", "/v1/mcp/servers", idempotent=True)


def get_mcp_server(server_id: str) -> Request:
    return Request("GET", "/v1/mcp/servers/" + seg(server_id), idempotent=True)


def delete_mcp_server(server_id: str) -> Request:
    return Request("DELETE", "/v1/mcp/servers/" + seg(server_id), idempotent=True)


def mcp_server_tools(server_id: str) -> Request:
    return Request("GET", f"/v1/mcp/servers/{seg(server_id)}/tools", idempotent=True)


def mcp_message(endpoint: str, token: str, session: str, message: Mapping[str, Any]) -> Request:
    """One JSON-RPC message to an MCP server instance's Streamable HTTP
    endpoint, under the instance's own token (not the API key)."""
    r = Request("POST", endpoint, json=dict(message))
    r.headers.update({"Authorization": "Bearer " + token, "Accept": "application/json, text/event-stream",
                      "MCP-Protocol-Version": MCP_PROTOCOL})
    if session:
        r.headers["Mcp-Session-Id"] = session
    return r


def mcp_end(endpoint: str, token: str, session: str) -> Request:
    r = Request("DELETE", endpoint, idempotent=True)
    r.headers.update({"Authorization": "Bearer " + token, "Mcp-Session-Id": session,
                      "MCP-Protocol-Version": MCP_PROTOCOL})
    return r


# ---- skills ----------------------------------------------------------------

def push_skill(archive: Any, content_type: str) -> Request:
    r = Request("POST", "/v1/skills", content=archive)
    r.headers["Content-Type"] = content_type
    return r


def list_skills() -> Request:
    return Request("GET", "/v1/skills", idempotent=True)


def get_skill(name: str) -> Request:
    return Request("GET", "/v1/skills/" + seg(name), idempotent=True)


def run_skill(name: str, script: str, extra: Mapping[str, Any]) -> Request:
    body = compact({"script": script})
    body.update(compact(extra))
    r = Request("POST", f"/v1/skills/{seg(name)}/runs", json=body)
    r.timeout = call_timeout(extra.get("timeout_ms") or 60000)
    return r


# ---- plain calls -----------------------------------------------------------
# The rest of the API: JSON in, JSON out. Reads are idempotent; writes are
# sent once.

def get(path: str, params: Optional[Mapping[str, Any]] = None) -> Request:
    ps = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in compact(params or {}).items()]
    return Request("GET", path, params=ps, idempotent=True)


def post(path: str, body: Optional[Mapping[str, Any]] = None) -> Request:
    return Request("POST", path, json=compact(body or {}))


def send(method: str, path: str, body: Optional[Mapping[str, Any]] = None, if_match: Optional[str] = None) -> Request:
    r = Request(method, path, json=compact(body) if body is not None else None)
    if if_match:
        r.headers["If-Match"] = if_match
    return r


def sbx(sid: str, rest: str) -> str:
    return f"/v1/sandboxes/{seg(sid)}/{rest}"


def read_archive(sid: str, path: str) -> Request:
    r = Request("GET", sbx(sid, "files/archive"), params=[("path", path)], idempotent=True)
    r.headers["Accept"] = "application/x-tar, application/problem+json"
    return r


def extract_archive(sid: str, path: str, content: Any, content_type: str) -> Request:
    r = Request("POST", sbx(sid, "files/extract"), params=[("path", path)], content=content)
    r.headers["Content-Type"] = content_type
    return r


def upload_files(sid: str, path: str, content: bytes, content_type: str, mode: Optional[str],
                 overwrite: bool) -> Request:
    params = [("path", path)]
    if mode:
        params.append(("mode", mode))
    if not overwrite:
        params.append(("overwrite", "false"))
    r = Request("POST", sbx(sid, "files"), params=params, content=content)
    r.headers["Content-Type"] = content_type
    return r


def skill_file(name: str, path: str, revision: Optional[int]) -> Request:
    params = [("revision", str(revision))] if revision is not None else []
    r = Request("GET", f"/v1/skills/{seg(name)}/files/{quote(path.lstrip('/'), safe='/')}", params=params,
                idempotent=True)
    r.headers["Accept"] = "*/*"
    return r


# ---- volumes ---------------------------------------------------------------

def vol(name: str, rest: str = "") -> str:
    return "/v1/volumes/" + seg(name) + (("/" + rest) if rest else "")


def create_volume(name: str, size_mb: int) -> Request:
    return Request("POST", "/v1/volumes", json={"name": name, "size_mb": size_mb})


def delete_volume(name: str) -> Request:
    # Documented idempotent: deleting a missing volume is 204 too.
    return Request("DELETE", vol(name), idempotent=True)


def write_volume_file(name: str, path: str, content: Any, size: Optional[int], mode: Optional[str],
                      overwrite: bool) -> Request:
    params = [("path", path)]
    if mode:
        params.append(("mode", mode))
    if not overwrite:
        params.append(("overwrite", "false"))
    r = Request("PUT", vol(name, "files"), params=params, content=content)
    if size is not None and size >= 0:
        r.headers["Content-Length"] = str(size)
    return r


def read_volume_file(name: str, path: str, offset: int, length: Optional[int]) -> Request:
    r = Request("GET", vol(name, "files"), params=[("path", path)], idempotent=True)
    r.headers["Accept"] = "*/*"
    if offset or length is not None:
        r.headers["Range"] = range_header(offset, length)
    return r
