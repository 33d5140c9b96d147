package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
)

// Resolver looks names up for the gateway (net.Resolver satisfies it).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Ports are the ports served on every sandbox address (zero: the standard
// ones, egress.Port*).
type Ports struct {
	DNS, HTTP, TLS, Proxy int
}

// Config configures a gateway.
type Config struct {
	// ControlSocket is the path of the control API's Unix socket.
	ControlSocket string
	Ports         Ports
	// EventCapacity bounds the event ring (default 65536).
	EventCapacity int
	// MaxConnsPerSandbox bounds the connections one sandbox may have open
	// through the gateway (default 1024); more are closed at once.
	MaxConnsPerSandbox int
	// Resolver resolves upstream names (default net.DefaultResolver).
	Resolver Resolver
	// UpstreamTLS is the client TLS configuration for https tool upstreams
	// (nil: system roots).
	UpstreamTLS *tls.Config
	// DialTimeout bounds one upstream dial (default 10 s); HeaderTimeout
	// bounds reading a request's head or a ClientHello (default 15 s);
	// BindTimeout bounds waiting for a new sandbox address to appear on an
	// interface (default 5 s).
	DialTimeout, HeaderTimeout, BindTimeout time.Duration
	Version                                 string
	// Now is the clock of event times (default time.Now).
	Now func() time.Time
}

// Server is a running gateway.
type Server struct {
	cfg      Config
	log      *slog.Logger
	events   *ring
	counters counters
	started  time.Time
	tool     *http.Transport

	mu   sync.Mutex // guards byID and byIP; held while a new address is bound
	byID map[string]*sandbox
	byIP map[netip.Addr]*sandbox
	// nSandboxes is len(byID), readable without mu.
	nSandboxes atomic.Int64
}

// sandbox is one sandbox's state: its address, its current rules (swapped
// atomically on update) and what serves it.
type sandbox struct {
	id    string
	ip    netip.Addr
	rules atomic.Pointer[egress.Rules]
	ls    *listeners

	connMu  sync.Mutex
	conns   map[net.Conn]*route // open connections; a spliced client connection has its route
	clients int                 // accepted connections open
	closed  bool
}

// New checks cfg and returns a gateway; Run starts it.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.ControlSocket == "" {
		return nil, errdefs.Invalid("gateway: control socket path is required")
	}
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&cfg.Ports.DNS, egress.PortDNS)
	def(&cfg.Ports.HTTP, egress.PortHTTP)
	def(&cfg.Ports.TLS, egress.PortTLS)
	def(&cfg.Ports.Proxy, egress.PortProxy)
	def(&cfg.EventCapacity, 1<<16)
	def(&cfg.MaxConnsPerSandbox, 1024)
	defDur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defDur(&cfg.DialTimeout, 10*time.Second)
	defDur(&cfg.HeaderTimeout, 15*time.Second)
	defDur(&cfg.BindTimeout, 5*time.Second)
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, events: newRing(cfg.EventCapacity, cfg.Now), started: cfg.Now(),
		byID: map[string]*sandbox{}, byIP: map[netip.Addr]*sandbox{}}
	s.tool = s.toolTransport()
	return s, nil
}

