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
