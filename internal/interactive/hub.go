package interactive

import (
	"io"
	"sync"
)

// Hub tracks, for each shared stream (a key such as a terminal's sandbox
// and id), the connections to it and which one is the writer. The first
// connection to join is the writer, later ones observe, and a takeover
// makes its connection the writer and demotes the previous one. When the
// writer leaves, the stream has no writer until a connection takes over or
// a new one joins. Roles live in this process only.
type Hub struct {
	mu     sync.Mutex
	groups map[string]*group
}

// group is the set of connections to one shared stream.
type group struct {
	key    string
	conns  map[*Conn]struct{}
	writer *Conn
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{groups: map[string]*group{}} }

// Conn is one connection's membership in a hub: its role, and the input
// half of its own stream, which only the writer may use.
type Conn struct {
	hub   *Hub
	group *group
	in    io.Writer
	roles chan struct{} // one pending notification of a role change

	// Guarded by hub.mu.
	writer bool
	closed bool
}

// Join adds a connection to the stream key; in is where its input goes
// when it is the writer. It becomes the writer if the stream has none or
// takeover is set.
func (h *Hub) Join(key string, in io.Writer, takeover bool) *Conn {
	c := &Conn{hub: h, in: in, roles: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[key]
	if g == nil {
		g = &group{key: key, conns: map[*Conn]struct{}{}}
		h.groups[key] = g
	}
	c.group = g
	g.conns[c] = struct{}{}
	if g.writer == nil || takeover {
		h.setWriterLocked(g, c)
	}
	return c
}

// Members counts the connections to key.
func (h *Hub) Members(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := h.groups[key]; g != nil {
		return len(g.conns)
	}
	return 0
}

// setWriterLocked makes c the writer of g and demotes the previous one.
func (h *Hub) setWriterLocked(g *group, c *Conn) {
	if prev := g.writer; prev != nil && prev != c {
		prev.writer = false
		prev.notify()
	}
	g.writer = c
	if !c.writer {
		c.writer = true
		c.notify()
	}
}

func (c *Conn) notify() {
	select {
	case c.roles <- struct{}{}:
	default:
	}
}

// Writer reports whether this connection is the writer now.
func (c *Conn) Writer() bool {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	return c.writer
}

// RoleChanged receives when the connection's role may have changed; read
// Writer for the current role.
func (c *Conn) RoleChanged() <-chan struct{} { return c.roles }

// Takeover makes this connection the writer; the previous writer becomes
// an observer. A connection that left stays out.
func (c *Conn) Takeover() {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	if !c.closed {
		c.hub.setWriterLocked(c.group, c)
	}
}

// Input writes p to the stream if this connection is the writer; it
// reports whether it did.
func (c *Conn) Input(p []byte) (bool, error) {
	if !c.Writer() {
		return false, nil
	}
	if _, err := c.in.Write(p); err != nil {
		return true, err
	}
	return true, nil
}

// Leave removes the connection from its stream; it reports whether it was
// still a member (Leave is idempotent). If it was the writer, the stream
// has no writer until another connection takes over.
func (c *Conn) Leave() bool {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	g := c.group
	delete(g.conns, c)
	if g.writer == c {
		g.writer = nil
	}
	c.writer = false
	if len(g.conns) == 0 && c.hub.groups[g.key] == g {
		delete(c.hub.groups, g.key)
	}
	return true
}
