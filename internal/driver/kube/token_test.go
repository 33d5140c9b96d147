package kube

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// presented dials the sandbox's agent through d (a listener on loopback
// stands in for its Pod) and returns the token the dialer presented.
func presented(t *testing.T, d *Driver, ln net.Listener, id string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- ""
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- line
	}()
	c, err := d.AgentDialer(id)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line := <-got
	hexToken, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), agentproto.TokenPreface)
	token, err := hex.DecodeString(hexToken)
	if !ok || err != nil || len(token) != agentproto.TokenBytes {
		t.Fatalf("preface %q is not a token", line)
	}
	return token
}

// TestAgentTokenNotInPod: the sandbox's Pod carries the SHA-256 of its
// agent's token and never the token (which the workload could read from
// the agent's environment, /proc/1/environ); the dialer presents the
// token. A new generation (a pool reset) gives the Pod's dialers a token
// of its own, whose SHA-256 differs, and the old token is presented no more.
func TestAgentTokenNotInPod(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cs := fake.NewClientset()
	d, err := NewWithClient(Config{Namespace: "sandboxes", AgentImage: "genesis/agent:1", TokenKey: []byte("0123456789abcdef0123456789abcdef"),
		RuntimeClasses: map[sandbox.Runtime]string{sandbox.RuntimeRunc: ""}, AgentPort: ln.Addr().(*net.TCPAddr).Port}, cs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const id = "sbx_token"
	name, err := d.CreateSandbox(ctx, driver.SandboxSpec{ID: id, UID: 1000, GID: 1000,
		Container: driver.Spec{Image: "genesis/tool-basic:1", User: "1000:1000", Env: []string{"LANG=C.UTF-8"}}})
	if err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods("sandboxes")
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP = "127.0.0.1"
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	podText := func() string {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		return string(b)
	}
	sumEnv := func() string {
		p, _ := pods.Get(ctx, name, metav1.GetOptions{})
		var v string
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == agentproto.TokenSHA256Env {
					v = e.Value
				}
				if e.Name == "GENESIS_AGENT_TOKEN" || e.ValueFrom != nil {
					t.Errorf("container %s has env %s (%+v)", c.Name, e.Name, e.ValueFrom)
				}
			}
		}
		for _, c := range p.Spec.InitContainers {
			if len(c.Env) > 0 {
				t.Errorf("the install container has env %v", c.Env)
			}
		}
		return v
	}

	token0 := presented(t, d, ln, id)
	sum0 := sha256.Sum256(token0)
	if got := sumEnv(); got != hex.EncodeToString(sum0[:]) {
		t.Fatalf("the Pod's %s is %q, want the SHA-256 of the token the dialer presents", agentproto.TokenSHA256Env, got)
	}
	if strings.Contains(podText(), hex.EncodeToString(token0)) {
		t.Fatal("the Pod holds the agent's token")
	}

	// A pool reset: the next generation, recorded on the Pod.
	next, err := d.NextAgentToken(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if next.Generation != 1 || next.SHA256 == sum0 {
		t.Fatalf("next token %+v: want generation 1 and another SHA-256", next)
	}
	if token := presented(t, d, ln, id); string(token) != string(token0) {
		t.Fatal("the dialer moved to the next token before it was put to use")
	}
	bad := next
	bad.SHA256[0] ^= 1
	if err := d.UseAgentToken(ctx, id, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a token that is not the generation's: %v", err)
	}
	if err := d.UseAgentToken(ctx, id, next); err != nil {
		t.Fatal(err)
	}
	token1 := presented(t, d, ln, id)
	if sha256.Sum256(token1) != next.SHA256 || string(token1) == string(token0) {
		t.Fatal("after the reset the dialer does not present the next token")
	}
	if text := podText(); strings.Contains(text, hex.EncodeToString(token1)) || strings.Contains(text, hex.EncodeToString(token0)) {
		t.Fatal("the Pod holds an agent token")
	}
	if n2, err := d.NextAgentToken(ctx, id); err != nil || n2.Generation != 2 {
		t.Errorf("the generation after 1: %+v %v", n2, err)
	}
	// Another replica (another driver on the same cluster and key) follows.
	d2, _ := NewWithClient(d.cfg, cs)
	if token := presented(t, d2, ln, id); string(token) != string(token1) {
		t.Error("another replica's dialer does not present the current token")
	}
}
