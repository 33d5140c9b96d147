package gateway

import (
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"genesis.dev/sandbox/internal/egress"
)

func dnsSandbox(t testing.TB, ip string) (*Server, *sandbox) {
	t.Helper()
	s, err := New(Config{ControlSocket: "unused", EventCapacity: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := egress.Compile(egress.SandboxConfig{LocalIP: ip, Policy: egress.Policy{Mode: egress.ModeAllowlist,
		Allow: []egress.Rule{{Host: "*.pypi.org"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := &sandbox{id: "sb-dns", ip: netip.MustParseAddr(ip)}
	sb.rules.Store(r)
	return s, sb
}

func query(t testing.TB, name string, typ dnsmessage.Type, mutate func(*dnsmessage.Message)) []byte {
	t.Helper()
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}}}
	if mutate != nil {
		mutate(&m)
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAnswerDNS(t *testing.T) {
	t.Parallel()
	s, sb := dnsSandbox(t, "192.0.2.10")
	cases := []struct {
		name    string
		q       []byte
		rcode   dnsmessage.RCode
		answers int
	}{
		{"allowed A", query(t, "Files.PyPI.org.", dnsmessage.TypeA, nil), dnsmessage.RCodeSuccess, 1},
		{"allowed AAAA is empty", query(t, "files.pypi.org.", dnsmessage.TypeAAAA, nil), dnsmessage.RCodeSuccess, 0},
		{"allowed MX is empty", query(t, "files.pypi.org.", dnsmessage.TypeMX, nil), dnsmessage.RCodeSuccess, 0},
		{"bare suffix", query(t, "pypi.org.", dnsmessage.TypeA, nil), dnsmessage.RCodeNameError, 0},
		{"other", query(t, "example.com.", dnsmessage.TypeA, nil), dnsmessage.RCodeNameError, 0},
		{"reverse", query(t, "254.169.254.169.in-addr.arpa.", dnsmessage.TypePTR, nil), dnsmessage.RCodeNameError, 0},
		{"chaos class", query(t, "files.pypi.org.", dnsmessage.TypeA, func(m *dnsmessage.Message) { m.Questions[0].Class = dnsmessage.ClassCHAOS }),
			dnsmessage.RCodeRefused, 0},
		{"two questions", query(t, "files.pypi.org.", dnsmessage.TypeA, func(m *dnsmessage.Message) { m.Questions = append(m.Questions, m.Questions[0]) }),
			dnsmessage.RCodeFormatError, 0},
		{"update opcode", query(t, "files.pypi.org.", dnsmessage.TypeA, func(m *dnsmessage.Message) { m.Header.OpCode = 5 }),
			dnsmessage.RCodeNotImplemented, 0},
	}
	for _, c := range cases {
		out := s.answerDNS(sb, c.q)
		var m dnsmessage.Message
		if err := m.Unpack(out); err != nil {
			t.Fatalf("%s: answer does not parse: %v", c.name, err)
		}
		if m.Header.ID != 7 || !m.Header.Response || m.Header.RCode != c.rcode || len(m.Answers) != c.answers {
			t.Errorf("%s: header %+v, %d answers; want rcode %v, %d answers", c.name, m.Header, len(m.Answers), c.rcode, c.answers)
		}
		if c.answers == 1 {
			a, ok := m.Answers[0].Body.(*dnsmessage.AResource)
			if !ok || netip.AddrFrom4(a.A) != sb.ip || m.Answers[0].Header.TTL != dnsTTL {
				t.Errorf("%s: answer %+v, want A %s", c.name, m.Answers[0], sb.ip)
			}
		}
	}
	if s.answerDNS(sb, []byte{1, 2, 3}) != nil {
		t.Error("garbage got an answer")
	}
	// An IPv6 sandbox network gets AAAA with the gateway's IPv6 address.
	s6, sb6 := dnsSandbox(t, "2001:db8::53")
	var m dnsmessage.Message
	if err := m.Unpack(s6.answerDNS(sb6, query(t, "a.pypi.org.", dnsmessage.TypeAAAA, nil))); err != nil || len(m.Answers) != 1 {
		t.Fatalf("AAAA on IPv6: %+v %v", m, err)
	}
	if a := m.Answers[0].Body.(*dnsmessage.AAAAResource); netip.AddrFrom16(a.AAAA) != sb6.ip {
		t.Fatalf("AAAA = %v", a.AAAA)
	}
	// One event per lookup: A is recorded, AAAA (on IPv4) is not.
	p := s.events.since(0, 100)
	var dns int
	for _, e := range p.Events {
		if e.Proto == egress.ProtoDNS {
			dns++
		}
	}
	if dns != 5 { // A, MX, bare suffix, other, reverse; refused and malformed queries are not lookups
		t.Errorf("%d DNS events, want 5: %+v", dns, p.Events)
	}
	if c := s.Counters(); c.DNSAllowed != 2 || c.DNSDenied != 3 {
		t.Errorf("counters = %+v, want 2 allowed (A, MX) and 3 denied", c)
	}
}

// FuzzAnswerDNS feeds arbitrary bytes to the DNS handler: it must not
// panic, and whatever it answers must parse and keep the query's ID.
func FuzzAnswerDNS(f *testing.F) {
	f.Add(query(f, "files.pypi.org.", dnsmessage.TypeA, nil))
	f.Add(query(f, "example.com.", dnsmessage.TypeAAAA, nil))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1})
	s, sb := dnsSandbox(f, "192.0.2.10")
	f.Fuzz(func(t *testing.T, q []byte) {
		out := s.answerDNS(sb, q)
		if out == nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(out); err != nil {
			t.Fatalf("answer does not parse: %v", err)
		}
		if len(q) >= 2 && m.Header.ID != uint16(q[0])<<8|uint16(q[1]) {
			t.Fatalf("answer ID %d for query ID %x", m.Header.ID, q[:2])
		}
		for _, a := range m.Answers {
			if r, ok := a.Body.(*dnsmessage.AResource); ok && netip.AddrFrom4(r.A) != sb.ip {
				t.Fatalf("answered %v, not the gateway", r.A)
			}
		}
	})
}
