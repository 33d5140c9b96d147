"""Named volumes through the SDK against a real service, under runc and
runsc: create, upload, mount into a sandbox and a lease, download a range,
and delete (refused with VolumeInUse while mounted)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import secrets
import subprocess
import time
from typing import AsyncIterator, Iterator

import pytest

from conftest import Service
from genesis_sandbox import Conflict, Genesis, GenesisError, NotFound, VolumeBusy, VolumeInUse

PROFILE = "code-python-basic"
HOLD_TIMEOUT = 60.0


def risk(runtime: str) -> str:
    return "low" if runtime == "runc" else "medium"


@pytest.fixture
def volume(client: Genesis, service: Service, runtime: str) -> Iterator[str]:
    """A fresh volume of 64 MiB; deleted at the end (unmounted from the
    host if the service could not delete it, so no loop mount is left)."""
    name = f"py-{runtime}-{secrets.token_hex(4)}"
    try:
        v = client.create_volume(name, 64)
    except GenesisError as e:
        if e.status == 501 and os.environ.get("CI") != "true":
            pytest.skip(f"volumes unavailable on this host: {e}")
        raise
    assert (v["name"], v["size_mb"], v["mounts"]) == (name, 64, []) and v["id"].startswith("vol_")
    try:
        yield name
    finally:
        try:
            client.delete_volume(name)
        except GenesisError:
            data = service.data_dir / "volumes" / v["id"] / "data"
            subprocess.run(["umount", "-l", str(data)], capture_output=True)
            raise


def wait_unheld(client: Genesis, name: str) -> None:
    """Polls until no sandbox holds the volume (a released lease's sandbox
    is destroyed in the background)."""
    deadline = time.monotonic() + HOLD_TIMEOUT
    while True:
        mounts = client.get_volume(name)["mounts"]
        if not mounts:
            return
        assert time.monotonic() < deadline, f"volume {name} still held by {mounts}"
        time.sleep(0.1)


def test_volume_round_trip(client: Genesis, volume: str, runtime: str) -> None:
    name = volume
    assert name in [v["name"] for v in client.list_volumes()]

    # Upload without any sandbox: streamed from a file object; the
    # volume's used bytes grow by it.
    used_before = client.get_volume(name)["used_bytes"]
    assert 0 < used_before < 64 << 20
    data = bytes(range(256)) * 512
    w = client.write_volume_file(name, "dir/data.bin", io.BytesIO(data))
    assert client.get_volume(name)["used_bytes"] - used_before >= len(data)
    assert (w.path.lstrip("/"), w.size, w.sha256) == ("dir/data.bin", len(data), hashlib.sha256(data).hexdigest())
    assert client.stat_volume_file(name, "dir/data.bin")["size"] == len(data)
    listing = client.list_volume_files(name, "dir")
    assert [e["name"] for e in listing["entries"]] == ["data.bin"] and listing["truncated"] is False
    with pytest.raises(Conflict) as exists:
        client.write_volume_file(name, "dir/data.bin", b"x", overwrite=False)
    assert exists.value.code == "file_exists"

    # A sandbox mounting it (writable) reads the file and writes one.
    with client.sandbox(PROFILE, runtime=runtime, risk_level=risk(runtime),
                        volumes=[{"volume": name, "path": "/mnt/data"}]) as sb:
        r = sb.exec(["sha256sum", "/mnt/data/dir/data.bin"])
        assert r.ok and r.stdout.split()[0] == hashlib.sha256(data).hexdigest(), r
        r = sb.exec("echo from-" + runtime + " > /mnt/data/from-sandbox.txt")
        assert r.ok, r.stderr
        held = client.get_volume(name)["mounts"]
        assert held == [{"sandbox_id": sb.id, "path": "/mnt/data", "read_only": False}]
        with pytest.raises(VolumeInUse) as in_use:
            client.delete_volume(name)
        assert (in_use.value.status, in_use.value.code) == (409, "volume_in_use")
        with pytest.raises(VolumeBusy) as busy:
            client.write_volume_file(name, "other.txt", b"no")
        assert busy.value.code == "volume_busy"
        assert client.read_volume_file(name, "dir/data.bin", offset=10, length=5) == data[10:15]
    assert client.get_volume(name)["mounts"] == []  # a sandbox's destroy lets go at once

    # Downloads: a range, a tail, the whole file streamed into a file object.
    assert client.read_volume_file(name, "dir/data.bin", offset=1000, length=300) == data[1000:1300]
    assert client.read_volume_file(name, "dir/data.bin", offset=len(data) - 7) == data[-7:]
    buf = io.BytesIO()
    assert client.download_volume_file(name, "dir/data.bin", buf) == len(data) and buf.getvalue() == data
    assert client.read_volume_file(name, "from-sandbox.txt") == f"from-{runtime}\n".encode()

    # A lease mounts it read-only (the CLI's NAME:/PATH:ro form).
    with client.lease(PROFILE, runtime=runtime, risk_level=risk(runtime), volumes=[f"{name}:/mnt/ro:ro"]) as lease:
        r = lease.sandbox.exec("cat /mnt/ro/from-sandbox.txt && ! touch /mnt/ro/nope 2>/dev/null")
        assert r.ok and r.stdout == f"from-{runtime}\n", r
        assert client.get_volume(name)["mounts"][0]["read_only"] is True
    wait_unheld(client, name)

    client.delete_volume_file(name, "dir", recursive=True)
    with pytest.raises(NotFound):
        client.stat_volume_file(name, "dir/data.bin")
    client.delete_volume(name)
    with pytest.raises(NotFound) as gone:
        client.get_volume(name)
    assert gone.value.code == "volume_not_found"
    client.delete_volume(name)  # deleting a missing volume succeeds


def test_async_volume_files(service: Service) -> None:
    """The async client: an upload streamed from an async iterator, a
    ranged download, a listing and a delete (no sandbox needed)."""
    from genesis_sandbox import AsyncGenesis

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(4):
            yield bytes([i]) * 1000

    async def run() -> None:
        async with AsyncGenesis(service.url, service.api_key) as c:
            name = "py-async-" + secrets.token_hex(4)
            try:
                await c.create_volume(name, 16)
            except GenesisError as e:
                if e.status == 501 and os.environ.get("CI") != "true":
                    pytest.skip(f"volumes unavailable on this host: {e}")
                raise
            try:
                w = await c.write_volume_file(name, "/a/b.bin", chunks(), mode="0600")
                assert w.size == 4000
                assert await c.read_volume_file(name, "a/b.bin", offset=999, length=2) == b"\x00\x01"
                st = await c.stat_volume_file(name, "a/b.bin")
                assert st["size"] == 4000 and st["mode"].endswith("600"), st
                assert [e["name"] for e in (await c.list_volume_files(name))["entries"]] == ["a"]
                await c.delete_volume_file(name, "a/b.bin")
                assert (await c.list_volume_files(name, "a"))["entries"] == []
            finally:
                await c.delete_volume(name)
            assert name not in [v["name"] for v in await c.list_volumes()]

    asyncio.run(run())
