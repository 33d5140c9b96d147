"""Browser and desktop actions through the SDK, one sandbox of each per
runtime: screenshots come back as bytes, and while a person holds the
desktop's control the SDK raises ControlHeld."""

from __future__ import annotations

import struct
import time
from typing import Callable, Iterator

import httpx
import pytest

from conftest import Service
from genesis_sandbox import ControlHeld, Genesis, GenesisError, Sandbox

PNG = b"\x89PNG\r\n\x1a\n"
READY_TIMEOUT = 90.0


def png_size(b: bytes) -> tuple:
    assert b.startswith(PNG), b[:16]
    return struct.unpack(">II", b[16:24])


def eventually(what: str, check: Callable[[], bool], timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except GenesisError as e:
            last = str(e)
        time.sleep(0.25)
    raise AssertionError(f"{what} within {timeout}s; last: {last}")


def sandbox_of(profile: str, runtime: str, service: Service) -> Iterator[Sandbox]:
    kw = {"risk_level": "low"} if runtime == "runc" else {}  # the profiles' default (high) runs under runsc only
    with Genesis(service.url, service.api_key) as c:
        with c.sandbox(profile, runtime=runtime, ttl_seconds=600, **kw) as s:
            yield s


@pytest.fixture(scope="module", params=["runc", "runsc"])
def browser_sb(request: pytest.FixtureRequest, service: Service) -> Iterator[Sandbox]:
    yield from sandbox_of("browser-playwright", request.param, service)


@pytest.fixture(scope="module", params=["runc", "runsc"])
def desktop_sb(request: pytest.FixtureRequest, service: Service) -> Iterator[Sandbox]:
    yield from sandbox_of("desktop-vnc", request.param, service)


def test_browser_actions_and_screenshots(browser_sb: Sandbox) -> None:
    sb = browser_sb
    eventually("the browser ready", lambda: bool(sb.browser_status().get("ready")))
    r = sb.browser([
        # The sandbox has no network: the page is written in place.
        {"type": "evaluate", "expression": "document.title = 'pysdk'; "
                                           "document.body.innerHTML = '<h1 id=h>hello from the sdk</h1>'; 6 * 7"},
        {"type": "text", "selector": "#h"},
        {"type": "screenshot"},                     # kept as an artifact, read back as bytes
        {"type": "screenshot", "keep": False},      # answered inline
    ])
    assert r.ok and r.title == "pysdk", r.raw
    assert r.results[0]["value"] == 42 and r.results[1]["value"] == "hello from the sdk"
    assert len(r.screenshots) == 2 and all(png_size(s)[0] > 0 for s in r.screenshots)
    assert r.results[2]["artifact"]["sha256"]
    shot = sb.browser_screenshot()
    assert png_size(shot)[0] > 0
    # A failing action stops the batch: a result, not an exception.
    bad = sb.browser([{"type": "click", "selector": "#missing", "timeout_ms": 500}, {"type": "screenshot"}])
    assert not bad.ok and bad.error and len(bad.results) == 1 and bad.screenshots == []


def test_desktop_screenshot_and_control(desktop_sb: Sandbox) -> None:
    sb = desktop_sb
    shots = []
    eventually("the desktop's first screenshot", lambda: bool(shots.append(sb.screenshot()) or True))
    w, h = png_size(shots[-1])
    assert w > 0 and h > 0
    r = sb.computer([{"action": "mouse_move", "coordinate": [10, 10]}, {"action": "cursor_position"}], screenshot=True)
    assert r.ok and r.completed == 2 and len(r.screenshots) == 1 and png_size(r.screenshots[0]) == (w, h)
    held = sb.take_control("human:alice", reason="captcha")
    assert held["holder"] == "human:alice"
    with pytest.raises(ControlHeld) as ei:
        sb.computer([{"action": "mouse_move", "coordinate": [20, 20]}])
    e = ei.value
    assert e.status == 409 and e.code == "control_held" and e.request_id
    with pytest.raises(ControlHeld):
        sb.screenshot()
    released = sb.release_control()
    assert released["holder"] == "" and released["version"] > held["version"]
    assert sb.control()["holder"] == ""
    assert png_size(sb.screenshot()) == (w, h)


def test_recording_segments(desktop_sb: Sandbox, service: Service) -> None:
    sb = desktop_sb
    eventually("the desktop ready", lambda: bool(sb.screenshot()))
    rec = sb.start_recording(fps=2, segment_seconds=1)
    assert rec["state"] == "recording" and rec["source"] == "display", rec
    try:
        eventually("a kept segment", lambda: sb.recording()["segments"] >= 1)
    finally:
        stopped = sb.stop_recording()
    assert stopped["state"] == "stopped" and stopped["segments"] >= 1, stopped
    segs = sb.recording_segments(rec["id"])
    assert len(segs) == stopped["segments"] and segs[0]["artifact"]["id"], segs
    with Genesis(service.url, service.api_key) as c:
        mp4 = c.read_artifact(segs[0]["artifact"]["id"])
    assert len(mp4) == segs[0]["artifact"]["size"]
    assert mp4[4:8] in (b"ftyp", b"styp", b"moof"), mp4[:16]


def test_display_link_and_help(desktop_sb: Sandbox) -> None:
    link = desktop_sb.display_link(ttl_seconds=60)
    assert link["role"] == "observer" and link["vnc_url"] and link["viewer_url"], link
    help = desktop_sb.request_human("a captcha")
    assert help["requests"], help


def test_browser_link_and_profile(browser_sb: Sandbox) -> None:
    eventually("the browser ready", lambda: bool(browser_sb.browser_status().get("ready")))
    bl = browser_sb.browser_link(ttl_seconds=60)
    assert bl["sandbox_id"] == browser_sb.id and bl["playwright_url"].startswith("ws://"), bl
    # The link carries its own token: CDP discovery answers through it without the API key.
    version = httpx.get(bl["cdp_url"] + "/json/version", timeout=30).json()
    assert "Browser" in version, version
    assert isinstance(browser_sb.browser_downloads(), list)
    saved = browser_sb.save_browser_profile("pysdk")
    art = saved.get("artifact_id") or (saved.get("artifact") or {}).get("id")
    assert art, saved
    assert browser_sb.load_browser_profile(art) is not None
