package agentclient

import (
	"net/http"
	"sync"
)

// agentAddr is the address handed to the transport's dialer, which ignores
// it: the Dialer decides where the agent is.
const agentAddr = "genesis-agent:80"

// conns is the client's RoundTripper: the HTTP/2 connections it holds to
// the agent, one unless that one is at its stream limit. It exists because
// http.Transport's pool can dial a second connection for calls that start
// while a fresh one is being handed to the call that dialled it (the
// connection reaches the pool only afterwards); here a connection is in
// the set before anyone uses it, and dials happen one at a time.
type conns struct {
	tr *http.Transport // dials and configures connections; its own pool is unused

	mu  sync.Mutex // held while dialling, so concurrent calls share one dial
	set []*http.ClientConn
}

// RoundTrip sends req on a connection with a free stream, dialling one when
// none has.
func (p *conns) RoundTrip(req *http.Request) (*http.Response, error) {
	cc, err := p.reserve(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return cc.RoundTrip(req)
}

// reserve returns a connection on which one stream is reserved for req.
func (p *conns) reserve(req *http.Request) (*http.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var got *http.ClientConn
	live := p.set[:0]
	for _, cc := range p.set {
		if cc.Err() != nil { // closed: the agent went away or a ping was lost
			continue
		}
		live = append(live, cc)
		// Reserve fails on a connection that is full or going away.
		if got == nil && cc.Reserve() == nil {
			got = cc
		}
	}
	clear(p.set[len(live):])
	p.set = live
	if got != nil {
		return got, nil
	}
	cc, err := p.tr.NewClientConn(req.Context(), "http", agentAddr)
	if err != nil {
		return nil, err
	}
	if err := cc.Reserve(); err != nil {
		cc.Close()
		return nil, err
	}
	p.set = append(p.set, cc)
	return cc, nil
}

// close closes every connection; calls on them fail, later calls dial anew.
func (p *conns) close() {
	p.mu.Lock()
	set := p.set
	p.set = nil
	p.mu.Unlock()
	for _, cc := range set {
		cc.Close()
	}
}
