"""The asynchronous client: the same calls as the sync one, awaited."""

from __future__ import annotations

import asyncio
from typing import (Any, AsyncIterator, Awaitable, BinaryIO, Callable, Dict, Generator, Generic, Iterable, List,
                    Mapping, Optional, TypeVar, Union)

import httpx

from . import _core, _ops, _transport, errors
from ._core import Request
from ._ws import AsyncTerminal
from .types import (BrowserResult, CodeResult, ComputerResult, ExecResult, FileWritten, LogEvent, Snapshot,
                    browser_result, browser_shots)

Body = Union[bytes, str, BinaryIO, Iterable[bytes], AsyncIterator[bytes]]
CHUNK = 1 << 20
T = TypeVar("T")


def _iter_body(data: Any) -> Any:
    """bytes and str go as they are; a file, an iterator or an async
    iterator is streamed."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "__aiter__"):
        return data
    if hasattr(data, "read"):
        f: Any = data

        async def read_file() -> AsyncIterator[bytes]:
            while True:
                b = f.read(CHUNK)
                if not b:
                    return
                yield b

        return read_file()
    it = iter(data)

    async def from_iter() -> AsyncIterator[bytes]:
        for b in it:
            yield b

    return from_iter()


class _Pending(Generic[T]):
    """An object being created: await it for the object, or use it as an
    async context manager that ends the object (destroy, release) on exit."""

    def __init__(self, make: Callable[[], Awaitable[T]]) -> None:
        self._make = make
        self._obj: Optional[T] = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._make().__await__()

    async def __aenter__(self) -> T:
        self._obj = await self._make()
        return self._obj

    async def __aexit__(self, *exc: Any) -> None:
        if self._obj is not None:
            await self._obj.__aexit__(*exc)  # type: ignore[attr-defined]


async def _stream(client: "AsyncGenesis", req: Request, chunk_size: int) -> AsyncIterator[bytes]:
    """Sends a GET of raw content and yields its body in chunks."""
    resp = await client._send(req, stream=True)
    try:
        if resp.status_code not in (200, 206):
            raise errors.from_response(resp.status_code, resp.headers, await resp.aread())
        async for chunk in resp.aiter_bytes(chunk_size):
            yield chunk
    finally:
        await resp.aclose()


class AsyncGenesis:
    """An asyncio client of the Genesis Sandbox HTTP API (see Genesis).

    ``base_url`` and ``api_key`` default to ``GENESIS_URL`` (else
    http://127.0.0.1:8080) and ``GENESIS_API_KEY``. ``act_as`` makes an
    admin key act for a tenant. Calls the API documents as idempotent
    (reads, deletes, a create with an idempotency key) are sent again up to
    ``retries`` times after a transport error or a 429/502/503/504.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: float = 120.0,
        retries: int = _core.DEFAULT_RETRIES,
        act_as: str = "",
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self.base_url, self.api_key = _core.resolve_config(base_url, api_key)
        self.act_as = act_as
        self.retries = retries
        self.timeout = timeout
        self._own = http_client is None
        timeouts = httpx.Timeout(timeout, connect=10.0)
        self._http = http_client or httpx.AsyncClient(timeout=timeouts, transport=_transport.async_transport())

    async def close(self) -> None:
        """Closes the connections (only those of a client it made itself)."""
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncGenesis":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ---- transport -------------------------------------------------------

    def _build(self, req: Request, timeout: Optional[httpx.Timeout] = None) -> httpx.Request:
        content = _core.encode_json(req)
        if req.content is not None:
            content = req.content
        if timeout is None and req.timeout is not None:
            timeout = httpx.Timeout(max(req.timeout, self.timeout), connect=10.0)
        kw: Dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        return self._http.build_request(
            req.method, self.base_url + req.path, params=httpx.QueryParams(tuple(req.params)) if req.params else None,
            headers=_core.build_headers(req, self.api_key, self.act_as), content=content, **kw)

    async def _send(self, req: Request, stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            try:
                resp = await self._http.send(self._build(req), stream=stream)
            except httpx.TransportError:
                if not req.idempotent or attempt >= self.retries:
                    raise
                await asyncio.sleep(_core.backoff(attempt))
                attempt += 1
                continue
            if req.idempotent and resp.status_code in _core.RETRY_STATUSES and attempt < self.retries:
                ra = resp.headers.get("retry-after", "")
                await resp.aclose()
                await asyncio.sleep(_core.backoff(attempt, float(ra) if ra.isdigit() else None))
                attempt += 1
                continue
            return resp

    async def _call(self, req: Request) -> Any:
        resp = await self._send(req)
        return _core.decode_json(resp.status_code, resp.headers, resp.content)

    async def _json(self, req: Request) -> Dict[str, Any]:
        d = await self._call(req)
        return dict(d) if isinstance(d, dict) else {}

    async def _items(self, req: Request) -> List[Dict[str, Any]]:
        return list((await self._json(req)).get("items") or [])

    # ---- service ---------------------------------------------------------

    async def whoami(self) -> Dict[str, Any]:
        """The tenant of this client's key and whether it is an admin key."""
        d: Dict[str, Any] = await self._call(_ops.whoami())
        return d

    async def capabilities(self) -> Dict[str, Any]:
        """What the service's driver can do: runtimes, checkpoint, risk policy, …"""
        return await self._json(_ops.get("/v1/capabilities"))

    async def profiles(self) -> List[Dict[str, Any]]:
        """The sandbox profiles this key may use."""
        return await self._items(_ops.get("/v1/profiles"))

    async def images(self) -> List[Dict[str, Any]]:
        """Each profile's image and whether it is present and current."""
        return await self._items(_ops.get("/v1/images"))

    async def pools(self) -> Dict[str, Any]:
        """The warm pools (``items``) and whether they are ``draining``."""
        return await self._json(_ops.get("/v1/pools"))

    async def drain_pool(self, name: str) -> Dict[str, Any]:
        """Destroys a pool's idle sandboxes (admin)."""
        return await self._json(_ops.post(f"/v1/pools/{_core.seg(name)}/drain"))

    async def audit(self, *, tenant: Optional[str] = None, action: Optional[str] = None,
                    target: Optional[str] = None, since: Optional[str] = None, until: Optional[str] = None,
                    result: Optional[str] = None, order: Optional[str] = None, cursor: Optional[str] = None,
                    limit: int = 500) -> AsyncIterator[Dict[str, Any]]:
        """Yields the audit log's entries that match, a page at a time (an
        admin key sees every tenant's)."""
        while True:
            d = await self._json(_ops.get("/v1/audit", {
                "tenant": tenant, "action": action, "target": target, "since": since, "until": until,
                "result": result, "order": order, "cursor": cursor, "limit": limit}))
            for entry in d.get("items") or []:
                yield entry
            cursor = d.get("next_cursor")
            if not d.get("has_more") or not cursor:
                return

    async def replay_trace(self, trace_id: str, target_sandbox: str, *,
                           threshold: Optional[float] = None) -> Dict[str, Any]:
        """Replays a sandbox's recorded browser actions into another sandbox."""
        return await self._json(_ops.post(f"/v1/traces/{_core.seg(trace_id)}/replay",
                                          {"target_sandbox": target_sandbox, "threshold": threshold}))

    # ---- tenants and API keys (admin) ------------------------------------

    async def create_tenant(self, name: str, **fields: Any) -> Dict[str, Any]:
        """Creates a tenant; fields: weight, min_risk_level,
        max_tool_risk_level, admin, quotas (max_sandboxes, max_cpu,
        max_memory_mb, max_leases, and for named volumes max_volumes and
        max_volume_mb, which narrow the service's per-tenant volume limits)."""
        return await self._json(_ops.post("/v1/tenants", {"name": name, **fields}))

    async def list_tenants(self) -> List[Dict[str, Any]]:
        return await self._items(_ops.get("/v1/tenants"))

    async def get_tenant(self, name: str) -> Dict[str, Any]:
        return await self._json(_ops.get("/v1/tenants/" + _core.seg(name)))

    async def update_tenant(self, name: str, *, if_match: Optional[str] = None, **fields: Any) -> Dict[str, Any]:
        """Changes the fields given (weight, quotas, …); with if_match only
        if the tenant is still at that version."""
        return await self._json(_ops.send("PATCH", "/v1/tenants/" + _core.seg(name), fields, if_match))

    async def delete_tenant(self, name: str, *, if_match: Optional[str] = None) -> None:
        await self._call(_ops.send("DELETE", "/v1/tenants/" + _core.seg(name), None, if_match))

    async def create_api_key(self, tenant: str, *, description: Optional[str] = None,
                             scopes: Optional[Iterable[str]] = None) -> Dict[str, Any]:
        """Issues an API key for a tenant; its secret (``key``) is only in this answer."""
        body = {"description": description, "scopes": list(scopes) if scopes is not None else None}
        return await self._json(_ops.post(f"/v1/tenants/{_core.seg(tenant)}/keys", body))

    async def list_api_keys(self, tenant: str) -> List[Dict[str, Any]]:
        return await self._items(_ops.get(f"/v1/tenants/{_core.seg(tenant)}/keys"))

    async def revoke_api_key(self, tenant: str, key_id: str) -> None:
        await self._call(_ops.send("DELETE", f"/v1/tenants/{_core.seg(tenant)}/keys/{_core.seg(key_id)}"))

    # ---- sandboxes -------------------------------------------------------

    async def create_sandbox(
        self,
        profile: str,
        *,
        runtime: Optional[str] = None,
        risk_level: Optional[str] = None,
        ttl_seconds: Optional[int] = None,
        env: Optional[Mapping[str, str]] = None,
        metadata: Optional[Mapping[str, str]] = None,
        idempotency_key: Optional[str] = None,
        volumes: Optional[Iterable[_ops.VolumeMount]] = None,
        **extra: Any,
    ) -> "Sandbox":
        """Creates a sandbox (POST /v1/sandboxes). ``volumes`` mounts named
        volumes: ``{"volume": "cache", "path": "/mnt/cache", "read_only":
        True}`` or ``"cache:/mnt/cache:ro"``. Further keyword arguments
        (resources, network, wait_seconds, …) go into the body as given."""
        d = await self._call(_ops.create_sandbox(profile, runtime, risk_level, ttl_seconds, env, metadata, extra,
                                           idempotency_key, volumes))
        return Sandbox(self, d)

    def sandbox(self, profile: str, **kwargs: Any) -> "_Pending[Sandbox]":
        """Creates a sandbox: ``async with client.sandbox(...) as sb`` destroys
        it when the block ends; ``await client.sandbox(...)`` just creates it."""
        return _Pending(lambda: self.create_sandbox(profile, **kwargs))

    async def get_sandbox(self, sandbox_id: str) -> "Sandbox":
        return Sandbox(self, await self._call(_ops.get_sandbox(sandbox_id)))

    async def get_session(self, session_id: str) -> "Session":
        return Session(self, await self._json(_ops.get("/v1/sessions/" + _core.seg(session_id))))

    async def get_context(self, context_id: str) -> "CodeContext":
        return CodeContext(self, await self._json(_ops.get("/v1/contexts/" + _core.seg(context_id))))

    async def list_sandboxes(self, *, states: Iterable[str] = (), profile: Optional[str] = None,
                             metadata: Optional[Mapping[str, str]] = None) -> List["Sandbox"]:
        d = await self._call(_ops.list_sandboxes(states, profile, metadata))
        return [Sandbox(self, s) for s in d.get("items") or []]

    async def delete_sandbox(self, sandbox_id: str) -> None:
        await self._call(_ops.delete_sandbox(sandbox_id))

    # ---- jobs ------------------------------------------------------------

    async def job(self, job_id: str) -> "Job":
        """The job of this id (its record is fetched)."""
        return Job(self, await self._call(_ops.get_job(job_id)))

    # ---- snapshots -------------------------------------------------------

    async def list_snapshots(self, sandbox_id: Optional[str] = None) -> List[Snapshot]:
        d = await self._call(_ops.list_snapshots(sandbox_id))
        return [Snapshot.from_json(s) for s in d.get("items") or []]

    async def get_snapshot(self, snapshot_id: str) -> Snapshot:
        return Snapshot.from_json(await self._call(_ops.get_snapshot(snapshot_id)))

    async def delete_snapshot(self, snapshot_id: str) -> None:
        await self._call(_ops.delete_snapshot(snapshot_id))

    # ---- artifacts -------------------------------------------------------

    async def list_artifacts(self, job_id: str) -> List[Dict[str, Any]]:
        """The artifacts a job kept (its ``artifacts`` paths, collected when it ended)."""
        d: Dict[str, Any] = await self._call(_ops.list_artifacts(job_id))
        return list(d.get("items") or [])

    async def get_artifact(self, artifact_id: str) -> Dict[str, Any]:
        """The metadata of an artifact (path, size, sha256, mime, …)."""
        d: Dict[str, Any] = await self._call(_ops.get_artifact(artifact_id))
        return d

    def iter_artifact(self, artifact_id: str, *, offset: int = 0, length: Optional[int] = None,
                      chunk_size: int = CHUNK) -> AsyncIterator[bytes]:
        """Streams an artifact's content (or length bytes from offset)."""
        return _stream(self, _ops.read_artifact(artifact_id, offset, length), chunk_size)

    async def read_artifact(self, artifact_id: str, *, offset: int = 0, length: Optional[int] = None) -> bytes:
        return b"".join([c async for c in self.iter_artifact(artifact_id, offset=offset, length=length)])

    # ---- leases ----------------------------------------------------------

    async def get_lease(self, lease_id: str) -> "Lease":
        return Lease(self, await self._call(_ops.get_lease(lease_id)))

    async def list_leases(self, *, state: Optional[str] = None) -> List["Lease"]:
        return [Lease(self, d) for d in await self._items(_ops.get("/v1/leases", {"state": state}))]

    def lease(self, profile: str, *, runtime: Optional[str] = None, risk_level: Optional[str] = None,
              ttl_seconds: Optional[int] = None, holder: Optional[str] = None,
              wait_seconds: Optional[int] = None, metadata: Optional[Mapping[str, str]] = None,
              volumes: Optional[Iterable[_ops.VolumeMount]] = None) -> "_Pending[Lease]":
        """Acquires a lease on a sandbox (warm from a pool when one is idle;
        with ``volumes`` always a new one, destroyed on release); as a
        context manager it is released when the block ends."""
        async def make() -> Lease:
            req = _ops.acquire_lease(profile, runtime, risk_level, ttl_seconds, holder, wait_seconds, metadata,
                                     volumes)
            d = await self._call(req)
            return Lease(self, d)

        return _Pending(make)

    # ---- MCP servers -----------------------------------------------------

    def create_mcp_server(self, catalog: Optional[str] = None, *, spec: Optional[Mapping[str, Any]] = None,
                          **extra: Any) -> "_Pending[McpServer]":
        """Starts an MCP server instance (see Genesis.create_mcp_server):
        await it, or ``async with`` it to stop it when the block ends."""
        async def make() -> McpServer:
            return McpServer(self, await self._call(_ops.create_mcp_server(catalog, spec, extra)))

        return _Pending(make)

    async def list_mcp_servers(self) -> List["McpServer"]:
        d = await self._call(_ops.list_mcp_servers())
        return [McpServer(self, s) for s in d.get("items") or []]

    async def get_mcp_server(self, server_id: str) -> "McpServer":
        return McpServer(self, await self._call(_ops.get_mcp_server(server_id)))

    async def mcp_catalog(self) -> List[Dict[str, Any]]:
        """The MCP server catalog: the operator's entries and the tenant's."""
        return await self._items(_ops.get("/v1/mcp/catalog"))

    async def get_mcp_catalog_entry(self, name: str) -> Dict[str, Any]:
        return await self._json(_ops.get("/v1/mcp/catalog/" + _core.seg(name)))

    async def add_mcp_catalog_entry(self, name: str, command: Iterable[str], **fields: Any) -> Dict[str, Any]:
        """Adds a tenant catalog entry; fields: description, profile, cwd,
        env, transport, port, path, permissions, tools, pins."""
        return await self._json(_ops.post("/v1/mcp/catalog", {"name": name, "command": list(command), **fields}))

    async def delete_mcp_catalog_entry(self, name: str) -> None:
        await self._call(_ops.send("DELETE", "/v1/mcp/catalog/" + _core.seg(name)))

    # ---- skills ----------------------------------------------------------

    async def push_skill(self, archive: Body, *, content_type: str = "application/gzip") -> Dict[str, Any]:
        """Pushes a skill archive (tar, tar.gz or zip with SKILL.md) as a new revision."""
        d: Dict[str, Any] = await self._call(_ops.push_skill(_iter_body(archive), content_type))
        return d

    async def list_skills(self) -> List[Dict[str, Any]]:
        d: Dict[str, Any] = await self._call(_ops.list_skills())
        return list(d.get("items") or [])

    async def get_skill(self, name: str) -> Dict[str, Any]:
        d: Dict[str, Any] = await self._call(_ops.get_skill(name))
        return d

    async def skill_revisions(self, name: str) -> List[Dict[str, Any]]:
        return await self._items(_ops.get(f"/v1/skills/{_core.seg(name)}/revisions"))

    async def get_skill_revision(self, name: str, revision: int) -> Dict[str, Any]:
        """A revision's manifest and file list."""
        return await self._json(_ops.get(f"/v1/skills/{_core.seg(name)}/revisions/{int(revision)}"))

    async def read_skill_file(self, name: str, path: str, *, revision: Optional[int] = None) -> bytes:
        """One file of a skill (of its latest revision unless revision)."""
        return b"".join([c async for c in _stream(self, _ops.skill_file(name, path, revision), CHUNK)])

    async def run_skill(self, name: str, script: str, **extra: Any) -> Dict[str, Any]:
        """Runs one of a skill's scripts in a sandbox of its own and returns
        the run (its exec result and artifacts). Keyword arguments: revision,
        args, stdin, files, timeout_ms."""
        d: Dict[str, Any] = await self._call(_ops.run_skill(name, script, extra))
        return d

    # ---- volumes ---------------------------------------------------------

    async def create_volume(self, name: str, size_mb: int) -> Dict[str, Any]:
        """Creates a named volume of at most size_mb MiB (a hard limit)."""
        return await self._json(_ops.create_volume(name, size_mb))

    async def list_volumes(self) -> List[Dict[str, Any]]:
        """The tenant's volumes, by name; each with ``size_mb`` and
        ``used_bytes`` (what its filesystem holds now; absent when the
        service does not know it)."""
        return await self._items(_ops.get("/v1/volumes"))

    async def get_volume(self, name: str) -> Dict[str, Any]:
        """One volume, with the sandboxes that hold it now (``mounts``) and
        ``used_bytes`` beside ``size_mb`` (see list_volumes)."""
        return await self._json(_ops.get(_ops.vol(name)))

    async def delete_volume(self, name: str) -> None:
        """Deletes a volume and its data; a mounted one is 409
        ``volume_in_use`` (VolumeInUse), a missing one succeeds."""
        await self._call(_ops.delete_volume(name))

    async def write_volume_file(self, name: str, path: str, data: Body, *, size: Optional[int] = None,
                                mode: Optional[str] = None, overwrite: bool = True) -> FileWritten:
        """Uploads data as the file path of the volume (parents are made).
        A file object or an iterator of bytes is streamed; past the volume's
        size it is 413 ``volume_full`` and no partial file is left."""
        if isinstance(data, (bytes, bytearray)) and size is None:
            size = len(data)
        req = _ops.write_volume_file(name, path, _iter_body(data), size, mode, overwrite)
        return FileWritten.from_json(await self._call(req))

    def iter_volume_file(self, name: str, path: str, *, offset: int = 0, length: Optional[int] = None,
                         chunk_size: int = CHUNK) -> AsyncIterator[bytes]:
        """Streams the file path of the volume (or length bytes from offset)."""
        return _stream(self, _ops.read_volume_file(name, path, offset, length), chunk_size)

    async def read_volume_file(self, name: str, path: str, *, offset: int = 0,
                               length: Optional[int] = None) -> bytes:
        """The content of the file path of the volume, or length bytes from offset."""
        return b"".join([c async for c in self.iter_volume_file(name, path, offset=offset, length=length)])

    async def download_volume_file(self, name: str, path: str, dest: BinaryIO, *, offset: int = 0,
                                   length: Optional[int] = None) -> int:
        """Streams the file path of the volume into dest; returns the bytes written."""
        n = 0
        async for chunk in self.iter_volume_file(name, path, offset=offset, length=length):
            dest.write(chunk)
            n += len(chunk)
        return n

    async def stat_volume_file(self, name: str, path: str = "") -> Dict[str, Any]:
        """A file of the volume: type, size, mode and times."""
        return await self._json(_ops.get(_ops.vol(name, "files/stat"), {"path": path}))

    async def list_volume_files(self, name: str, path: str = "", *, limit: Optional[int] = None) -> Dict[str, Any]:
        """One directory level of the volume: ``{path, entries, truncated}``."""
        return await self._json(_ops.get(_ops.vol(name, "files/list"), {"path": path, "limit": limit}))

    async def delete_volume_file(self, name: str, path: str, *, recursive: bool = False) -> None:
        """Deletes a file, or a directory (with content only when recursive)."""
        await self._call(_ops.post(_ops.vol(name, "files/delete"), {"path": path, "recursive": recursive or None}))


class Sandbox:
    """A sandbox. As a context manager it is destroyed on exit."""

    def __init__(self, client: AsyncGenesis, data: Dict[str, Any]) -> None:
        self._c = client
        self.data = data
        self.id: str = data["id"]
        self._context: Optional[CodeContext] = None

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} {self.state}>"

    @property
    def state(self) -> str:
        return str(self.data.get("state", ""))

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.destroy()

    async def refresh(self) -> "Sandbox":
        self.data = await self._c._call(_ops.get_sandbox(self.id))
        return self

    async def destroy(self) -> None:
        """Destroys the sandbox; destroying a destroyed one succeeds."""
        await self._c._call(_ops.delete_sandbox(self.id))

    # ---- exec ------------------------------------------------------------

    async def exec(self, command: Union[str, Iterable[str], None] = None, *, script: Optional[str] = None,
                   stdin: Union[str, bytes, None] = None, cwd: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None, timeout_ms: Optional[int] = None,
                   **extra: Any) -> ExecResult:
        """Runs a command (a list, or a string for /bin/sh -c) or a script and
        waits for it. A non-zero exit is a result, not an error."""
        extra.update(cwd=cwd, env=dict(env) if env else None, timeout_ms=timeout_ms)
        return ExecResult.from_json(await self._c._call(_ops.exec_(self.id, command, script, stdin, extra)))

    async def start(self, command: Union[str, Iterable[str], None] = None, *, script: Optional[str] = None,
                    stdin: Union[str, bytes, None] = None, stdin_stream: bool = False, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, timeout_ms: Optional[int] = None,
                    **extra: Any) -> "Job":
        """Starts a background job and returns it at once; read its output
        with ``job.logs()``. With ``stdin_stream`` its stdin stays open for
        ``job.write_stdin`` until ``job.close_stdin``."""
        extra.update(cwd=cwd, env=dict(env) if env else None, timeout_ms=timeout_ms, background=True,
                     stdin_stream=True if stdin_stream else None)
        return Job(self._c, await self._c._call(_ops.exec_(self.id, command, script, stdin, extra)))

    async def exec_stream(self, command: Union[str, Iterable[str], None] = None, *, script: Optional[str] = None,
                          stdin: Union[str, bytes, None] = None, stdin_stream: bool = False,
                          cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                          timeout_ms: Optional[int] = None, encoding: str = "text", resume: bool = True,
                          idle_timeout: float = _core.DEFAULT_IDLE_TIMEOUT, max_reconnects: int = 10,
                          **extra: Any) -> AsyncIterator[LogEvent]:
        """Runs a command and yields its events live: first a ``job`` event
        (its payload the job record), then its output up to the ``exit``
        event. The job goes on if the connection drops; with resume the
        stream continues from the job's log after the last event seen. The
        POST itself is never repeated."""
        extra.update(cwd=cwd, env=dict(env) if env else None, timeout_ms=timeout_ms,
                     stdin_stream=True if stdin_stream else None)
        req = _ops.exec_stream(self.id, command, script, stdin, extra, encoding)
        state = _core.LogState()
        job_id = ""
        err: Exception
        try:
            timeout = httpx.Timeout(30.0, read=idle_timeout)
            resp = await self._c._http.send(self._c._build(req, timeout), stream=True)
            try:
                if resp.status_code != 200:
                    raise errors.from_response(resp.status_code, resp.headers, await resp.aread())
                job_id = resp.headers.get("x-genesis-job-id", "")
                if not _core.is_event_stream(resp.headers):
                    raise errors.StreamError(f"streamed exec in sandbox {self.id}: answer is not text/event-stream")
                parser = _core.SSEParser()
                async for chunk in resp.aiter_bytes():
                    for ev in state.events(parser, chunk):
                        if ev.event == "job":
                            job_id = str(ev.payload.get("id", job_id))
                        yield ev
                    if state.exited:
                        return
            finally:
                await resp.aclose()
            err = errors.StreamError("stream ended before the exit event")
        except httpx.TransportError as e:
            err = e
        if not resume or not job_id:
            raise errors.StreamError(f"streamed exec in sandbox {self.id}: {err}") from err
        job = Job(self._c, {"id": job_id})
        if not state.job_seen:
            # The connection broke inside the job event: fetch the record so
            # that the caller still sees the job first.
            got = state.accept(LogEvent(id="0", event="job", payload=(await job.refresh()).data))
            if got is not None:
                yield got
        async for ev in job._follow(state, True, True, encoding, idle_timeout, max_reconnects):
            yield ev

    # ---- sessions --------------------------------------------------------

    async def create_session(self) -> "Session":
        """A session: execs that keep the working directory and the exported
        environment between calls."""
        return Session(self._c, await self._c._call(_ops.create_session(self.id)))

    # ---- code contexts ---------------------------------------------------

    async def create_context(self, language: str = "python") -> "CodeContext":
        """Starts a code-interpreter kernel whose state lasts between runs."""
        return CodeContext(self._c, await self._c._call(_ops.create_context(self.id, language)))

    async def run_code(self, code: str, *, timeout_ms: Optional[int] = None) -> CodeResult:
        """Runs code in the sandbox's default Python context (created on
        first use), so variables persist between calls."""
        if self._context is None:
            self._context = await self.create_context("python")
        return await self._context.run(code, timeout_ms=timeout_ms)

    # ---- files -----------------------------------------------------------

    async def write_file(self, path: str, data: Body, *, size: Optional[int] = None, mode: Optional[str] = None,
                         overwrite: bool = True) -> FileWritten:
        """Uploads data as the file path (below /workspace when relative).
        A file object or an iterator of bytes is streamed; pass ``size`` when
        known so an over-limit upload is refused before it is sent."""
        if isinstance(data, (bytes, bytearray)) and size is None:
            size = len(data)
        req = _ops.write_file(self.id, path, _iter_body(data), size, mode, overwrite)
        return FileWritten.from_json(await self._c._call(req))

    def iter_file(self, path: str, *, offset: int = 0, length: Optional[int] = None,
                  chunk_size: int = CHUNK) -> AsyncIterator[bytes]:
        """Streams the file path (or length bytes from offset) in chunks."""
        return _stream(self._c, _ops.read_file(self.id, path, offset, length), chunk_size)

    async def read_file(self, path: str, *, offset: int = 0, length: Optional[int] = None) -> bytes:
        """The content of the file path, or length bytes from offset."""
        return b"".join([c async for c in self.iter_file(path, offset=offset, length=length)])

    async def download(self, path: str, dest: BinaryIO, *, offset: int = 0, length: Optional[int] = None) -> int:
        """Streams the file path into dest and returns the bytes written."""
        n = 0
        async for chunk in self.iter_file(path, offset=offset, length=length):
            dest.write(chunk)
            n += len(chunk)
        return n

    async def list_files(self, path: str = ".") -> List[Dict[str, Any]]:
        d = await self._c._call(_ops.list_files(self.id, path))
        return list(d.get("entries") or d.get("items") or [])

    # ---- lifecycle and snapshots ----------------------------------------

    async def _action(self, action: str, body: Optional[Dict[str, Any]] = None) -> "Sandbox":
        self.data = await self._c._call(_ops.sandbox_action(self.id, action, body))
        return self

    async def pause(self) -> "Sandbox":
        """Freezes the sandbox's processes, keeping its memory."""
        return await self._action("pause")

    async def resume(self) -> "Sandbox":
        """Brings a paused or hibernated sandbox back."""
        return await self._action("resume")

    async def hibernate(self) -> "Sandbox":
        """Saves the sandbox's state to disk and frees its memory."""
        return await self._action("hibernate")

    async def rollback(self, snapshot_id: str) -> "Sandbox":
        """Returns the sandbox to a snapshot under the same id."""
        return await self._action("rollback", {"snapshot_id": snapshot_id})

    async def snapshot(self, name: Optional[str] = None, *, memory: Optional[bool] = None) -> Snapshot:
        """Saves the sandbox's state as a new snapshot."""
        return Snapshot.from_json(await self._c._call(_ops.create_snapshot(self.id, name, memory)))

    async def snapshots(self) -> List[Snapshot]:
        return await self._c.list_snapshots(self.id)

    async def fork(self, count: int = 1, *, ttl_seconds: Optional[int] = None,
                   metadata: Optional[Mapping[str, str]] = None) -> List["Sandbox"]:
        """Makes count copies of the sandbox. Copies that could not be made
        are in ``ForkError.errors`` when none was made."""
        d = await self._c._call(_ops.fork(self.id, count, ttl_seconds, metadata))
        made = [Sandbox(self._c, s) for s in d.get("sandboxes") or []]
        if not made and d.get("errors"):
            e = d["errors"][0]
            raise errors.GenesisError(500, str(e.get("code", "fork_failed")), str(e.get("detail", "")))
        return made

    # ---- ports -----------------------------------------------------------

    async def port_link(self, port: int, *, ttl_seconds: int = 3600) -> Dict[str, Any]:
        """A preview link to a port: ``url`` opens it in a browser without
        the API key until ``expires_at``."""
        d: Dict[str, Any] = await self._c._call(_ops.port_link(self.id, port, ttl_seconds))
        return d

    # ---- browser ---------------------------------------------------------

    async def browser_status(self) -> Dict[str, Any]:
        """The browser's status: ``ready`` once Chromium answers, its versions."""
        d: Dict[str, Any] = await self._c._call(_ops.browser_status(self.id))
        return d

    async def browser(self, actions: Iterable[Mapping[str, Any]]) -> BrowserResult:
        """Runs browser actions (navigate, click, fill, screenshot, …) in a
        sandbox of a browser profile; screenshots come back as bytes."""
        d = await self._c._call(_ops.browser_actions(self.id, actions))
        shots = [s if isinstance(s, bytes) else await self._c.read_artifact(s) for s in browser_shots(d)]
        return browser_result(d, shots)

    async def browser_screenshot(self, *, full_page: bool = False, format: str = "png") -> bytes:
        """A screenshot of the browser's active tab."""
        r = await self.browser([{"type": "screenshot", "full_page": full_page, "format": format, "keep": False}])
        if not r.ok or not r.screenshots:
            raise errors.GenesisError(200, "action_failed", r.error or "no screenshot in the answer")
        return r.screenshots[0]

    # ---- desktop ---------------------------------------------------------

    async def computer(self, actions: Iterable[Mapping[str, Any]], *, screenshot: bool = False,
                       display: Optional[Mapping[str, int]] = None) -> ComputerResult:
        """Runs computer-use actions on a desktop sandbox. While a person
        holds control it raises ControlHeld."""
        d = await self._c._call(_ops.computer_actions(self.id, actions, screenshot, display))
        return ComputerResult.from_json(d)

    async def screenshot(self) -> bytes:
        """The desktop's display as PNG bytes."""
        r = await self.computer([{"action": "screenshot"}])
        if not r.ok or not r.screenshots:
            raise errors.GenesisError(200, "action_failed", r.error or "no screenshot in the answer")
        return r.screenshots[0]

    async def control(self, *, after: Optional[int] = None, wait_ms: Optional[int] = None) -> Dict[str, Any]:
        """The desktop's control lease (``holder``, ``version``). With after,
        waits up to wait_ms until the version is past it."""
        d: Dict[str, Any] = await self._c._call(_ops.get_control(self.id, after, wait_ms))
        return d

    async def take_control(self, holder: str, *, reason: Optional[str] = None,
                           allow_screenshots: Optional[bool] = None) -> Dict[str, Any]:
        """Takes control as ``agent`` or ``human:<who>``."""
        d: Dict[str, Any] = await self._c._call(_ops.take_control(self.id, holder, reason, allow_screenshots))
        return d

    async def release_control(self) -> Dict[str, Any]:
        d: Dict[str, Any] = await self._c._call(_ops.release_control(self.id))
        return d

    # ---- trace -----------------------------------------------------------

    async def trace(self, *, after: int = 0, limit: int = 1000) -> AsyncIterator[Dict[str, Any]]:
        """Yields the trace's events after the cursor up to its current end,
        a page at a time."""
        while True:
            d = await self._c._call(_ops.trace_page(self.id, after, limit))
            events = d.get("events") or []
            for ev in events:
                yield ev
            if not events:
                return
            after = int(d.get("next", after))

    async def add_trace_event(self, kind: str, data: Optional[Mapping[str, Any]] = None, *,
                              actor: Optional[str] = None) -> Dict[str, Any]:
        """Appends an ``annotation`` or ``task.status`` event to the trace."""
        d: Dict[str, Any] = await self._c._call(_ops.add_trace_event(self.id, kind, actor, data))
        return d

    async def export_trace(self, dest: BinaryIO) -> int:
        """Streams the trace's tar.gz (events.jsonl, screenshots, manifest)
        into dest and returns the bytes written."""
        n = 0
        async for chunk in _stream(self._c, _ops.export_trace(self.id), CHUNK):
            dest.write(chunk)
            n += len(chunk)
        return n

    # ---- diff and patch --------------------------------------------------

    async def diff(self, base: Optional[str] = None) -> Dict[str, Any]:
        """What changed in /workspace since base (creation, git, a snapshot
        or sandbox id): the files, a summary and each text file's diff."""
        d: Dict[str, Any] = await self._c._call(_ops.diff(self.id, base, False))
        return d

    async def diff_patch(self, base: Optional[str] = None) -> str:
        """The diff as a patch that ``git apply`` (and apply_patch) accepts."""
        return b"".join([c async for c in _stream(self._c, _ops.diff(self.id, base, True), CHUNK)]).decode("utf-8")

    async def apply_patch(self, patch: str, *, dry_run: bool = False) -> Dict[str, Any]:
        """Applies a unified or git diff to /workspace, all or nothing; a
        hunk that does not apply raises PatchConflict."""
        d: Dict[str, Any] = await self._c._call(_ops.apply_patch(self.id, patch, dry_run))
        return d

    # ---- settings --------------------------------------------------------

    async def set_metadata(self, metadata: Mapping[str, str], *, if_match: Optional[str] = None) -> "Sandbox":
        """Replaces the sandbox's metadata (with if_match only if it is still
        at that version)."""
        self.data = await self._c._json(_ops.send("PATCH", "/v1/sandboxes/" + _core.seg(self.id),
                                                  {"metadata": dict(metadata)}, if_match))
        return self

    async def renew(self, ttl_seconds: Optional[int] = None) -> "Sandbox":
        """Extends the sandbox's time to live."""
        return await self._action("renew", _core.compact({"ttl_seconds": ttl_seconds}))

    async def network(self) -> Dict[str, Any]:
        """The sandbox's network policy (``mode``, ``allow``, …)."""
        return await self._c._json(_ops.get(_ops.sbx(self.id, "network")))

    async def set_network(self, mode: str, *, allow: Optional[Iterable[Mapping[str, Any]]] = None,
                          endpoints: Optional[Iterable[str]] = None, tools: Optional[Iterable[str]] = None,
                          if_match: Optional[str] = None) -> Dict[str, Any]:
        """Replaces the network policy: none, allowlist (allow rules),
        internal-api (endpoints) or tool-proxy (tools)."""
        body = {"mode": mode, "allow": [dict(a) for a in allow] if allow is not None else None,
                "endpoints": list(endpoints) if endpoints is not None else None,
                "tools": list(tools) if tools is not None else None}
        return await self._c._json(_ops.send("PUT", _ops.sbx(self.id, "network"), body, if_match))

    async def network_events(self, *, cursor: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """A page of the egress decisions (``items``, ``next_cursor``)."""
        return await self._c._json(_ops.get(_ops.sbx(self.id, "network/events"), {"cursor": cursor, "limit": limit}))

    async def jobs(self, *, state: Optional[str] = None, limit: Optional[int] = None) -> List["Job"]:
        """The sandbox's jobs, newest first."""
        items = await self._c._items(_ops.get(_ops.sbx(self.id, "jobs"), {"state": state, "limit": limit}))
        return [Job(self._c, j) for j in items]

    # ---- more file operations -------------------------------------------

    async def stat(self, path: str) -> Dict[str, Any]:
        """A file's type, size, mode and times."""
        return await self._c._json(_ops.get(_ops.sbx(self.id, "files/stat"), {"path": path}))

    async def mkdir(self, path: str, *, mode: Optional[str] = None, parents: Optional[bool] = None) -> Dict[str, Any]:
        return await self._c._json(_ops.post(_ops.sbx(self.id, "files/mkdir"),
                                             {"path": path, "mode": mode, "parents": parents}))

    async def move(self, src: str, dst: str, *, overwrite: Optional[bool] = None) -> Dict[str, Any]:
        return await self._c._json(_ops.post(_ops.sbx(self.id, "files/move"),
                                             {"from": src, "to": dst, "overwrite": overwrite}))

    async def delete_file(self, path: str, *, recursive: bool = False) -> None:
        body = {"path": path, "recursive": recursive or None}
        await self._c._call(_ops.post(_ops.sbx(self.id, "files/delete"), body))

    async def chmod(self, path: str, mode: str) -> Dict[str, Any]:
        return await self._c._json(_ops.post(_ops.sbx(self.id, "files/chmod"), {"path": path, "mode": mode}))

    async def upload_files(self, files: Mapping[str, bytes], *, path: str = ".", mode: Optional[str] = None,
                           overwrite: bool = True) -> List[Dict[str, Any]]:
        """Writes several files at once (relative path → content) under the
        directory path, all or nothing."""
        body, ctype = _core.multipart(files)
        d = await self._c._json(_ops.upload_files(self.id, path, body, ctype, mode, overwrite))
        return list(d.get("files") or [])

    async def extract(self, path: str, archive: Body, *, content_type: str = "application/gzip") -> Dict[str, Any]:
        """Unpacks a tar (application/x-tar) or tar.gz archive, streamed, into
        the directory path."""
        return await self._c._json(_ops.extract_archive(self.id, path, _iter_body(archive), content_type))

    def iter_archive(self, path: str, *, chunk_size: int = CHUNK) -> AsyncIterator[bytes]:
        """Streams a directory as a tar archive."""
        return _stream(self._c, _ops.read_archive(self.id, path), chunk_size)

    async def search(self, path: str = ".", *, glob: Optional[str] = None, content: Optional[str] = None,
                     **extra: Any) -> Dict[str, Any]:
        """Finds files by name (glob) and/or content; extra: regex,
        ignore_case, max_depth, max_results, timeout_ms."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, "files/search"),
                                             {"path": path, "glob": glob, "content": content, **extra}))

    async def replace(self, find: str, replace: str, *, paths: Optional[Iterable[str]] = None,
                      **extra: Any) -> Dict[str, Any]:
        """Replaces text in files (paths, or path and glob); extra: regex,
        ignore_case, dry_run, max_files."""
        body = {"find": find, "replace": replace, "paths": list(paths) if paths is not None else None, **extra}
        return await self._c._json(_ops.post(_ops.sbx(self.id, "files/replace"), body))

    def terminal(self, *, cols: Optional[int] = None, rows: Optional[int] = None, terminal: Optional[str] = None,
                 takeover: bool = False, timeout: float = 30.0) -> "_Pending[AsyncTerminal]":
        """Opens an interactive terminal over a WebSocket: a new one running
        the sandbox user's shell, or with terminal (an id) an existing one.
        ``read()`` output bytes, ``write()`` input, ``resize(cols, rows)``,
        ``close()``; as a context manager it is closed on exit."""
        params = {"cols": cols, "rows": rows, "terminal": terminal, "takeover": takeover or None}
        headers = _core.build_headers(Request("GET", ""), self._c.api_key, self._c.act_as)
        path = f"/v1/sandboxes/{_core.seg(self.id)}/terminal"
        return _Pending(lambda: AsyncTerminal.open(self._c.base_url, path, params, headers, timeout))

    async def terminal_ticket(self) -> Dict[str, Any]:
        """A one-use ticket that opens a terminal without the API key."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, "terminal/tickets")))

    # ---- recordings, links and human help ---------------------------------

    async def start_recording(self, *, source: str = "display", fps: Optional[int] = None,
                              segment_seconds: Optional[int] = None) -> Dict[str, Any]:
        """Records the desktop's display (source "display") or the browser's
        tab ("browser") as video segments kept as artifacts."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, _rec(source)),
                                             {"fps": fps, "segment_seconds": segment_seconds}))

    async def recording(self, *, source: str = "display") -> Dict[str, Any]:
        return await self._c._json(_ops.get(_ops.sbx(self.id, _rec(source))))

    async def stop_recording(self, *, source: str = "display") -> Dict[str, Any]:
        """Stops the recording once its last segment is kept."""
        return await self._c._json(_ops.send("DELETE", _ops.sbx(self.id, _rec(source))))

    async def recording_segments(self, recording_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The kept video segments (their ``video.segment`` trace events'
        data: ``recording``, ``index``, ``artifact`` {id, size, sha256}, …);
        read one with client.read_artifact(segment["artifact"]["id"])."""
        out = []
        async for ev in self.trace():
            data = ev.get("data") or {}
            if ev.get("kind") == "video.segment" and recording_id in (None, data.get("recording")):
                out.append(dict(data))
        return out

    async def display_link(self, role: str = "observer", *, ttl_seconds: int = 3600) -> Dict[str, Any]:
        """A link to the desktop's VNC stream and viewer page (role observer
        or controller) that carries its own token."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, "display/links"),
                                             {"role": role, "ttl_seconds": ttl_seconds}))

    async def browser_link(self, *, ttl_seconds: Optional[int] = None) -> Dict[str, Any]:
        """CDP and Playwright URLs of the sandbox's browser (``cdp_url``,
        ``playwright_url``) that carry their own token."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, "browser/links"), {"ttl_seconds": ttl_seconds}))

    async def request_human(self, reason: str) -> Dict[str, Any]:
        """Asks a person to take over the desktop."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, "control/requests"), {"reason": reason}))

    async def browser_downloads(self) -> List[Dict[str, Any]]:
        return await self._c._items(_ops.get(_ops.sbx(self.id, "browser/downloads")))

    async def keep_browser_downloads(self, names: Optional[Iterable[str]] = None) -> Dict[str, Any]:
        """Keeps the browser's downloads (all, or those named) as artifacts."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, "browser/downloads/keep"),
                                             {"names": list(names) if names is not None else None}))

    async def save_browser_profile(self, name: Optional[str] = None) -> Dict[str, Any]:
        """Keeps the browser's profile (cookies, storage) as an artifact."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, "browser/profile/save"), {"name": name}))

    async def load_browser_profile(self, artifact_id: str) -> Dict[str, Any]:
        return await self._c._json(_ops.post(_ops.sbx(self.id, "browser/profile/load"),
                                             {"artifact_id": artifact_id}))

    async def pause_trace(self, *, actor: Optional[str] = None) -> Dict[str, Any]:
        """Holds the agent's next action until resume_trace or step_trace."""
        return await self._c._json(_ops.post(_ops.sbx(self.id, "trace/pause"), {"actor": actor}))

    async def resume_trace(self, *, actor: Optional[str] = None) -> Dict[str, Any]:
        return await self._c._json(_ops.post(_ops.sbx(self.id, "trace/resume"), {"actor": actor}))

    async def step_trace(self, *, actor: Optional[str] = None) -> Dict[str, Any]:
        return await self._c._json(_ops.post(_ops.sbx(self.id, "trace/step"), {"actor": actor}))

    async def abort_trace(self, *, actor: Optional[str] = None) -> Dict[str, Any]:
        return await self._c._json(_ops.post(_ops.sbx(self.id, "trace/abort"), {"actor": actor}))


