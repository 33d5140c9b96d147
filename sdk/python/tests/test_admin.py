"""The service-wide calls against a real service: capabilities, profiles,
images, pools, audit, tenants and API keys (the suite's key is an admin
key), the MCP catalog, leases listed, and skill revisions and files."""

from __future__ import annotations

import io
import secrets
import tarfile
from typing import Iterator

import pytest

from conftest import RUNTIMES, Service
from genesis_sandbox import Genesis, GenesisError, NotFound, Unauthorized


def test_service_info(client: Genesis) -> None:
    caps = client.capabilities()
    assert set(RUNTIMES) <= {r["name"] if isinstance(r, dict) else r for r in caps["runtimes"]}, caps
    names = [p["name"] for p in client.profiles()]
    assert "code-python-basic" in names
    imgs = {i["name"]: i for i in client.images()}
    assert imgs["code-python-basic"]["status"] == "present", imgs
    pools = client.pools()
    assert isinstance(pools["items"], list)


@pytest.fixture
def admin(service: Service) -> Iterator[Genesis]:
    with Genesis(service.url, service.admin_key) as c:
        yield c


def test_tenant_and_keys(admin: Genesis, client: Genesis, service: Service) -> None:
    with pytest.raises(GenesisError) as ei:  # the suite's own key is not an admin key
        client.list_tenants()
    assert ei.value.status == 403 and ei.value.code == "admin_required"
    client = admin
    name = "pysdk-" + secrets.token_hex(4)
    t = client.create_tenant(name, weight=3)
    assert t["name"] == name
    try:
        assert name in [x["name"] for x in client.list_tenants()]
        assert client.update_tenant(name, weight=5)["weight"] == 5
        assert client.get_tenant(name)["weight"] == 5
        key = client.create_api_key(name, description="pysdk test")
        assert key["key"] and key["tenant"] == name
        assert key["id"] in [k["id"] for k in client.list_api_keys(name)]
        with Genesis(service.url, key["key"]) as tc:
            assert tc.whoami()["tenant"] == name
            client.revoke_api_key(name, key["id"])
            with pytest.raises(Unauthorized):
                tc.whoami()
        # The audit log has the creation, found by its filters.
        entries = list(client.audit(target=name, limit=2))
        actions = {e["action"] for e in entries}
        assert {"POST /v1/tenants", "PATCH /v1/tenants/{name}"} <= actions, entries
    finally:
        client.delete_tenant(name)
    with pytest.raises(NotFound):
        client.get_tenant(name)


def test_audit_pages(client: Genesis) -> None:
    for i in range(2):  # writes are audited
        name = f"pysdk-audit-{i}-" + secrets.token_hex(3)
        client.add_mcp_catalog_entry(name, ["true"])
        client.delete_mcp_catalog_entry(name)
    # limit 1: every entry comes from its own page, followed by the cursor.
    seen = []
    for e in client.audit(limit=1):
        seen.append(e)
        if len(seen) == 3:
            break
    assert len(seen) == 3 and len({repr(sorted(e.items())) for e in seen}) == 3, seen


def test_mcp_catalog(client: Genesis) -> None:
    assert "py-add" in [e["name"] for e in client.mcp_catalog()]
    name = "pysdk-echo-" + secrets.token_hex(3)
    added = client.add_mcp_catalog_entry(name, ["python3", "-c", "pass"], description="never started")
    assert added["name"] == name
    assert client.get_mcp_catalog_entry(name)["name"] == name
    client.delete_mcp_catalog_entry(name)
    with pytest.raises(NotFound):
        client.get_mcp_catalog_entry(name)


def test_mcp_pins_approvals_calls(client: Genesis) -> None:
    with client.create_mcp_server("py-add", runtime="runc") as srv:
        assert [t["name"] for t in srv.tools()] == ["add"]  # the first list pins the definitions
        pins = srv.pins()
        assert [p["tool"] for p in pins] == ["add"] and pins[0]["hash"].startswith("sha256:"), pins
        with pytest.raises(GenesisError) as ei:  # nothing changed: nothing to approve
            srv.approve_pin("add", "sha256:" + "0" * 64)
        assert 400 <= ei.value.status < 500
        assert srv.approvals() == []
        assert srv.call_tool("add", {"a": 1, "b": 2})["content"][0]["text"] in ("3", "3.0")
        calls = srv.calls(limit=10)
        assert calls["items"] and calls["items"][0].get("tool") == "add", calls
        with pytest.raises(GenesisError) as ei:
            srv.decide_approval("apr_missing", "approve", "x" * 64)
        assert 400 <= ei.value.status < 500


def test_lease_listed(client: Genesis) -> None:
    with client.lease("code-python-basic", runtime="runc", risk_level="low", ttl_seconds=120) as lease:
        assert lease.id in [x.id for x in client.list_leases()]


def test_skill_revisions_and_files(client: Genesis) -> None:
    skill_md = b"---\nname: py-rev\ndescription: Revisions.\n---\nRevisions.\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for n, data in [("SKILL.md", skill_md), ("run.py", b"print('r')\n")]:
            info = tarfile.TarInfo(n)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    rev = client.push_skill(buf.getvalue())
    revs = client.skill_revisions("py-rev")
    assert rev["revision"] in [r["revision"] for r in revs]
    got = client.get_skill_revision("py-rev", rev["revision"])
    assert got["revision"] == rev["revision"]
    assert client.read_skill_file("py-rev", "SKILL.md") == skill_md
    assert client.read_skill_file("py-rev", "run.py", revision=rev["revision"]) == b"print('r')\n"
    with pytest.raises(NotFound):
        client.read_skill_file("py-rev", "nope.py")
