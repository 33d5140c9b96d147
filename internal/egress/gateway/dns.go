package gateway

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"genesis.dev/sandbox/internal/egress"
)

// dnsTTL is short so that a policy change is not hidden by caches.
const dnsTTL = 5

// answerDNS answers one query from sb: for an allowed name, A (or AAAA on
// an IPv6 sandbox network) with the gateway's own address there, so that
// every connection comes to the gateway; NXDOMAIN for any other name. It
// returns nil when the message is not worth an answer.
func (s *Server) answerDNS(sb *sandbox, query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true}}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		resp.RCode = dnsmessage.RCodeFormatError
		return pack(resp)
	}
	q := qs[0]
	resp.Questions = qs
	if h.OpCode != 0 {
		resp.RCode = dnsmessage.RCodeNotImplemented
		return pack(resp)
	}
	if q.Class != dnsmessage.ClassINET {
		resp.RCode = dnsmessage.RCodeRefused
		return pack(resp)
	}
	rules := sb.rules.Load()
	name, valid := egress.CanonicalName(strings.TrimSuffix(q.Name.String(), "."))
	d := egress.Decision{Reason: egress.ReasonNameNotAllowed}
	if valid {
		d = rules.AllowName(name)
	}
	own := dnsmessage.TypeA
	if sb.ip.Is6() {
		own = dnsmessage.TypeAAAA
	}
	if q.Type != dnsmessage.TypeAAAA || own == dnsmessage.TypeAAAA {
		// One event per lookup: resolvers ask A and AAAA together.
		e := egress.Event{Sandbox: sb.id, Name: name, Proto: egress.ProtoDNS, Decision: egress.DecisionDeny, Reason: d.Reason}
		if !valid {
			e.Name = truncate(q.Name.String(), 255)
		}
		if d.Allow {
			e.Decision, e.Address = egress.DecisionAllow, sb.ip.String()
		}
		s.record(e)
	}
	if !d.Allow {
		resp.RCode = dnsmessage.RCodeNameError
		return pack(resp)
	}
	if q.Type == own {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: own, Class: dnsmessage.ClassINET, TTL: dnsTTL}
		if own == dnsmessage.TypeA {
			resp.Answers = append(resp.Answers, dnsmessage.Resource{Header: rh, Body: &dnsmessage.AResource{A: sb.ip.As4()}})
		} else {
			resp.Answers = append(resp.Answers, dnsmessage.Resource{Header: rh, Body: &dnsmessage.AAAAResource{AAAA: sb.ip.As16()}})
		}
	}
	return pack(resp)
}

func pack(m dnsmessage.Message) []byte {
	b, err := m.Pack()
	if err != nil {
		return nil
	}
	return b
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// serveDNSPackets answers UDP queries on sb's address until the socket
// is closed.
func (s *Server) serveDNSPackets(c *net.UDPConn, sb *sandbox) {
	buf := make([]byte, 4096)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		if out := s.answerDNS(sb, buf[:n]); out != nil {
			c.WriteToUDPAddrPort(out, from)
		}
	}
}

// serveDNSConn answers length-prefixed queries on one TCP connection.
func (s *Server) serveDNSConn(sb *sandbox, c net.Conn) {
	var lb [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout))
		if _, err := io.ReadFull(c, lb[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(lb[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		out := s.answerDNS(sb, q)
		if out == nil {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...)); err != nil {
			return
		}
	}
}
