package main

import (
	"fmt"
	"net/http"
)

// originsServer serves a page that tries what a hostile page in a sandbox
// would try against the service's origins, for the origin-model tests:
//
//	/        runs the probe and writes its findings, as JSON, into <pre id=out>
//	/sw.js   a service worker that answers every fetch with "HIJACKED",
//	         sent with Service-Worker-Allowed: /
//	/clear   an answer with Clear-Site-Data: "storage" (wipes its origin's storage)
//
// The probe reads the console's API key from sessionStorage, registers
// /sw.js for the scope "/", fetches /clear, tosses a domain-wide cookie named like the
// service's preview cookie, and reports each outcome.
func originsServer(addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/sw.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Service-Worker-Allowed", "/")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprint(w, `self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (e) => e.respondWith(new Response('HIJACKED', {headers: {'Content-Type': 'text/html'}})));`)
	})
	mux.HandleFunc("/clear", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Clear-Site-Data", `"storage"`)
		fmt.Fprint(w, "cleared")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			fmt.Fprintf(w, "path %s cookie %q", r.URL.Path, r.Header.Get("Cookie"))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>probe</title><pre id=out>running</pre><script>
(async () => {
  const r = {origin: String(self.origin)};
  try { r.apiKey = sessionStorage.getItem('genesis.apiKey'); } catch (e) { r.apiKey = 'error: ' + e.name; }
  try { r.clear = (await fetch('clear')).headers.get('Clear-Site-Data') || 'none'; } catch (e) { r.clear = 'error: ' + e.name; }
  try { document.cookie = 'genesis_preview=tossed; domain=localhost; path=/'; r.cookie = document.cookie; } catch (e) { r.cookie = 'error: ' + e.name; }
  try {
    const reg = await navigator.serviceWorker.register('sw.js', {scope: '/'});
    r.sw = 'registered ' + reg.scope;
  } catch (e) { r.sw = 'error: ' + e.name; }
  document.getElementById('out').textContent = 'done ' + JSON.stringify(r);
})();
</script>`)
	})
	return http.ListenAndServe(addr, mux)
}