class Job:
    """A job: a background job, or any job's record and log."""

    def __init__(self, client: AsyncGenesis, data: Dict[str, Any]) -> None:
        self._c = client
        self.data = data
        self.id: str = data["id"]

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.state}>"

    @property
    def state(self) -> str:
        return str(self.data.get("state", ""))

    async def refresh(self) -> "Job":
        self.data = await self._c._call(_ops.get_job(self.id))
        return self

    async def cancel(self) -> "Job":
        """Kills the job's whole process tree; it ends canceled."""
        self.data = await self._c._call(_ops.cancel_job(self.id))
        return self

    async def write_stdin(self, data: Body) -> int:
        """Writes data into the stdin of a job started with stdin_stream
        (several calls append) and returns the bytes taken."""
        d = await self._c._call(_ops.write_stdin(self.id, _iter_body(data)))
        return int(d.get("bytes", 0))

    async def close_stdin(self) -> None:
        """Closes the job's stdin: it reads end of file after what was written."""
        await self._c._call(_ops.close_stdin(self.id))

    async def logs(self, *, cursor: str = "", follow: bool = True, resume: bool = True, encoding: str = "text",
                   idle_timeout: float = _core.DEFAULT_IDLE_TIMEOUT, max_reconnects: int = 10) -> AsyncIterator[LogEvent]:
        """Yields the events of the job's log (stdout, stderr, truncated,
        exit) from cursor ("": the start). With follow it waits for new
        output until the exit event; without, it ends at the current end of
        the log. With resume a dropped connection is reopened from the last
        event seen (Last-Event-ID): no event is lost or repeated. It gives up
        after max_reconnects failures in a row without progress."""
        state = _core.LogState(cursor)
        async for ev in self._follow(state, follow, resume, encoding, idle_timeout, max_reconnects):
            yield ev

    async def _follow(self, state: _core.LogState, follow: bool, resume: bool, encoding: str, idle_timeout: float,
                      max_reconnects: int) -> AsyncIterator[LogEvent]:
        failures = 0
        timeout = httpx.Timeout(30.0, read=idle_timeout)
        while True:
            params, headers = state.params_headers(follow, encoding)
            req = Request("GET", _ops.job_logs_path(self.id), params=params, headers=headers)
            before = state.delivered
            err: Exception
            try:
                resp = await self._c._http.send(self._c._build(req, timeout), stream=True)
                try:
                    if resp.status_code != 200:
                        e = errors.from_response(resp.status_code, resp.headers, await resp.aread())
                        if resp.status_code not in _core.RETRY_STATUSES:
                            raise e
                        raise _Transient(e)
                    if not _core.is_event_stream(resp.headers):
                        raise errors.StreamError(f"log of job {self.id}: answer is not text/event-stream")
                    parser = _core.SSEParser()
                    async for chunk in resp.aiter_bytes():
                        for ev in state.events(parser, chunk):
                            yield ev
                        if state.exited:
                            return
                finally:
                    await resp.aclose()
                if not follow:
                    return
                err = errors.StreamError(f"log of job {self.id}: stream ended before the exit event")
            except (httpx.TransportError, _Transient) as e:
                err = e
            if not resume:
                raise errors.StreamError(f"log of job {self.id}: {err}") from err
            if state.delivered != before:
                failures = 0
            failures += 1
            if failures > max_reconnects:
                raise errors.StreamError(f"log of job {self.id}: gave up after {max_reconnects} reconnects: {err}") from err
            await asyncio.sleep(_core.backoff(failures - 1))

    async def wait(self) -> "Job":
        """Follows the log to the exit event and returns the final record."""
        async for _ in self.logs(follow=True):
            pass
        return await self.refresh()


