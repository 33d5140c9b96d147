"""The SDK against a real service, under runc and runsc."""

from __future__ import annotations

import asyncio
import hashlib
import io
import resource
import socket
import threading
from typing import Iterator, List, Tuple

import pytest

from conftest import Service
from genesis_sandbox import AsyncGenesis, Genesis, GenesisError, NotFound, Sandbox, StreamError, Unauthorized

PROFILE = "code-python-basic"


def risk(runtime: str) -> str:
    """runc isolates only low-risk work; runsc takes the default."""
    return "low" if runtime == "runc" else "medium"


@pytest.fixture(scope="module", params=["runc", "runsc"])
def sb(request: pytest.FixtureRequest, service: Service) -> Iterator[Sandbox]:
    """One sandbox per runtime, shared by the tests of this module."""
    with Genesis(service.url, service.api_key) as c:
        with c.sandbox(PROFILE, runtime=request.param, risk_level=risk(request.param), ttl_seconds=900) as s:
            yield s


def test_context_manager_exec_destroy(client: Genesis, runtime: str) -> None:
    with client.sandbox(PROFILE, runtime=runtime, risk_level=risk(runtime)) as s:
        assert s.state == "ready" and s.data["runtime"] == runtime
        r = s.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (r.exit_code, r.exit_reason, r.stdout, r.stderr) == (3, "exited", "out\n", "err\n")
        r = s.exec(script="read a; echo got-$a", stdin="x\n")
        assert r.ok and r.stdout == "got-x\n"
        r = s.exec("cat | wc -c", stdin=b"\x00\x01\xff")
        assert r.stdout.strip() == "3"
        sid = s.id
    got = client.get_sandbox(sid)
    assert got.state == "destroyed"


def test_not_found_error(client: Genesis) -> None:
    with pytest.raises(NotFound) as ei:
        client.get_sandbox("sbx_doesnotexist")
    e = ei.value
    assert isinstance(e, GenesisError) and e.status == 404 and e.code and e.request_id
    with pytest.raises(Unauthorized) as bad:
        Genesis(client.base_url, "wrong-key").whoami()
    assert bad.value.status == 401 and bad.value.request_id


def test_code_context_keeps_state(sb: Sandbox) -> None:
    r = sb.run_code("x = 41")
    assert r.status == "ok"
    r = sb.run_code("print('hi'); x + 1")
    assert (r.status, r.stdout, r.value) == ("ok", "hi\n", "42")
    r = sb.run_code("1/0")
    assert r.status == "error" and r.error and r.error["ename"] == "ZeroDivisionError"


def test_file_round_trip_and_range(sb: Sandbox) -> None:
    data = bytes(range(256)) * 40
    w = sb.write_file("dir/data.bin", data)
    assert w.size == len(data) and w.sha256 == hashlib.sha256(data).hexdigest()
    assert sb.read_file("dir/data.bin") == data
    assert sb.read_file("dir/data.bin", offset=100, length=50) == data[100:150]
    assert sb.read_file("dir/data.bin", offset=len(data) - 10) == data[-10:]
    sb.write_file("dir/stream.txt", io.BytesIO(b"streamed\n"))
    assert sb.exec("cat dir/stream.txt").stdout == "streamed\n"
    with pytest.raises(NotFound) as ei:
        sb.read_file("dir/missing")
    assert ei.value.code == "file_not_found"


def test_artifacts(sb: Sandbox, service: Service) -> None:
    r = sb.exec(script="mkdir -p out && printf 'artifact-1' > out/a.txt", artifacts={"paths": ["out/*.txt"]})
    assert r.ok
    with Genesis(service.url, service.api_key) as c:
        items = c.list_artifacts(r.job_id)
        assert [a["path"] for a in items] == ["out/a.txt"]
        art = c.get_artifact(items[0]["id"])
        assert art["size"] == 10 and art["sha256"] == hashlib.sha256(b"artifact-1").hexdigest()
        assert c.read_artifact(art["id"]) == b"artifact-1"
        assert c.read_artifact(art["id"], offset=9) == b"1"
        with pytest.raises(NotFound):
            c.get_artifact("art_doesnotexist")


