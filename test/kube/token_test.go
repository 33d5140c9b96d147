//go:build kube

package kube

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestAgentTokenRotatesOnReset: on Pods the agent's environment holds only
// the SHA-256 of its token, never the token, and the workload cannot read
// even that (/proc/1/environ: the agent is not dumpable); once its lease is released and the sandbox reset for the next
// holder, the token of before opens the agent no more and the next
// generation's does.
func TestAgentTokenRotatesOnReset(t *testing.T) {
	clearManagedPods(t)
	t.Cleanup(func() { clearManagedPods(t) })
	dir := t.TempDir()
	s := startService(t, dir, "warm_pools: true\nprofiles:\n"+poolProfile("recycle", "reset", 1, 2, 300))
	c := s.client()
	waitPool(t, c, "recycle-runc", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "recycle", Runtime: "runc"})
	if err != nil || !l.Warm {
		t.Fatalf("a warm lease: %+v %v", l, err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "keys", "agent-token.key"))
	if err != nil {
		t.Fatal(err)
	}
	pod := podOf(ctx, t, clientset(t), l.SandboxID)
	token := func(gen int) []byte {
		m := hmac.New(sha256.New, bytes.TrimSpace(key))
		io.WriteString(m, pod.Name)
		if gen > 0 {
			io.WriteString(m, "#"+strconv.Itoa(gen))
		}
		return m.Sum(nil)
	}
	sum0 := sha256.Sum256(token(0))
	// The workload cannot read the agent's environment at all (the agent
	// is not dumpable), and the environment the Pod gives it holds the
	// token's hash, never the token.
	res, err := c.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"sh", "-c", `id -u; tr '\0' '\n' < /proc/1/environ`}})
	if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "Permission denied") {
		t.Fatalf("the workload reading the agent's environment: %+v %v", res, err)
	}
	var env strings.Builder
	for _, ct := range pod.Spec.Containers {
		for _, e := range ct.Env {
			env.WriteString(e.Name + "=" + e.Value + "\n")
		}
	}
	if !strings.Contains(env.String(), "GENESIS_AGENT_TOKEN_SHA256="+hex.EncodeToString(sum0[:])) || strings.Contains(env.String(), hex.EncodeToString(token(0))) ||
		strings.Contains(env.String(), "GENESIS_AGENT_TOKEN=") {
		t.Fatalf("the Pod's environment:\n%s", env.String())
	}
	// admits asks the agent for /v1/ping over HTTP/1.1 after the preface
	// of token.
	admits := func(token []byte) bool {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, "7070"), 5*time.Second)
		if err != nil {
			t.Fatalf("dialling the agent: %v", err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "GENESIS-AGENT-TOKEN "+hex.EncodeToString(token)+"\n")
		io.WriteString(conn, "GET /v1/ping HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n")
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return strings.HasPrefix(line, "HTTP/1.1 200")
	}
	if !admits(token(0)) || admits(token(1)) {
		t.Fatal("before the reset the agent does not admit exactly its first token")
	}
	if err := c.ReleaseLease(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the reset to move the agent to its next token", func() (bool, string) {
		p := podOf(ctx, t, clientset(t), l.SandboxID)
		return p.Annotations["dev.genesis/agent-token-generation"] == "1", p.Annotations["dev.genesis/agent-token-generation"]
	})
	if admits(token(0)) {
		t.Error("after the reset the token of before still opens the agent")
	}
	if !admits(token(1)) {
		t.Error("after the reset the next token does not open the agent")
	}
	// The next holder gets the same Pod and the service reaches it.
	waitPool(t, c, "recycle-runc", 1)
	l2, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "recycle", Runtime: "runc"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Exec(ctx, l2.SandboxID, client.ExecRequest{Command: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec in the next lease's sandbox: %+v %v", res, err)
	}
}
