// The live view of a desktop sandbox, opened with a live-view link
// (/v1/displays/TOKEN/viewer): noVNC's RFB client over the service's
// WebSocket at /v1/displays/TOKEN/vnc. The link is the only credential:
// there is no VNC password, and no API key ever reaches this page. The
// role comes from the link and is enforced by the service, which drops an
// observer's input whatever this page sends.
import RFB from '@novnc/novnc';

const body = document.body;
const role = body.dataset.role;
const status = document.getElementById('status');
const roleText = document.getElementById('role');
roleText.textContent = role === 'controller'
  ? 'You control this desktop: your input takes over from the agent until you close this page.'
  : 'You are observing: your input does not reach this desktop.';

const wsURL = new URL(location.pathname.replace(/\/viewer$/, '/vnc'), location.href);
wsURL.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
// ?who=NAME names the person (for the control lease and the trace).
const who = new URLSearchParams(location.search).get('who');
if (who) wsURL.searchParams.set('who', who);

const rfb = new RFB(document.getElementById('screen'), wsURL.href, { shared: true });
rfb.scaleViewport = true;
rfb.viewOnly = role !== 'controller';
rfb.background = 'transparent';
rfb.addEventListener('connect', () => {
  status.textContent = 'Connected';
  body.dataset.state = 'connected';
  if (role === 'controller') rfb.focus();
});
rfb.addEventListener('disconnect', (e) => {
  status.textContent = e.detail.clean ? 'Disconnected' : 'The connection was lost (the link may have expired): ask for a new link';
  body.dataset.state = 'disconnected';
});
rfb.addEventListener('desktopname', (e) => { document.title = `${e.detail.name} — Genesis Sandbox`; });
// For tests and debugging: the RFB object (its viewOnly is a courtesy,
// not a control).
window.genesisViewer = rfb;

// Who holds control, and the agent's requests for a person, followed by
// long polls on the link's /control (it answers when either changes).
const controlText = document.getElementById('control');
const requestList = document.getElementById('requests');
const controlURL = location.pathname.replace(/\/viewer$/, '/control');
function showControl(st) {
  controlText.textContent = st.holder ? `Control: ${st.holder}${st.reason ? ` (${st.reason})` : ''}` : 'Control: the agent may act';
  body.dataset.holder = st.holder || '';
  requestList.replaceChildren(...(st.requests || []).map((r) => {
    const li = document.createElement('li');
    li.textContent = `The agent asks for a person: ${r.reason}`;
    return li;
  }));
}
async function followControl() {
  let after = -1;
  for (;;) {
    try {
      const q = after < 0 ? '' : `?after=${after}&wait_ms=30000`;
      const r = await fetch(controlURL + q, { cache: 'no-store' });
      if (r.status === 404) { controlText.textContent = 'The link has expired'; return; }
      if (!r.ok) throw new Error(`control: ${r.status}`);
      const st = await r.json();
      showControl(st);
      after = st.version;
    } catch {
      await new Promise((res) => setTimeout(res, 2000));
    }
  }
}
followControl();
