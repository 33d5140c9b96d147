"""Fixtures that run the SDK against a real Genesis Sandbox service.

The session builds the service's binaries from this checkout with
``go build`` into a temporary directory (as test/e2e's harness does),
starts ``sandbox-service serve`` on a free loopback port with a fresh data
dir and API key, and waits until /readyz reports runc and runsc healthy.
At the end it stops the service and checks that no container of its
instance is left. The tests skip only when Docker is absent.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
RUNTIMES = ["runc", "runsc"]
READY_TIMEOUT = 120.0

# A stdio MCP server with one tool, add, for the MCP server instance tests.
MCP_SERVER = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    i, meth = m.get("id"), m.get("method")
    if i is None:
        continue
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "py-add", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "add", "description": "Adds a and b.", "inputSchema": {"type": "object",
             "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}]}
    elif meth == "tools/call":
        a = m["params"]["arguments"]
        r = {"content": [{"type": "text", "text": str(a["a"] + a["b"])}]}
    elif meth == "ping":
        r = {}
    else:
        r = None
    out = {"jsonrpc": "2.0", "id": i}
    if r is None:
        out["error"] = {"code": -32601, "message": "method not found"}
    else:
        out["result"] = r
    sys.stdout.write(json.dumps(out) + "\\n")
    sys.stdout.flush()
"""
STOP_TIMEOUT = 40.0


def _docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def _free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1:%d" % s.getsockname()[1]


def _build(bin_dir: Path) -> None:
    builds = [("./cmd/sandbox-service", "sandbox-service", False),
              ("./cmd/genesis-agent", "genesis-agent", True),
              ("./cmd/genesis-egress", "genesis-egress", True)]
    for pkg, name, static in builds:
        env = dict(os.environ)
        if static:
            env["CGO_ENABLED"] = "0"
        out = subprocess.run(["go", "build", "-trimpath", "-o", str(bin_dir / name), pkg],
                             cwd=REPO, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"go build {pkg}: {out.stderr}")
    bin_dir.chmod(0o755)


def _containers(instance: str) -> List[str]:
    out = subprocess.run(["docker", "ps", "-a", "-q", "--no-trunc", "--filter",
                          f"label=dev.genesis.instance={instance}"], capture_output=True, text=True)
    return out.stdout.split()


class Service:
    def __init__(self, url: str, api_key: str, data_dir: Path, log: Path) -> None:
        self.url = url
        self.api_key = api_key
        self.admin_key = ""  # the built-in admin tenant's key (tenants, keys, audit of every tenant)
        self.data_dir = data_dir
        self.log = log

    def instance(self) -> str:
        p = self.data_dir / "instance_id"
        return p.read_text().strip() if p.exists() else ""


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    if not _docker_available():
        pytest.skip("Docker is not available")
    tmp = Path(tempfile.mkdtemp(prefix="genesis-pysdk-"))
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    data_dir = tmp / "data"
    data_dir.mkdir()
    _build(bin_dir)
    config = tmp / "config.yaml"
    # No warm pools: they would start containers the tests do not use.
    # A catalog entry runs MCP_SERVER (a stdio MCP server in Python) in
    # the Python image, and skills run there too (one image fewer to build).
    config.write_text("warm_pools: false\n"
                      "skills: {profile: code-python-basic}\n"
                      "mcp:\n  catalog:\n"
                      "    - {name: py-add, source: builtin, profile: code-python-basic, "
                      f"command: [python3, -c, {json.dumps(MCP_SERVER)}]}}\n")
    api_key = "pysdk_" + secrets.token_hex(16)
    admin_key = "pysdkadm_" + secrets.token_hex(16)
    addr = _free_addr()
    log_path = tmp / "service.log"
    log = open(log_path, "wb")
    env = dict(os.environ, GENESIS_CONFIG="", GENESIS_API_KEY="")
    proc = subprocess.Popen([str(bin_dir / "sandbox-service"), "serve", "--addr", addr, "--data-dir",
                             str(data_dir), "--api-key", api_key, "--admin-key", admin_key,
                             "--config", str(config)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    svc = Service("http://" + addr, api_key, data_dir, log_path)
    svc.admin_key = admin_key
    try:
        _wait_ready(proc, svc)
        yield svc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        inst = svc.instance()
        left = _containers(inst) if inst else []
        if left:
            subprocess.run(["docker", "rm", "-f", *left], capture_output=True)
        if inst:
            imgs = subprocess.run(["docker", "images", "-a", "-q", "--filter", f"label=dev.genesis.instance={inst}"],
                                  capture_output=True, text=True).stdout.split()
            if imgs:
                subprocess.run(["docker", "rmi", "-f", *sorted(set(imgs))], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        assert not left, f"containers of instance {inst} left behind: {left}"


def _wait_ready(proc: "subprocess.Popen[bytes]", svc: Service) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    last = "no answer yet"
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"sandbox-service exited early ({proc.returncode}):\n{svc.log.read_text()}")
        try:
            r = httpx.get(svc.url + "/readyz", timeout=5)
            last = f"{r.status_code} {r.text.strip()}"
            if r.status_code == 200:
                checks: Dict[str, str] = r.json().get("checks", {})
                if all(checks.get("runtime." + rt) == "ok" for rt in RUNTIMES):
                    return
        except httpx.HTTPError as e:
            last = str(e)
        if time.monotonic() > deadline:
            raise RuntimeError(f"/readyz not ready with {RUNTIMES} within {READY_TIMEOUT}s; last: {last}\n"
                               f"{svc.log.read_text()}")
        time.sleep(0.1)


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(service: Service) -> Iterator["object"]:
    from genesis_sandbox import Genesis

    with Genesis(service.url, service.api_key) as c:
        yield c
