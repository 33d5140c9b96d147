package agent_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// TestFilesInContainers runs the file operations and the escape attempts
// against the agent as PID 1 of a locked-down container, as the sandbox
// user, under runc and runsc: root /workspace, the outside target /tmp (a
// directory the sandbox user may write, so a write escape would show).
func TestFilesInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(t, rt)
			e := &fileEnv{c: c.client, root: "/workspace", outside: "/tmp"}
			t.Run("operations", func(t *testing.T) { testFileOperations(t, e) })
			t.Run("escapes", func(t *testing.T) { testFileEscapes(t, e) })
			t.Run("archives", func(t *testing.T) { testFileArchives(t, e) })
			t.Run("search", func(t *testing.T) { testFileSearchReplace(t, e) })
			t.Run("device", func(t *testing.T) {
				// The sandbox user cannot mknod; a link to a device is the
				// way in, and it leads out of the root.
				e.sh(t, "ln -s /dev/zero /workspace/zero")
				_, _, _, err := readAll(t, e.c, "/workspace/zero", nil)
				wantCode(t, "read link to /dev/zero", err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)
			})
		})
	}
}

// TestFileRootsInContainers runs the agent with /tmp as its root, under
// runc and runsc, among roots it must drop (/, /proc, /dev/shm, /run, its
// own /run/genesis and /.genesis): the escape attempts out of /tmp all
// fail (the outside target is /workspace), and so does every path into
// the dropped places.
func TestFileRootsInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(t, rt, "--env", agentproto.FileRootsEnv+"=/tmp:/:/proc:/dev/shm:/run:/run/genesis:/.genesis")
			e := &fileEnv{c: c.client, root: "/tmp", outside: "/workspace"}
			if _, err := write(t, c.client, "rel.txt", "rel"); err != nil {
				t.Fatalf("write a relative path: %v", err)
			}
			if got := e.sh(t, "cat /tmp/rel.txt"); got != "rel" {
				t.Errorf("a relative path is not under the first root /tmp: %q", got)
			}
			t.Run("escapes", func(t *testing.T) { testFileEscapes(t, e) })
			for _, p := range []string{"/run/genesis/agent.sock", "/.genesis/genesis-agent", "/proc/1/environ", "/proc/self/root/etc/passwd",
				"/dev/shm/x", "/workspace", "/", "/run"} {
				_, err := c.client.StatFile(fctx(t), p)
				wantCode(t, "stat "+p, err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)
			}
			err := c.client.DeleteFile(fctx(t), agentproto.DeleteRequest{Path: "/run/genesis/agent.sock"})
			wantCode(t, "delete the agent's socket", err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)
		})
	}
}

// BenchmarkFileTransfer measures the agent alone (agentclient over the Unix
// socket, no service): one 256 MiB upload and download per iteration, per
// runtime, as MiB/s.
func BenchmarkFileTransfer(b *testing.B) {
	const size = 256 << 20
	for _, rt := range []string{"runc", "runsc"} {
		b.Run(rt, func(b *testing.B) {
			if !slices.Contains(runtimesUnderTest(b), rt) {
				b.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(b, rt)
			ctx := context.Background()
			block := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
			var up, down time.Duration
			for range b.N {
				t0 := time.Now()
				_, err := c.client.WriteFile(ctx, agentclient.WriteFileRequest{Path: "/workspace/big", Overwrite: true, MaxBytes: -1, Size: size},
					io.LimitReader(&repeatReader{b: block}, size))
				if err != nil {
					b.Fatal(err)
				}
				up += time.Since(t0)
				t0 = time.Now()
				fr, err := c.client.ReadFile(ctx, http.MethodGet, "/workspace/big", nil)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, fr.Body, make([]byte, 1<<20))
				fr.Body.Close()
				if err != nil || n != size {
					b.Fatalf("read %d bytes: %v", n, err)
				}
				down += time.Since(t0)
			}
			mib := float64(size>>20) * float64(b.N)
			b.ReportMetric(mib/up.Seconds(), "upload-MiB/s")
			b.ReportMetric(mib/down.Seconds(), "download-MiB/s")
		})
	}
}

type repeatReader struct {
	b   []byte
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.off:])
	r.off = (r.off + n) % len(r.b)
	return n, nil
}