// Run serves the control API until ctx ends, then closes every listener
// and connection.
func (s *Server) Run(ctx context.Context) error {
	os.Remove(s.cfg.ControlSocket)
	l, err := net.Listen("unix", s.cfg.ControlSocket)
	if err != nil {
		return fmt.Errorf("gateway: control socket: %w", err)
	}
	os.Chmod(s.cfg.ControlSocket, 0o600)
	srv := &http.Server{Handler: s.controlHandler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	s.log.Info("egress gateway serving", "socket", s.cfg.ControlSocket, "version", s.cfg.Version)
	select {
	case <-ctx.Done():
	case err = <-done:
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shut)
	s.closeAll()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) closeAll() {
	s.mu.Lock()
	sbs := make([]*sandbox, 0, len(s.byID))
	for _, sb := range s.byID {
		sbs = append(sbs, sb)
	}
	s.byID, s.byIP = map[string]*sandbox{}, map[netip.Addr]*sandbox{}
	s.nSandboxes.Store(0)
	s.mu.Unlock()
	for _, sb := range sbs {
		sb.close()
	}
}

var sandboxID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Put creates or replaces the configuration of sandbox id. A new policy on
// the same address takes effect for every lookup and connection that
// starts after Put returns, and open connections it refuses are closed.
func (s *Server) Put(ctx context.Context, id string, cfg egress.SandboxConfig) (egress.SandboxStatus, error) {
	if !sandboxID.MatchString(id) {
		return egress.SandboxStatus{}, errdefs.Invalid("gateway: sandbox id %q is not valid", id)
	}
	ip, err := netip.ParseAddr(cfg.LocalIP)
	if err != nil || ip.IsUnspecified() {
		return egress.SandboxStatus{}, errdefs.WithCode("invalid_local_ip",
			errdefs.Invalid("gateway: local_ip %q is not a usable address", cfg.LocalIP))
	}
	ip = ip.Unmap()
	rules, err := egress.Compile(cfg, s.ownAddrs())
	if err != nil {
		return egress.SandboxStatus{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other, ok := s.byIP[ip]; ok && other.id != id {
		return egress.SandboxStatus{}, errdefs.WithCode("local_ip_in_use",
			fmt.Errorf("gateway: local_ip %s already serves sandbox %s: %w", ip, other.id, errdefs.ErrConflict))
	}
	if old, ok := s.byID[id]; ok {
		if old.ip == ip {
			old.rules.Store(rules)
			cut := old.recheck(rules)
			s.log.Info("sandbox policy updated", "sandbox", id, "mode", rules.Mode(), "connections_cut", cut)
			return s.status(old), nil
		}
		delete(s.byID, id)
		delete(s.byIP, old.ip)
		s.nSandboxes.Store(int64(len(s.byID)))
		old.close()
	}
	sb := &sandbox{id: id, ip: ip, conns: map[net.Conn]*route{}}
	sb.rules.Store(rules)
	ls, err := s.listen(ctx, sb)
	if err != nil {
		return egress.SandboxStatus{}, err
	}
	sb.ls = ls
	s.byID[id], s.byIP[ip] = sb, sb
	s.nSandboxes.Store(int64(len(s.byID)))
	s.log.Info("sandbox added", "sandbox", id, "local_ip", ip, "mode", rules.Mode())
	return s.status(sb), nil
}

// Delete forgets sandbox id, closes its listeners and cuts its open
// connections. Unknown ids succeed.
func (s *Server) Delete(id string) {
	s.mu.Lock()
	sb, ok := s.byID[id]
	if ok {
		delete(s.byID, id)
		delete(s.byIP, sb.ip)
		s.nSandboxes.Store(int64(len(s.byID)))
	}
	s.mu.Unlock()
	if ok {
		sb.close()
		s.log.Info("sandbox removed", "sandbox", id)
	}
}

func (s *Server) status(sb *sandbox) egress.SandboxStatus {
	return egress.SandboxStatus{ID: sb.id, LocalIP: sb.ip.String(), Mode: sb.rules.Load().Mode(), Listening: sb.ls != nil}
}

// ownAddrs are the gateway's own addresses: never a destination.
func (s *Server) ownAddrs() []netip.Addr {
	var out []netip.Addr
	if as, err := net.InterfaceAddrs(); err == nil {
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out = append(out, p.Addr().Unmap())
			}
		}
	}
	s.mu.Lock()
	for ip := range s.byIP {
		out = append(out, ip)
	}
	s.mu.Unlock()
	return out
}

// track registers an open connection of sb so that Delete can cut it; it
// returns false when sb is already gone.
func (sb *sandbox) track(c net.Conn) bool {
	sb.connMu.Lock()
	defer sb.connMu.Unlock()
	if sb.closed {
		return false
	}
	sb.conns[c] = nil
	return true
}

// accepted tracks a connection the sandbox opened, unless it already has
// max open or is gone.
func (sb *sandbox) accepted(c net.Conn, max int) bool {
	sb.connMu.Lock()
	defer sb.connMu.Unlock()
	if sb.closed || sb.clients >= max {
		return false
	}
	sb.clients++
	sb.conns[c] = nil
	return true
}

func (sb *sandbox) released(c net.Conn) {
	sb.connMu.Lock()
	sb.clients--
	delete(sb.conns, c)
	sb.connMu.Unlock()
}

// route is where a spliced connection goes, kept to re-decide it when the
// policy changes.
type route struct {
	name string // "" for an IP literal
	port int
	addr netip.Addr
}

// routed records the route of an open client connection.
func (sb *sandbox) routed(c net.Conn, r *route) {
	sb.connMu.Lock()
	if _, ok := sb.conns[c]; ok {
		sb.conns[c] = r
	}
	sb.connMu.Unlock()
}

// recheck closes every spliced connection the new rules no longer allow,
// so that a policy change also ends connections already open, and returns
// how many it closed.
func (sb *sandbox) recheck(rules *egress.Rules) int {
	sb.connMu.Lock()
	defer sb.connMu.Unlock()
	n := 0
	for c, r := range sb.conns {
		if r != nil && !rules.Decide(r.name, r.port, []netip.Addr{r.addr}).Allow {
			c.Close()
			n++
		}
	}
	return n
}

func (sb *sandbox) untrack(c net.Conn) {
	sb.connMu.Lock()
	delete(sb.conns, c)
	sb.connMu.Unlock()
}

func (sb *sandbox) close() {
	if sb.ls != nil {
		sb.ls.close()
	}
	sb.connMu.Lock()
	sb.closed = true
	for c := range sb.conns {
		c.Close()
	}
	sb.conns = nil
	sb.connMu.Unlock()
}

// listeners are the sockets serving one sandbox address.
type listeners struct {
	udp *net.UDPConn
	tcp []net.Listener
	wg  sync.WaitGroup
}

func (l *listeners) close() {
	if l.udp != nil {
		l.udp.Close()
	}
	for _, t := range l.tcp {
		t.Close()
	}
	l.wg.Wait()
}

// listen binds every service on sb's address and starts serving. The
// address may appear on an interface a moment after the service attached
// the network, so "cannot assign address" is retried up to BindTimeout.
func (s *Server) listen(ctx context.Context, sb *sandbox) (*listeners, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BindTimeout)
	defer cancel()
	ls := &listeners{}
	ok := false
	defer func() {
		if !ok {
			ls.close()
		}
	}()
	for {
		err := s.bind(ls, sb.ip)
		if err == nil {
			break
		}
		ls.close()
		*ls = listeners{}
		if !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil, errdefs.WithCode("gateway_bind_failed", fmt.Errorf("gateway: listen on %s: %v: %w", sb.ip, err, errdefs.ErrUnavailable))
		}
		select {
		case <-ctx.Done():
			return nil, errdefs.WithCode("gateway_bind_failed",
				fmt.Errorf("gateway: address %s did not appear on any interface: %w", sb.ip, errdefs.ErrUnavailable))
		case <-time.After(50 * time.Millisecond):
		}
	}
	handlers := []func(*sandbox, net.Conn){s.serveDNSConn, s.serveHTTP, s.serveTLS, s.serveProxy}
	for i, l := range ls.tcp {
		ls.wg.Go(func() { s.accept(l, sb, handlers[i]) })
	}
	ls.wg.Go(func() { s.serveDNSPackets(ls.udp, sb) })
	ok = true
	return ls, nil
}

func (s *Server) bind(ls *listeners, ip netip.Addr) error {
	u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(s.cfg.Ports.DNS))))
	if err != nil {
		return err
	}
	ls.udp = u
	for _, port := range []int{s.cfg.Ports.DNS, s.cfg.Ports.HTTP, s.cfg.Ports.TLS, s.cfg.Ports.Proxy} {
		l, err := net.Listen("tcp", netip.AddrPortFrom(ip, uint16(port)).String())
		if err != nil {
			return err
		}
		ls.tcp = append(ls.tcp, l)
	}
	return nil
}

func (s *Server) accept(l net.Listener, sb *sandbox, handle func(*sandbox, net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if !sb.accepted(c, s.cfg.MaxConnsPerSandbox) {
			c.Close()
			s.counters.connDenied.Add(1)
			continue
		}
		go func() {
			defer sb.released(c)
			defer c.Close()
			handle(sb, c)
		}()
	}
}
