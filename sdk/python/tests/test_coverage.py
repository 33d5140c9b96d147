"""Every operation of api/openapi.yaml has a method in the SDK (sync and
async), or is in EXCLUDED with the reason. A new route fails this test
until the SDK covers it or the list says why it need not."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Tuple

import genesis_sandbox._async as A
import genesis_sandbox._sync as S

SPEC = Path(__file__).resolve().parents[3] / "api" / "openapi.yaml"

# operationId -> "Class.method" (the class of the same name in both clients;
# Genesis is AsyncGenesis in the async one).
COVERED: Dict[str, str] = {
    "getCapabilities": "Genesis.capabilities", "whoami": "Genesis.whoami", "listProfiles": "Genesis.profiles",
    "listImages": "Genesis.images",
    "createSandbox": "Genesis.create_sandbox", "listSandboxes": "Genesis.list_sandboxes",
    "getSandbox": "Genesis.get_sandbox", "patchSandbox": "Sandbox.set_metadata",
    "deleteSandbox": "Sandbox.destroy", "getSandboxNetwork": "Sandbox.network",
    "putSandboxNetwork": "Sandbox.set_network", "listSandboxNetworkEvents": "Sandbox.network_events",
    "renewSandbox": "Sandbox.renew", "pauseSandbox": "Sandbox.pause", "resumeSandbox": "Sandbox.resume",
    "hibernateSandbox": "Sandbox.hibernate", "createSnapshot": "Sandbox.snapshot",
    "listSandboxSnapshots": "Sandbox.snapshots", "forkSandbox": "Sandbox.fork", "rollbackSandbox": "Sandbox.rollback",
    "diffSandbox": "Sandbox.diff", "applyPatch": "Sandbox.apply_patch",
    "listSnapshots": "Genesis.list_snapshots", "getSnapshot": "Genesis.get_snapshot",
    "deleteSnapshot": "Genesis.delete_snapshot",
    "execInSandbox": "Sandbox.exec", "listSandboxJobs": "Sandbox.jobs", "getJob": "Genesis.job",
    "listJobArtifacts": "Genesis.list_artifacts", "downloadArtifact": "Genesis.iter_artifact",
    "getArtifact": "Genesis.get_artifact", "streamJobLogs": "Job.logs", "writeStdin": "Job.write_stdin",
    "closeStdin": "Job.close_stdin", "cancelJob": "Job.cancel",
    "createSession": "Sandbox.create_session", "getSession": "Genesis.get_session",
    "deleteSession": "Session.close", "execInSession": "Session.exec",
    "createContext": "Sandbox.create_context", "getContext": "Genesis.get_context",
    "deleteContext": "CodeContext.close", "runCode": "CodeContext.run",
    "writeFile": "Sandbox.write_file", "uploadFiles": "Sandbox.upload_files", "readFile": "Sandbox.iter_file",
    "statFile": "Sandbox.stat", "listFiles": "Sandbox.list_files", "makeDirectory": "Sandbox.mkdir",
    "moveFile": "Sandbox.move", "deleteFile": "Sandbox.delete_file", "chmodFile": "Sandbox.chmod",
    "createTerminalTicket": "Sandbox.terminal_ticket",
    "openTerminal": "Sandbox.terminal", "extractArchive": "Sandbox.extract",
    "readArchive": "Sandbox.iter_archive", "searchFiles": "Sandbox.search", "replaceInFiles": "Sandbox.replace",
    "createTenant": "Genesis.create_tenant", "listTenants": "Genesis.list_tenants",
    "getTenant": "Genesis.get_tenant", "updateTenant": "Genesis.update_tenant",
    "deleteTenant": "Genesis.delete_tenant", "createAPIKey": "Genesis.create_api_key",
    "listAPIKeys": "Genesis.list_api_keys", "revokeAPIKey": "Genesis.revoke_api_key",
    "createPortLink": "Sandbox.port_link", "getBrowserStatus": "Sandbox.browser_status",
    "replayTrace": "Genesis.replay_trace",
    "startRecording": "Sandbox.start_recording", "getRecording": "Sandbox.recording",
    "stopRecording": "Sandbox.stop_recording", "startBrowserRecording": "Sandbox.start_recording",
    "getBrowserRecording": "Sandbox.recording", "stopBrowserRecording": "Sandbox.stop_recording",
    "createDisplayLink": "Sandbox.display_link", "runComputerActions": "Sandbox.computer",
    "getDesktopControl": "Sandbox.control", "takeDesktopControl": "Sandbox.take_control",
    "releaseDesktopControl": "Sandbox.release_control", "requestHuman": "Sandbox.request_human",
    "runBrowserActions": "Sandbox.browser", "listBrowserDownloads": "Sandbox.browser_downloads",
    "readTrace": "Sandbox.trace", "postTraceEvent": "Sandbox.add_trace_event", "exportTrace": "Sandbox.export_trace",
    "pauseTrace": "Sandbox.pause_trace", "resumeTrace": "Sandbox.resume_trace", "stepTrace": "Sandbox.step_trace",
    "abortTrace": "Sandbox.abort_trace", "keepBrowserDownloads": "Sandbox.keep_browser_downloads",
    "saveBrowserProfile": "Sandbox.save_browser_profile", "loadBrowserProfile": "Sandbox.load_browser_profile",
    "createBrowserLink": "Sandbox.browser_link", "listAudit": "Genesis.audit",
    "acquireLease": "Genesis.lease", "listLeases": "Genesis.list_leases", "getLease": "Genesis.get_lease",
    "releaseLease": "Lease.release", "renewLease": "Lease.renew",
    "listPools": "Genesis.pools", "drainPool": "Genesis.drain_pool",
    "createMCPServer": "Genesis.create_mcp_server", "listMCPServers": "Genesis.list_mcp_servers",
    "getMCPServer": "Genesis.get_mcp_server", "deleteMCPServer": "McpServer.delete",
    "listMCPServerTools": "McpServer.tools", "listMCPServerPins": "McpServer.pins",
    "approveMCPPin": "McpServer.approve_pin", "listMCPApprovals": "McpServer.approvals",
    "decideMCPApproval": "McpServer.decide_approval", "listMCPServerCalls": "McpServer.calls",
    "listMCPCatalog": "Genesis.mcp_catalog", "addMCPCatalogEntry": "Genesis.add_mcp_catalog_entry",
    "getMCPCatalogEntry": "Genesis.get_mcp_catalog_entry", "deleteMCPCatalogEntry": "Genesis.delete_mcp_catalog_entry",
    "POST /v1/mcp/servers/{id}/mcp": "McpServer.call_tool", "DELETE /v1/mcp/servers/{id}/mcp": "McpServer.call_tool",
    "pushSkill": "Genesis.push_skill", "listSkills": "Genesis.list_skills", "getSkill": "Genesis.get_skill",
    "listSkillRevisions": "Genesis.skill_revisions", "getSkillRevision": "Genesis.get_skill_revision",
    "getSkillFile": "Genesis.read_skill_file", "runSkill": "Genesis.run_skill",
    "createVolume": "Genesis.create_volume", "listVolumes": "Genesis.list_volumes",
    "getVolume": "Genesis.get_volume", "deleteVolume": "Genesis.delete_volume",
    "writeVolumeFile": "Genesis.write_volume_file", "readVolumeFile": "Genesis.iter_volume_file",
    "statVolumeFile": "Genesis.stat_volume_file", "listVolumeFiles": "Genesis.list_volume_files",
    "deleteVolumeFile": "Genesis.delete_volume_file",
}

# Operations the SDK does not wrap, by operationId or "METHOD path" prefix, and why.
EXCLUDED: List[Tuple[str, str]] = [
    ("health", "operations probe, not a client call"), ("ready", "operations probe"),
    ("metrics", "Prometheus scrape"),
    ("/e2b/", "the E2B compatibility adapter: E2B's own SDK speaks it"),
    ("/opensandbox/", "the OpenSandbox compatibility adapter: its own SDK speaks it"),
    ("/v1/sandboxes/{id}/ports/{port}/", "the port proxy: any HTTP client, the URL of port_link"),
    ("/v1/previews/", "preview links: opened by a browser or any HTTP client"),
    ("/v1/sandboxes/{id}/browser/json", "the CDP discovery proxy: a CDP client (browser_link gives its URL)"),
    ("/v1/browsers/", "CDP/Playwright through a browser link: a CDP or Playwright client"),
    ("browserDevtools", "CDP WebSocket: a CDP client"), ("browserPlaywright", "Playwright WebSocket"),
    ("displayVNC", "RFB over WebSocket: a VNC client (display_link gives its URL)"),
    ("displayVNCByLink", "RFB over WebSocket through a display link"),
    ("displayControlByLink", "the viewer page's control WebSocket"),
    ("displayViewerRedirect", "an HTML page for people"), ("displayViewer", "an HTML page for people"),
    ("viewerAsset", "the viewer page's static files"),
    ("attachJob", "WebSocket attach: Job.logs and Job.write_stdin carry the same over plain HTTP"),
    ("GET /v1/mcp/servers/{id}/mcp", "the MCP server-to-client stream: an MCP client's, call_tool needs none"),
    ("/v1/mcp/skills", "the service's skills MCP server: an MCP client"),
    ("/v1/mcp/sandbox", "the service's sandbox MCP server: an MCP client"),
]


def operations() -> List[Tuple[str, str, str]]:
    """(operationId or "", METHOD, path) of every operation in the document."""
    ops: List[Tuple[str, str, str]] = []
    path = ""
    for line in SPEC.read_text().splitlines():
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            path = m.group(1)
            continue
        m = re.match(r"^    (get|put|post|patch|delete|head|options):", line)
        if m and path:
            ops.append(("", m.group(1).upper(), path))
            continue
        m = re.match(r"^      operationId:\s*(\S+)", line)
        if m and ops and not ops[-1][0]:
            ops[-1] = (m.group(1), ops[-1][1], ops[-1][2])
    return ops


def excluded(op_id: str, method: str, path: str) -> bool:
    for key, _ in EXCLUDED:
        if key == op_id or key == f"{method} {path}" or (key.startswith("/") and path.startswith(key)):
            return True
    return False


def test_every_operation_has_a_method() -> None:
    ops = operations()
    assert len(ops) > 150, "the parser found too few operations"
    missing = []
    for op_id, method, path in ops:
        key = op_id or f"{method} {path}"
        target = COVERED.get(key) or COVERED.get(f"{method} {path}")
        if target is None:
            if not excluded(op_id, method, path):
                missing.append(f"{key} ({method} {path})")
            continue
        cls, attr = target.split(".")
        for mod, name in ((S, cls), (A, "AsyncGenesis" if cls == "Genesis" else cls)):
            assert callable(getattr(getattr(mod, name), attr, None)), f"{key}: {mod.__name__}.{name}.{attr} is missing"
    assert not missing, ("operations with no SDK method (add one, or to EXCLUDED with the reason):\n"
                         + "\n".join(missing))


def test_lists_name_real_operations() -> None:
    """No stale entries: each COVERED key and EXCLUDED id is in the document."""
    ops = operations()
    ids = {o[0] for o in ops if o[0]} | {f"{m} {p}" for _, m, p in ops}
    assert not [k for k in COVERED if k not in ids]
    for key, _ in EXCLUDED:
        assert key in ids or any(p.startswith(key) for _, _, p in ops), key