def test_stdin_stream(sb: Sandbox) -> None:
    job = sb.start(["sort"], stdin_stream=True)
    assert job.write_stdin(b"pear\n") == 5
    assert job.write_stdin(iter([b"apple\n", b"fig\n"])) == 10
    job.close_stdin()
    out = b"".join(ev.data for ev in job.logs() if ev.event == "stdout")
    assert out == b"apple\nfig\npear\n"
    assert job.refresh().data["exit_code"] == 0


class CuttingProxy:
    """A loopback TCP proxy that cuts every connection once it has passed
    limit bytes from the service to the client, mid-event."""

    def __init__(self, target: str, limit: int) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.limit = limit
        self.cuts = 0
        self.ln = socket.socket()
        self.ln.bind(("127.0.0.1", 0))
        self.ln.listen(16)
        self.url = "http://127.0.0.1:%d" % self.ln.getsockname()[1]
        self.threads: List[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.ln.accept()
            except OSError:
                return
            up = socket.create_connection(self.target)
            t1 = threading.Thread(target=self._pipe, args=(down, up, None), daemon=True)
            t2 = threading.Thread(target=self._pipe, args=(up, down, self.limit), daemon=True)
            t1.start()
            t2.start()

    def _pipe(self, src: socket.socket, dst: socket.socket, limit: "int | None") -> None:
        passed = 0
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if limit is not None and passed + len(b) > limit:
                    dst.sendall(b[:limit - passed])
                    self.cuts += 1
                    break
                dst.sendall(b)
                passed += len(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.ln.close()


def test_log_stream_resumes_without_gap_or_duplicate(sb: Sandbox, service: Service) -> None:
    n = 400
    job = sb.start(script=f"for i in $(seq 1 {n}); do echo line-$i; sleep 0.005; done; echo done >&2")
    proxy = CuttingProxy(service.url[len("http://"):], limit=1500)
    try:
        with Genesis(proxy.url, service.api_key) as cut:
            ids: List[int] = []
            out = b""
            err = b""
            exit_code = None
            for ev in cut.job(job.id).logs(max_reconnects=50):
                ids.append(int(ev.id))
                if ev.event == "stdout":
                    out += ev.data
                elif ev.event == "stderr":
                    err += ev.data
                elif ev.event == "exit":
                    exit_code = ev.payload["exit_code"]
            # Without resuming, the same cut is an error, not a short log.
            with pytest.raises(StreamError):
                for _ in cut.job(job.id).logs(resume=False):
                    pass
    finally:
        proxy.close()
    assert proxy.cuts >= 3, "the proxy never cut the stream"
    assert out == "".join(f"line-{i}\n" for i in range(1, n + 1)).encode()
    assert err == b"done\n" and exit_code == 0
    assert ids == sorted(set(ids)), "event ids repeat or go back"


def test_exec_stream_resumes_after_cut(sb: Sandbox, service: Service) -> None:
    n = 300
    proxy = CuttingProxy(service.url[len("http://"):], limit=1500)
    try:
        with Genesis(proxy.url, service.api_key) as cut:
            events = list(Sandbox(cut, sb.data).exec_stream(
                script=f"for i in $(seq 1 {n}); do echo line-$i; sleep 0.005; done", max_reconnects=50))
    finally:
        proxy.close()
    assert proxy.cuts >= 3, "the proxy never cut the stream"
    assert events[0].event == "job" and events[0].payload["id"]
    assert [ev.event for ev in events].count("job") == 1
    out = b"".join(ev.data for ev in events if ev.event == "stdout")
    assert out == "".join(f"line-{i}\n" for i in range(1, n + 1)).encode()
    assert events[-1].event == "exit" and events[-1].payload["exit_code"] == 0


def test_session_keeps_cwd_and_env(sb: Sandbox) -> None:
    with sb.create_session() as ses:
        assert ses.exec(script="cd /tmp && export A=1").ok
        assert ses.exec(script="pwd; echo $A").stdout == "/tmp\n1\n"
    assert sb.exec(script="echo ${A:-unset}").stdout == "unset\n"


def test_log_stream_from_cursor(sb: Sandbox) -> None:
    job = sb.start(script="echo a; sleep 0.2; echo b")
    events = list(job.logs())
    first = next(ev for ev in events if ev.event == "stdout")
    rest = list(job.logs(cursor=first.id))
    assert b"".join(ev.data for ev in rest if ev.event == "stdout") == b"".join(
        ev.data for ev in events if ev.event == "stdout")[len(first.data):]
    assert rest[-1].event == "exit"


def test_async_client(service: Service, runtime: str) -> None:
    async def main() -> Tuple[str, bytes, str]:
        async with AsyncGenesis(service.url, service.api_key) as c:
            async with c.sandbox(PROFILE, runtime=runtime, risk_level=risk(runtime)) as s:
                r = await s.exec("echo async")
                await s.write_file("a.txt", b"async file")
                body = await s.read_file("a.txt")
                job = await s.start("echo one; echo two")
                out = b""
                async for ev in job.logs():
                    if ev.event == "stdout":
                        out += ev.data
                streamed = [ev async for ev in s.exec_stream("echo streamed")]
                assert streamed[0].event == "job" and streamed[-1].event == "exit"
                assert b"".join(ev.data for ev in streamed if ev.event == "stdout") == b"streamed\n"
                async with await s.create_session() as ses:
                    await ses.exec("cd /tmp")
                    assert (await ses.exec("pwd")).stdout == "/tmp\n"
                sid = s.id
            gone = await c.get_sandbox(sid)
            assert gone.state == "destroyed"
            with pytest.raises(NotFound):
                await c.get_sandbox("sbx_doesnotexist")
            return r.stdout, body, out.decode()

    stdout, body, out = asyncio.run(main())
    assert (stdout, body, out) == ("async\n", b"async file", "one\ntwo\n")


def test_snapshot_fork_rollback_runsc(client: Genesis) -> None:
    with client.sandbox(PROFILE, runtime="runsc") as s:
        s.write_file("state.txt", b"v1")
        snap = s.snapshot("base")
        try:
            assert snap.id and snap.sandbox_id == s.id
            s.write_file("state.txt", b"v2")
            forks = s.fork(1)
            try:
                assert len(forks) == 1 and forks[0].id != s.id
                assert forks[0].read_file("state.txt") == b"v2"
            finally:
                for f in forks:
                    f.destroy()
            s.rollback(snap.id)
            assert s.read_file("state.txt") == b"v1"
            s.pause()
            assert s.refresh().state == "paused"
            s.resume()
            assert s.exec("cat state.txt").stdout == "v1"
            assert s.hibernate().state == "hibernated"
            assert s.exec("cat state.txt").stdout == "v1"  # the call wakes it
            assert s.refresh().state == "ready"
        finally:
            client.delete_snapshot(snap.id)
    with pytest.raises(NotFound):
        client.get_snapshot(snap.id)


def test_large_file_streamed(sb: Sandbox) -> None:
    size = 100 << 20
    chunk = hashlib.sha256(b"seed").digest() * 32768  # 1 MiB

    def body() -> Iterator[bytes]:
        for i in range(size // len(chunk)):
            yield bytes([i % 256]) + chunk[1:]

    want = hashlib.sha256()
    for b in body():
        want.update(b)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    w = sb.write_file("big.bin", body(), size=size)
    assert w.size == size and w.sha256 == want.hexdigest()
    got = hashlib.sha256()
    n = 0
    for b in sb.iter_file("big.bin"):
        got.update(b)
        n += len(b)
    assert n == size and got.hexdigest() == want.hexdigest()
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grew < 50 * 1024, f"peak memory grew by {grew} KiB: the transfer was held in memory"
    sb.exec("rm big.bin")


def test_lease_context_manager(client: Genesis) -> None:
    with client.lease(PROFILE, runtime="runc", risk_level="low", ttl_seconds=300) as lease:
        r = lease.sandbox.exec("echo leased")
        assert r.stdout == "leased\n"
        lid = lease.id
    assert client.get_lease(lid).data["state"] == "released"
