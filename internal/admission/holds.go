package admission

import "sync"

// Holds ties the capacity granted to sandboxes to their ids, so that it
// goes back when the sandbox is destroyed or fails, whichever path gets it
// there. The zero value is ready to use.
type Holds struct {
	mu    sync.Mutex
	seq   uint64
	holds map[string]hold
}

type hold struct {
	release Release
	seq     uint64 // when it was registered, for Sweep
}

// Hold ties release to id; what id held before is given back.
func (h *Holds) Hold(id string, release Release) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.holds[id]; ok {
		old.release()
	}
	if h.holds == nil {
		h.holds = map[string]hold{}
	}
	h.seq++
	h.holds[id] = hold{release: release, seq: h.seq}
}

// Held says whether id holds capacity.
func (h *Holds) Held(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.holds[id]
	return ok
}

// Release gives back what id holds (nothing if it holds nothing).
func (h *Holds) Release(id string) {
	h.mu.Lock()
	old, ok := h.holds[id]
	delete(h.holds, id)
	h.mu.Unlock()
	if ok {
		old.release()
	}
}

// Mark returns a mark to pass to Sweep: holds registered after it are not
// judged.
func (h *Holds) Mark() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// Sweep gives back the holds, registered up to mark, of ids that live
// (a listing made after mark) does not report live, and returns those ids:
// a safety net for any path that ends a sandbox without releasing it.
func (h *Holds) Sweep(live func(id string) bool, mark uint64) (leaked []string) {
	h.mu.Lock()
	var gone []hold
	for id, old := range h.holds {
		if old.seq <= mark && !live(id) {
			gone = append(gone, old)
			leaked = append(leaked, id)
			delete(h.holds, id)
		}
	}
	h.mu.Unlock()
	for _, old := range gone {
		old.release()
	}
	return leaked
}