class _Transient(Exception):
    """A retryable answer of the log endpoint (429, 502-504)."""


def _rec(source: str) -> str:
    if source not in ("display", "browser"):
        raise ValueError('source is "display" or "browser"')
    return source + "/recording"


class Session:
    """A session of a sandbox; as an async context manager it is closed on exit."""

    def __init__(self, client: AsyncGenesis, data: Dict[str, Any]) -> None:
        self._c = client
        self.data = data
        self.id: str = data["id"]

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def exec(self, command: Union[str, Iterable[str], None] = None, *, script: Optional[str] = None,
                   stdin: Union[str, bytes, None] = None, cwd: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None, timeout_ms: Optional[int] = None,
                   **extra: Any) -> ExecResult:
        """Runs a command or script in the session's directory and environment."""
        extra.update(cwd=cwd, env=dict(env) if env else None, timeout_ms=timeout_ms)
        return ExecResult.from_json(await self._c._call(_ops.session_exec(self.id, command, script, stdin, extra)))

    async def close(self) -> None:
        """Ends the session; closing a closed session succeeds."""
        await self._c._call(_ops.delete_session(self.id))


class CodeContext:
    """A code-interpreter context; as a context manager it is closed on exit."""

    def __init__(self, client: AsyncGenesis, data: Dict[str, Any]) -> None:
        self._c = client
        self.data = data
        self.id: str = data["id"]

    async def __aenter__(self) -> "CodeContext":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def run(self, code: str, *, timeout_ms: Optional[int] = None) -> CodeResult:
        """Runs code with the context's globals kept between runs."""
        return CodeResult.from_json(await self._c._call(_ops.run_code(self.id, code, timeout_ms)))

    async def close(self) -> None:
        """Stops the kernel; closing a closed context succeeds."""
        await self._c._call(_ops.delete_context(self.id))


