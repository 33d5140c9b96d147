"""The SDK's other areas against a real service, under runc and runsc:
ports and preview links, diff and patch, trace, MCP server instances,
skills, browser and desktop actions."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import tarfile
from typing import Iterator

import pytest

from conftest import Service
from genesis_sandbox import (AsyncGenesis, BadRequest, ControlHeld, Genesis, GenesisError, NotFound, PatchConflict,
                             Sandbox)

PROFILE = "code-python-basic"
PNG = b"\x89PNG\r\n\x1a\n"


def risk(runtime: str) -> str:
    return "low" if runtime == "runc" else "medium"


@pytest.fixture(scope="module", params=["runc", "runsc"])
def sb(request: pytest.FixtureRequest, service: Service) -> Iterator[Sandbox]:
    with Genesis(service.url, service.api_key) as c:
        with c.sandbox(PROFILE, runtime=request.param, risk_level=risk(request.param), ttl_seconds=900) as s:
            yield s


def test_port_link(sb: Sandbox) -> None:
    link = sb.port_link(8000, ttl_seconds=120)
    assert link["sandbox_id"] == sb.id and link["port"] == 8000 and link["token"]
    assert link["token"] in link["url"] and link["url"].startswith(link["origin"])
    assert "8000" in link["origin"] and link["expires_at"]
    with pytest.raises(BadRequest) as ei:
        sb.port_link(8000, ttl_seconds=0)
    assert ei.value.request_id


def test_diff_and_patch(sb: Sandbox) -> None:
    sb.write_file("notes/a.txt", "one\ntwo\n")
    d = sb.diff()
    files = {f["path"]: f for f in d["files"]}
    assert files["notes/a.txt"]["status"] == "added", d
    patch = ("--- a/notes/a.txt\n+++ b/notes/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+three\n")
    dry = sb.apply_patch(patch, dry_run=True)
    assert dry["dry_run"] and sb.read_file("notes/a.txt") == b"one\ntwo\n"
    res = sb.apply_patch(patch)
    assert res["applied"] and [f["path"] for f in res["files"]] == ["notes/a.txt"]
    assert sb.read_file("notes/a.txt") == b"one\nthree\n"
    # The same patch again no longer applies: nothing changes.
    with pytest.raises(PatchConflict) as ei:
        sb.apply_patch(patch)
    assert ei.value.status == 409 and ei.value.code == "patch_conflict" and ei.value.request_id
    assert sb.read_file("notes/a.txt") == b"one\nthree\n"
    assert "+three" in sb.diff_patch()


def test_trace_events_and_export(sb: Sandbox) -> None:
    mark = sb.add_trace_event("annotation", {"note": "pysdk-" + sb.id})
    assert mark["kind"] == "annotation"
    events = list(sb.trace())
    assert any(e.get("kind") == "annotation" and (e.get("data") or {}).get("note") == "pysdk-" + sb.id
               for e in events), events
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # From a cursor: only what follows it.
    assert [e["seq"] for e in sb.trace(after=seqs[-2])] == seqs[-1:]
    buf = io.BytesIO()
    n = sb.export_trace(buf)
    assert n == len(buf.getvalue()) > 0
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r:gz") as tf:
        names = tf.getnames()
        lines = tf.extractfile("events.jsonl").read().decode().splitlines()  # type: ignore[union-attr]
    assert "manifest.json" in names
    assert any(json.loads(x).get("data", {}).get("note") == "pysdk-" + sb.id for x in lines)


def test_mcp_server_instance(client: Genesis, runtime: str) -> None:
    with client.create_mcp_server("py-add", runtime=runtime) as srv:
        assert srv.data["state"] == "ready" and srv.data["runtime"] == runtime and srv.token
        assert [t["name"] for t in srv.tools()] == ["add"]
        res = srv.call_tool("add", {"a": 2, "b": 40})
        assert not res.get("isError") and res["content"][0]["text"] in ("42", "42.0"), res
        assert srv.id in [s.id for s in client.list_mcp_servers()]
    with pytest.raises(NotFound):
        client.get_mcp_server(srv.id)
    srv.delete()  # documented idempotent: deleting a gone instance succeeds


def _skill_archive() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data, mode in [
            ("SKILL.md", b"---\nname: py-shout\ndescription: Shouts its input.\n---\nShouts.\n", 0o644),
            ("shout.py", b"import sys\nprint(sys.stdin.read().upper(), end='')\n", 0o755),
        ]:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_skill_push_and_run(client: Genesis) -> None:
    rev = client.push_skill(_skill_archive())
    assert rev["name"] == "py-shout"
    assert "py-shout" in [s["name"] for s in client.list_skills()]
    assert client.get_skill("py-shout")["revision"] == rev["revision"]
    run = client.run_skill("py-shout", "shout.py", stdin="hello")
    assert run["stdout"] == "HELLO" and run["state"] == "succeeded", run
    with pytest.raises(NotFound) as ei:
        client.run_skill("no-such-skill", "x.py")
    assert ei.value.code == "skill_not_found"


def test_async_areas(service: Service, runtime: str) -> None:
    async def main() -> None:
        async with AsyncGenesis(service.url, service.api_key) as c:
            async with c.sandbox(PROFILE, runtime=runtime, risk_level=risk(runtime)) as s:
                link = await s.port_link(8080, ttl_seconds=60)
                assert link["port"] == 8080
                await s.write_file("b.txt", "x\n")
                assert "b.txt" in [f["path"] for f in (await s.diff())["files"]]
                res = await s.apply_patch("--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n")
                assert res["applied"] and await s.read_file("b.txt") == b"y\n"
                await s.add_trace_event("task.status", {"status": "async"})
                assert any([(e.get("data") or {}).get("status") == "async" async for e in s.trace()])
                buf = io.BytesIO()
                assert await s.export_trace(buf) > 0 and gzip.decompress(buf.getvalue())
            async with c.create_mcp_server("py-add", runtime=runtime) as srv:
                res = await srv.call_tool("add", {"a": 1, "b": 1})
                assert res["content"][0]["text"] in ("2", "2.0")

    asyncio.run(main())


def test_file_operations(sb: Sandbox) -> None:
    sb.mkdir("ops/a/b", parents=True)
    written = sb.upload_files({"one.txt": b"alpha beta\n", "sub/two.txt": b"beta gamma\n"}, path="ops/a")
    assert sorted(f["path"].rsplit("/", 1)[-1] for f in written) == ["one.txt", "two.txt"], written
    st = sb.stat("ops/a/one.txt")
    assert st["size"] == 11 and st.get("type", "file") == "file", st
    sb.move("ops/a/one.txt", "ops/a/uno.txt")
    with pytest.raises(NotFound):
        sb.stat("ops/a/one.txt")
    sb.chmod("ops/a/uno.txt", "0600")
    assert int(str(sb.stat("ops/a/uno.txt")["mode"]), 8) & 0o777 == 0o600
    found = sb.search("ops", content="beta")
    assert sorted(m["path"].rsplit("/", 1)[-1] for m in found["matches"]) == ["two.txt", "uno.txt"], found
    rep = sb.replace("beta", "BETA", path="ops", glob="*.txt")
    assert rep["replacements"] == 2 and sb.read_file("ops/a/sub/two.txt") == b"BETA gamma\n", rep
    tar = b"".join(sb.iter_archive("ops/a"))
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        names = tf.getnames()
        assert any(n.endswith("uno.txt") for n in names), names
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("x/y.txt")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"xyz"))
    res = sb.extract("ops/ex", buf.getvalue())
    assert res["files"] == 1 and sb.read_file("ops/ex/x/y.txt") == b"xyz", res
    sb.delete_file("ops", recursive=True)
    with pytest.raises(NotFound):
        sb.stat("ops")


def test_sandbox_settings_jobs_and_lookups(sb: Sandbox) -> None:
    client = sb._c
    sb.set_metadata({"area": "pysdk"})
    assert client.get_sandbox(sb.id).data["metadata"] == {"area": "pysdk"}
    before = sb.refresh().data["expires_at"]
    assert sb.renew(ttl_seconds=1200).data["expires_at"] >= before
    net = sb.network()
    assert net["policy"]["mode"] == "none" and net["resource_version"], net
    again = sb.set_network("none", if_match=net["resource_version"])
    assert again["policy"]["mode"] == "none"
    with pytest.raises(GenesisError) as ei:  # a running sandbox cannot gain an interface
        sb.set_network("allowlist", allow=[{"host": "example.com"}])
    assert ei.value.code == "network_mode_requires_recreate", ei.value
    assert isinstance(sb.network_events(limit=5)["items"], list)
    r = sb.exec("echo listed")
    assert r.job_id in [j.id for j in sb.jobs(limit=50)]
    with sb.create_session() as s:
        assert client.get_session(s.id).id == s.id
    with sb.create_context() as ctx:
        assert client.get_context(ctx.id).id == ctx.id
    t = sb.terminal_ticket()
    assert t["ticket"] and t["expires_at"]
