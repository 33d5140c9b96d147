package control

import (
	"context"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/driver/local"
)

// TestAgentErrorsNameTheSandbox: an agent that cannot be reached fails
// with an error (it reaches API answers as a 503's detail) that names the
// sandbox, never the host path of its socket.
func TestAgentErrorsNameTheSandbox(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	boxes, err := local.New(local.Config{Driver: fake.New(fake.Config{}), Root: root, AgentDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{boxes: boxes, agents: map[string]*agentclient.Client{}}
	c := s.agent("sbx_0123456789abcdef")
	defer s.dropAgent("sbx_0123456789abcdef")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = c.Ping(ctx)
	if err == nil {
		t.Fatal("a ping of an agent that is not there succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, root) || !strings.Contains(msg, "sandbox sbx_0123456789abcdef") {
		t.Errorf("error %q: want the sandbox named and no host path (%s)", msg, root)
	}
}
