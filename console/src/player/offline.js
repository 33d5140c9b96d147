// offline.js: the player.html of a trace export, opened from the unpacked
// archive (file:// or any static server): the events are in the page, the
// artifacts are beside it under artifacts/.
import { renderPlayer } from './player.js';

const data = JSON.parse(document.getElementById('trace-data').textContent);
renderPlayer(document.getElementById('main'), data.events, (id, ext) => `artifacts/${id}${data.ext[id] || ext}`,
  `Trace of ${data.sandbox_id}`);