class Lease:
    """A lease on a sandbox; as a context manager it is released on exit."""

    def __init__(self, client: AsyncGenesis, data: Dict[str, Any]) -> None:
        self._c = client
        self.data = data
        self.id: str = data["lease_id"]
        self.sandbox = Sandbox(client, {"id": data["sandbox_id"]})

    async def __aenter__(self) -> "Lease":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()

    async def renew(self, ttl_seconds: Optional[int] = None) -> "Lease":
        self.data = await self._c._call(_ops.renew_lease(self.id, ttl_seconds))
        return self

    async def release(self) -> None:
        """Releases the lease; releasing a released lease succeeds."""
        await self._c._call(_ops.release_lease(self.id))


class McpServer:
    """An MCP server instance; as a context manager it is stopped on exit.
    ``token`` (only known to the client that created it) is the bearer
    token of its Streamable HTTP ``endpoint``."""

    def __init__(self, client: AsyncGenesis, data: Dict[str, Any]) -> None:
        self._c = client
        self.data = data
        self.id: str = data["id"]
        self.token: str = data.get("token", "")

    def __repr__(self) -> str:
        return f"<McpServer {self.id} {self.data.get('state', '')}>"

    async def __aenter__(self) -> "McpServer":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.delete()

    async def refresh(self) -> "McpServer":
        self.data = await self._c._call(_ops.get_mcp_server(self.id))
        return self

    async def tools(self) -> List[Dict[str, Any]]:
        """The tools as the instance's clients see them (its policy applied)."""
        d = await self._c._call(_ops.mcp_server_tools(self.id))
        return list(d.get("tools") or d.get("items") or [])

    async def call_tool(self, name: str, arguments: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Calls a tool through the instance's endpoint (one MCP session:
        initialize, tools/call, end) and returns the call's result
        (``content``, ``isError``, ``structuredContent``)."""
        endpoint = str(self.data.get("endpoint") or f"/v1/mcp/servers/{self.id}/mcp")
        if not self.token:
            raise ValueError("the instance's token is only in the answer to create_mcp_server")

        async def rpc(session: str, msg: Dict[str, Any]) -> httpx.Response:
            return await self._c._send(_ops.mcp_message(endpoint, self.token, session, msg))

        r = await rpc("", _core.mcp_initialize(1))
        _core.mcp_reply(r.status_code, r.headers, r.content, 1)
        session = r.headers.get("mcp-session-id", "")
        try:
            await rpc(session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": name, "arguments": dict(arguments or {})}}
            r = await rpc(session, call)
            return _core.mcp_reply(r.status_code, r.headers, r.content, 2)
        finally:
            if session:
                await (await self._c._send(_ops.mcp_end(endpoint, self.token, session))).aclose()

    async def delete(self) -> None:
        """Stops the instance and forgets it; deleting a deleted one succeeds."""
        await self._c._call(_ops.delete_mcp_server(self.id))

    async def pins(self) -> List[Dict[str, Any]]:
        """The tools' pinned definitions and their state (pinned, changed, …)."""
        return await self._c._items(_ops.get(f"/v1/mcp/servers/{_core.seg(self.id)}/pins"))

    async def approve_pin(self, tool: str, hash: str) -> Dict[str, Any]:
        """Accepts a changed tool definition (the hash it now has)."""
        return await self._c._json(_ops.post(f"/v1/mcp/servers/{_core.seg(self.id)}/pins/{_core.seg(tool)}/approve",
                                             {"hash": hash}))

    async def approvals(self) -> List[Dict[str, Any]]:
        """The tool calls waiting for a person's approval."""
        return await self._c._items(_ops.get(f"/v1/mcp/servers/{_core.seg(self.id)}/approvals"))

    async def decide_approval(self, approval_id: str, decision: str, args_digest: str, *,
                              reason: Optional[str] = None) -> Dict[str, Any]:
        """Approves or denies (decision) a waiting call whose arguments have args_digest."""
        path = f"/v1/mcp/servers/{_core.seg(self.id)}/approvals/{_core.seg(approval_id)}"
        return await self._c._json(_ops.post(path, {"decision": decision, "args_digest": args_digest,
                                                    "reason": reason}))

    async def calls(self, *, cursor: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """A page of the instance's tool calls (``items``, ``next_cursor``)."""
        return await self._c._json(_ops.get(f"/v1/mcp/servers/{_core.seg(self.id)}/calls",
                                            {"cursor": cursor, "limit": limit}))
