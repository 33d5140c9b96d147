package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// finalWithin bounds how long after the exit event GET /v1/jobs/{id} may
// still show the job running: the service appends the exit frame to the log
// before it records the final state in its store.
const finalWithin = 30 * time.Second

// serviceRSSBound is the resident memory sandbox-service may use while it
// serves all of TestJobs, the 1 GiB output jobs included.
const serviceRSSBound = int64(150) << 10 // KiB

// TestJobs runs the job, log stream, session, context and bad-input tests
// on one service (with a second tenant), under runc and runsc, and checks
// that the service's resident memory stays below serviceRSSBound
// throughout: its VmRSS sampled every 50 ms, and its VmHWM at the end.
func TestJobs(t *testing.T) {
	t.Parallel()
	otherKey := "e2e_other_" + randomHex(t, 12)
	e := newEnv(t, "tenants: {other: {api_keys: [\""+otherKey+"\"]}}\n")
	e.requireImage(t, "tool-basic")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	pid := svc.cmd.Process.Pid

	stop := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var max int64
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if kb, err := rssKB(pid, "VmRSS"); err == nil && kb > max {
				max = kb
			}
			select {
			case <-stop:
				peak <- max
				return
			case <-tick.C:
			}
		}
	}()
	// Cleanups run after the parallel subtests, before the service stops.
	t.Cleanup(func() {
		close(stop)
		sampled := <-peak
		hwm, err := rssKB(pid, "VmHWM")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("service VmRSS peak sampled %d KiB, VmHWM %d KiB (bound %d KiB)", sampled, hwm, serviceRSSBound)
		if sampled == 0 || sampled > serviceRSSBound || hwm > serviceRSSBound {
			t.Errorf("service memory: sampled VmRSS peak %d KiB, VmHWM %d KiB; want both above 0 and below %d KiB", sampled, hwm, serviceRSSBound)
		}
	})

	for _, c := range []struct {
		name string
		fn   func(t *testing.T, e *env, svc *service)
	}{
		{"LogResume", testJobLogResume},
		{"CancelKillsTree", testJobCancelKillsTree},
		{"ExitReasons", testJobExitReasons},
		{"OutputBounded", testJobOutputBounded},
		{"StreamedExec", testStreamedExec},
		{"ShellSessions", testShellSessions},
		{"CodeContexts", testCodeContexts},
		{"LogsBadInput", func(t *testing.T, e *env, svc *service) { testJobLogsBadInput(t, e, svc, otherKey) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, e, svc)
		})
	}
}

// eachRuntime runs fn in one parallel subtest per runtime, all on the
// service of e.
func eachRuntime(t *testing.T, e *env, fn func(t *testing.T, rt string)) {
	t.Helper()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			fn(t, rt)
		})
	}
}

// testSeed returns the seed of a randomized test: GENESIS_E2E_SEED if set,
// else a new one. It is logged so that a failure can be replayed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GENESIS_E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GENESIS_E2E_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with GENESIS_E2E_SEED=%d)", seed, seed)
	return seed
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sandboxSums returns the sha256 of files in a sandbox, in order.
func sandboxSums(t *testing.T, raw *rawAPI, sandboxID string, files ...string) []string {
	t.Helper()
	res := raw.exec(t, sandboxID, "sha256sum "+strings.Join(files, " "))
	if res.ExitCode != 0 {
		t.Fatalf("sha256sum %v: exit %d, stderr %q", files, res.ExitCode, res.Stderr)
	}
	var sums []string
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		sums = append(sums, strings.Fields(line)[0])
	}
	if len(sums) != len(files) {
		t.Fatalf("sha256sum %v printed %q", files, res.Stdout)
	}
	return sums
}

// mixedOutputScript returns a script that writes the files out and errf of
// /tmp to stdout and stderr in interleaved segments of random sizes (from
// rng), with a few short pauses, so that the job's output is a mix of
// small and large writes to both streams over some time.
func mixedOutputScript(rng *rand.Rand, out, errf string, outLen, errLen int64) (string, int) {
	var b strings.Builder
	b.WriteString("cd /tmp || exit 90\n")
	var done [2]int64
	size := [2]int64{outLen, errLen}
	name := [2]string{out, errf}
	segments := 0
	for done[0] < size[0] || done[1] < size[1] {
		s := rng.IntN(2)
		if done[s] == size[s] {
			s = 1 - s
		}
		var n int64
		switch rng.IntN(10) {
		case 0, 1, 2:
			n = 1 + rng.Int64N(512)
		case 3, 4, 5, 6:
			n = 1024 + rng.Int64N(64<<10)
		default:
			n = 64<<10 + rng.Int64N(512<<10)
		}
		n = min(n, size[s]-done[s])
		redirect := ""
		if s == 1 {
			redirect = " >&2"
		}
		fmt.Fprintf(&b, "dd if=%s iflag=skip_bytes,count_bytes skip=%d count=%d bs=1048576 status=none%s || exit 91\n", name[s], done[s], n, redirect)
		done[s] += n
		segments++
		if rng.IntN(8) == 0 {
			b.WriteString("sleep 0.05\n")
		}
	}
	b.WriteString("exit 0\n")
	return b.String(), segments
}

// mixedBytesScript writes n bytes to file: runs of random bytes, of base64
// text and of multi-byte UTF-8 text lines, so that some output events can
// go as text (?encoding=text) and others cannot.
func mixedBytesScript(n int64, file string) string {
	return fmt.Sprintf("i=0; { while [ $i -lt 64 ]; do head -c 40000 /dev/urandom; head -c 30000 /dev/urandom | base64; "+
		"yes 'grüße, ünïcödé — a line of text' | head -c 50000; i=$((i+1)); done; } | head -c %d > %s", n, file)
}

// testJobLogResume is the property test of resumable logs: a background job
// writes about 4 MiB of random bytes and text, interleaved on stdout and
// stderr; a
// reader disconnects at random points (after a random number of events, or
// by cutting the connection after a random number of bytes, mid-event),
// sometimes replays from an earlier event boundary, and resumes with
// Last-Event-ID or ?cursor=, each connection asking for the base64 or the
// text encoding. Every output event must start exactly where its stream
// ended, come as text exactly when text was asked for and its bytes
// qualify, and the reassembled streams must equal the files inside the
// sandbox byte for byte. A job whose output is one line of ASCII, which
// qualifies however it is cut, reads as text event by event.
func testJobLogResume(t *testing.T, e *env, svc *service) {
	seed := testSeed(t)

	for i, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			raw := svc.raw()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})

			outLen := int64(2<<20) + rng.Int64N(64<<10)
			errLen := int64(2<<20) - rng.Int64N(64<<10)
			gen := raw.exec(t, sb.ID, mixedBytesScript(outLen, "/tmp/gs-out")+" && "+mixedBytesScript(errLen, "/tmp/gs-err"))
			if gen.ExitCode != 0 {
				t.Fatalf("writing the random files: exit %d, stderr %q", gen.ExitCode, gen.Stderr)
			}
			sums := sandboxSums(t, raw, sb.ID, "/tmp/gs-out", "/tmp/gs-err")
			script, segments := mixedOutputScript(rng, "gs-out", "gs-err", outLen, errLen)
			job := raw.startJob(t, sb.ID, execBody{Script: script, MaxOutputBytes: 4 << 20, TimeoutMS: 300_000})
			t.Logf("job %s: %d segments, stdout %d bytes, stderr %d bytes", job.ID, segments, outLen, errLen)

			l := &jobLog{}
			deadline := time.Now().Add(3 * time.Minute)
			conns, rewinds, cuts := 0, 0, 0
			for l.exit == nil {
				if conns++; conns > 2000 || time.Now().After(deadline) {
					t.Fatalf("no exit event after %d connections (%d stdout, %d stderr bytes so far)", conns, len(l.stdout), len(l.stderr))
				}
				if len(l.marks) > 0 && rng.IntN(5) == 0 {
					l.rewind(rng.IntN(len(l.marks)+1) - 1) // replay from an earlier boundary
					rewinds++
				}
				req := logRequest{query: rng.IntN(3) == 0, noFollow: rng.IntN(10) == 0, text: rng.IntN(2) == 0}
				if l.cursor > 0 || rng.IntN(2) == 0 {
					req.cursor = strconv.FormatInt(l.cursor, 10)
				}
				k := rng.IntN(20)
				if conns < 16 {
					k = rng.IntN(19) // no read to the end before a fair number of disconnects
				}
				switch {
				case k < 10:
					left := 1 + rng.IntN(5)
					req.stop = func(*jobLog) bool { left--; return left <= 0 }
				case k < 19:
					// A cut lands anywhere, mid-event included.
					req.cutAfter = 1 + rng.Int64N(768<<10)
					cuts++
				}
				ctx, cancel := contextWithTimeout(callTimeout)
				err := raw.readLogs(ctx, job.ID, l, req)
				cancel()
				if err != nil {
					t.Fatalf("connection %d (%+v): %v", conns, req, err)
				}
			}
			t.Logf("reassembled from %d connections (%d cut mid-stream, %d replays from an earlier event), %d events, %d of them as text",
				conns, cuts, rewinds, len(l.marks), l.textEvents)

			x := l.exit
			if x.State != "succeeded" || x.ExitReason != "exited" || x.ExitCode == nil || *x.ExitCode != 0 {
				t.Errorf("exit event: %s; want succeeded, exited, 0", x)
			}
			if x.StdoutBytes != outLen || x.StderrBytes != errLen || x.StdoutTruncated || x.StderrTruncated || len(l.truncated) > 0 {
				t.Errorf("exit event: %s, truncated events %v; want %d and %d bytes, nothing truncated", x, l.truncated, outLen, errLen)
			}
			if int64(len(l.stdout)) != outLen || sha256Hex(l.stdout) != sums[0] {
				t.Errorf("reassembled stdout: %d bytes sha256 %s; the sandbox wrote %d bytes sha256 %s", len(l.stdout), sha256Hex(l.stdout), outLen, sums[0])
			}
			if int64(len(l.stderr)) != errLen || sha256Hex(l.stderr) != sums[1] {
				t.Errorf("reassembled stderr: %d bytes sha256 %s; the sandbox wrote %d bytes sha256 %s", len(l.stderr), sha256Hex(l.stderr), errLen, sums[1])
			}
			j := raw.waitJob(t, job.ID, finalWithin)
			if j.State != "succeeded" || j.StdoutBytes != outLen || j.StderrBytes != errLen || j.FinishedAt == nil {
				t.Errorf("GET job: state %s stdout %d stderr %d finished %v; want succeeded %d %d", j.State, j.StdoutBytes, j.StderrBytes, j.FinishedAt, outLen, errLen)
			}

			// A whole replay in one connection gives the same bytes.
			again := &jobLog{}
			ctx, cancel := contextWithTimeout(callTimeout)
			defer cancel()
			if err := raw.readLogs(ctx, job.ID, again, logRequest{cursor: "0", query: true, noFollow: true, text: true}); err != nil {
				t.Fatal(err)
			}
			if again.exit == nil || !bytes.Equal(again.stdout, l.stdout) || !bytes.Equal(again.stderr, l.stderr) || again.cursor != l.cursor {
				t.Errorf("a full replay differs: exit %v, stdout %d bytes, stderr %d bytes, last id %d (resumed reads: %d, %d, %d)",
					again.exit, len(again.stdout), len(again.stderr), again.cursor, len(l.stdout), len(l.stderr), l.cursor)
			}

			// Which events of the mixed output qualify for the text form
			// depends on where the output was cut into events, so any
			// number of them may (each connection checks that those which
			// qualify come as text). Output that is text however it is
			// cut, one line of ASCII, must come as text event by event.
			asText := raw.exec(t, sb.ID, "head -c 300000 /tmp/gs-out | base64 | tr -d '\\n' > /tmp/gs-text")
			if asText.ExitCode != 0 {
				t.Fatalf("writing the text file: exit %d, stderr %q", asText.ExitCode, asText.Stderr)
			}
			textSum := sandboxSums(t, raw, sb.ID, "/tmp/gs-text")[0]
			textJob := raw.startJob(t, sb.ID, execBody{Command: []string{"cat", "/tmp/gs-text"}, TimeoutMS: 60_000})
			tl := &jobLog{}
			if err := raw.readLogs(ctx, textJob.ID, tl, logRequest{text: true}); err != nil {
				t.Fatal(err)
			}
			if tl.exit == nil || tl.outputEvents == 0 || tl.textEvents != tl.outputEvents || sha256Hex(tl.stdout) != textSum {
				t.Errorf("a job printing one line of ASCII, read with encoding=text: exit %v, %d of %d output events as text, stdout %d bytes sha256 %s (the file: sha256 %s)",
					tl.exit, tl.textEvents, tl.outputEvents, len(tl.stdout), sha256Hex(tl.stdout), textSum)
			}
			t.Logf("one line of ASCII, %d bytes: %d output events, %d as text", len(tl.stdout), tl.outputEvents, tl.textEvents)
		})
	}
}

// cmdlinesScript lists "pid cmdline" of every process in the sandbox, the
// cmdline's NULs as spaces. It must not itself mention what tests look for.
const cmdlinesScript = `for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null); [ -n "$c" ] && printf '%s %s\n' "${p#/proc/}" "$c"; done; true`

// cmdlines returns the cmdline of every process in the sandbox.
func cmdlines(t *testing.T, raw *rawAPI, sandboxID string) []string {
	t.Helper()
	res := raw.exec(t, sandboxID, cmdlinesScript)
	if res.ExitCode != 0 {
		t.Fatalf("listing processes: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if _, c, ok := strings.Cut(line, " "); ok {
			out = append(out, strings.TrimSpace(c))
		}
	}
	return out
}

// testJobCancelKillsTree cancels a job whose tree holds a process in its own
// session that ignores SIGTERM, a double-forked orphan and a plain child:
// after POST /v1/jobs/{id}/cancel none of them is left in the sandbox, the
// job is canceled and its log stream ends with an exit event that says so.
func testJobCancelKillsTree(t *testing.T, e *env, svc *service) {
	eachRuntime(t, e, func(t *testing.T, rt string) {
		raw := svc.raw()
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		script := `setsid sh -c 'trap "" TERM; sleep 1001' &
( sh -c 'sleep 1002 &' & )
sleep 1003
`
		job := raw.startJob(t, sb.ID, execBody{Script: script, TimeoutMS: 600_000})
		logDone := make(chan *jobLog, 1)
		go func() {
			l := &jobLog{}
			ctx, cancel := contextWithTimeout(callTimeout)
			defer cancel()
			for l.exit == nil && ctx.Err() == nil {
				if err := raw.readLogs(ctx, job.ID, l, logRequest{cursor: strconv.FormatInt(l.cursor, 10)}); err != nil {
					break
				}
			}
			logDone <- l
		}()

		want := []string{"sleep 1001", "sleep 1002", "sleep 1003"}
		eventually(t, 30*time.Second, "the job's three sleeps run", func() (bool, string) {
			got := cmdlines(t, raw, sb.ID)
			for _, w := range want {
				if !slices.Contains(got, w) {
					return false, strings.Join(got, " | ")
				}
			}
			return true, ""
		})
		var cj client.Job
		if status, p := raw.call(t, http.MethodPost, "/v1/jobs/"+job.ID+"/cancel", nil, &cj); status != http.StatusAccepted || cj.ID != job.ID {
			t.Fatalf("cancel: %d %s %s (job %q), want 202", status, p.Code, p.Detail, cj.ID)
		}

		var l *jobLog
		select {
		case l = <-logDone:
		case <-time.After(callTimeout + 10*time.Second):
			t.Fatal("the log stream did not end after the cancel")
		}
		if l.exit == nil {
			t.Fatalf("the log stream of the canceled job ended without an exit event")
		}
		if l.exit.State != "canceled" || l.exit.ExitReason != "canceled" {
			t.Errorf("exit event: %s; want canceled, canceled", l.exit)
		}
		// The exit is reported once the tree is dead: nothing of it may be
		// left now, not even the job's own shell (its script names the sleeps).
		for _, c := range cmdlines(t, raw, sb.ID) {
			if strings.Contains(c, "sleep 100") {
				t.Errorf("left after the cancel: %q", c)
			}
		}
		j := raw.waitJob(t, job.ID, finalWithin)
		if j.State != "canceled" || j.ExitReason != "canceled" || j.FinishedAt == nil {
			t.Errorf("GET job: state %s reason %s finished %v; want canceled, canceled", j.State, j.ExitReason, j.FinishedAt)
		}
	})
}

// exitCase is one job of testJobExitReasons and what it must end with.
type exitCase struct {
	name   string
	req    execBody
	oom    bool // run in the small-memory Python sandbox
	cancel bool // cancel once it runs
	check  func(rt string, x *sseExit) string
}

// testJobExitReasons ends jobs in each of the ways the API distinguishes:
// a non-zero exit, a timeout, a signal, a cancel and an out-of-memory kill
// (TestJobsSurviveRestart covers lost). Each must carry its own exit reason,
// the same in the exit event and in GET /v1/jobs/{id}.
func testJobExitReasons(t *testing.T, e *env, svc *service) {
	eachRuntime(t, e, func(t *testing.T, rt string) {
		raw := svc.raw()
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		small := client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, Resources: &client.Resources{MemoryMB: 64}}
		if rt == "runc" {
			small.RiskLevel = "low"
		}
		sbOOM := e.createSandbox(t, small)

		want := func(state, reason string, code int) func(string, *sseExit) string {
			return func(_ string, x *sseExit) string {
				if x.State != state || x.ExitReason != reason || (code >= 0 && (x.ExitCode == nil || *x.ExitCode != code)) {
					return fmt.Sprintf("got %s; want %s, %s, code %d", x, state, reason, code)
				}
				return ""
			}
		}
		cases := []exitCase{
			{name: "exited", req: execBody{Script: "echo bye; exit 3"}, check: want("failed", "exited", 3)},
			{name: "timeout", req: execBody{Command: []string{"sleep", "60"}, TimeoutMS: 1000}, check: want("failed", "timeout", -1)},
			{name: "signal", req: execBody{Script: "echo before; kill -KILL $$; echo after"}, check: func(_ string, x *sseExit) string {
				if msg := want("failed", "signal", 137)("", x); msg != "" || x.Signal != "SIGKILL" {
					return fmt.Sprintf("got %s; want failed, signal, code 137, SIGKILL", x)
				}
				return ""
			}},
			{name: "canceled", req: execBody{Command: []string{"sleep", "60"}}, cancel: true, check: want("canceled", "canceled", -1)},
			{name: "oom", oom: true, req: execBody{Command: []string{"python3", "-c", "b = []\nwhile True:\n    b.append(b'x' * (1 << 20))\n"}},
				check: func(rt string, x *sseExit) string {
					if rt == "runc" {
						return want("failed", "oom", -1)("", x)
					}
					// Under gVisor the memory limit is the whole sandbox's:
					// the agent cannot tell an OOM kill of one process (and
					// the host may kill the sandbox itself, which makes the
					// job lost). Whatever it reports must not be success.
					if x.State == "succeeded" || (x.ExitReason == "exited" && x.ExitCode != nil && *x.ExitCode == 0) {
						return fmt.Sprintf("got %s; an out-of-memory job must not succeed", x)
					}
					return ""
				}},
		}
		reasons := map[string]string{}
		jobs := make([]client.Job, len(cases))
		for i, c := range cases {
			id := sb.ID
			if c.oom {
				id = sbOOM.ID
			}
			if c.req.TimeoutMS == 0 {
				c.req.TimeoutMS = 120_000
			}
			jobs[i] = raw.startJob(t, id, c.req)
		}
		for i, c := range cases {
			if c.cancel {
				eventually(t, 30*time.Second, "the job to cancel runs", func() (bool, string) {
					got := cmdlines(t, raw, sb.ID)
					return slices.Contains(got, "sleep 60"), strings.Join(got, " | ")
				})
				if status, p := raw.call(t, http.MethodPost, "/v1/jobs/"+jobs[i].ID+"/cancel", nil, nil); status != http.StatusAccepted {
					t.Fatalf("cancel: %d %s", status, p.Code)
				}
			}
		}
		for i, c := range cases {
			l := &jobLog{}
			raw.followLogs(t, jobs[i].ID, l, 2*time.Minute)
			j := raw.waitJob(t, jobs[i].ID, finalWithin)
			t.Logf("%s: exit event %s; GET job state %s reason %s signal %q", c.name, l.exit, j.State, j.ExitReason, j.Signal)
			if msg := c.check(rt, l.exit); msg != "" {
				t.Errorf("%s job under %s: %s", c.name, rt, msg)
			}
			if j.State != l.exit.State || j.ExitReason != l.exit.ExitReason || !equalCode(j.ExitCode, l.exit.ExitCode) {
				t.Errorf("%s job: GET says %s/%s/%v, the exit event %s", c.name, j.State, j.ExitReason, j.ExitCode, l.exit)
			}
			reasons[c.name] = l.exit.ExitReason
		}

		t.Logf("exit reasons under %s: %v", rt, reasons)
		if rt == "runc" {
			// The OOM killer took the job, not the sandbox's agent: the
			// sandbox still runs commands. (Under gVisor the host kills
			// the whole sandbox: docs/security.md.)
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			res, err := svc.client().Exec(ctx, sbOOM.ID, client.ExecRequest{Script: "echo alive"})
			cancel()
			if err != nil || res.Stdout != "alive\n" || res.ExitCode != 0 {
				t.Errorf("exec after the out-of-memory job: %+v, %v", res, err)
			}
		}
		seen := map[string]string{}
		for name, r := range reasons {
			if rt != "runc" && name == "oom" && r != "oom" {
				continue // recorded above; gVisor reports what it can
			}
			if other, dup := seen[r]; dup {
				t.Errorf("jobs %s and %s both ended as %q; the reasons must be distinct", name, other, r)
			}
			seen[r] = name
		}
	})
}

func equalCode(a, b *int) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// rssKB reads a field such as VmRSS or VmHWM from /proc/<pid>/status.
func rssKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// testJobOutputBounded runs `head -c 1G /dev/zero` (dd with 1 MiB blocks
// under gVisor) as a background job with the default caps: the job
// completes, its log keeps exactly the cap and says it truncated stdout, it
// reports the whole GiB produced, and the job log file on disk stays at
// about the cap while the job runs. TestJobs bounds the service's memory
// meanwhile.
func testJobOutputBounded(t *testing.T, e *env, svc *service) {
	const (
		gib      = int64(1) << 30
		capBytes = int64(1) << 20 // limits.default_output_bytes
	)
	eachRuntime(t, e, func(t *testing.T, rt string) {
		raw := svc.raw()
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		// head writes 8 KiB at a time; under gVisor every write is an
		// intercepted syscall, and 131072 of them take minutes on a
		// loaded two-core host, so runsc gets the same GiB in 1 MiB writes.
		cmd := []string{"head", "-c", strconv.FormatInt(gib, 10), "/dev/zero"}
		if rt != "runc" {
			cmd = []string{"dd", "if=/dev/zero", "bs=1048576", "count=1024", "status=none"}
		}
		job := raw.startJob(t, sb.ID, execBody{Command: cmd, TimeoutMS: 600_000})
		logFile := filepath.Join(e.dataDir, "jobs", job.ID+".log")

		done := make(chan struct{})
		maxSize := make(chan int64, 1)
		go func() {
			var max int64
			for {
				if fi, err := os.Stat(logFile); err == nil && fi.Size() > max {
					max = fi.Size()
				}
				select {
				case <-done:
					maxSize <- max
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		l := &jobLog{}
		raw.followLogs(t, job.ID, l, 8*time.Minute)
		close(done)
		largest := <-maxSize
		t.Logf("1 GiB job under %s took %v; largest log file %d bytes", rt, time.Since(start).Round(time.Millisecond), largest)

		x := l.exit
		if x.State != "succeeded" || x.ExitCode == nil || *x.ExitCode != 0 {
			t.Errorf("exit event: %s; want succeeded, code 0", x)
		}
		if x.StdoutBytes != gib || !x.StdoutTruncated || x.StderrBytes != 0 || x.StderrTruncated {
			t.Errorf("exit event counts: %s; want stdout %d produced and truncated, no stderr", x, gib)
		}
		if int64(len(l.stdout)) != capBytes || !bytes.Equal(l.stdout, make([]byte, capBytes)) {
			t.Errorf("kept stdout: %d bytes; want the cap, %d zero bytes", len(l.stdout), capBytes)
		}
		if len(l.truncated) != 1 || l.truncated[0] != (sseTruncated{Stream: "stdout", Kept: capBytes}) {
			t.Errorf("truncated events %+v; want one for stdout with kept %d", l.truncated, capBytes)
		}
		j := raw.waitJob(t, job.ID, finalWithin)
		if j.StdoutBytes != gib || !j.StdoutTruncated || j.State != "succeeded" {
			t.Errorf("GET job: state %s stdout_bytes %d truncated %v; want succeeded, %d, true", j.State, j.StdoutBytes, j.StdoutTruncated, gib)
		}
		fi, err := os.Stat(logFile)
		if err != nil {
			t.Fatalf("job log file: %v", err)
		}
		if fi.Size() < capBytes || fi.Size() > capBytes+64<<10 || largest > capBytes+64<<10 {
			t.Errorf("job log file %s: %d bytes (largest seen %d); want the cap %d plus framing, under %d", logFile, fi.Size(), largest, capBytes, capBytes+64<<10)
		}
	})
}

// testStreamedExec asks exec for text/event-stream: the first event is the
// job (id 0), then the output and the exit event. A quiet job gets a
// keepalive comment within 20 s of its job event, and when the streaming
// client goes away the job keeps running and its log can be resumed to its
// exit.
func testStreamedExec(t *testing.T, e *env, svc *service) {
	eachRuntime(t, e, func(t *testing.T, rt string) {
		raw := svc.raw()
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})

		// A quiet job: a keepalive comment within 20 s of its job event,
		// then disconnect. It runs while the echo below is checked. The
		// server's 15 s keepalive ticker starts after the job event, and the
		// job's start can take seconds on a loaded machine, so the bound is
		// measured from that event; the stream's limit and the sleep leave
		// room for a slow start, so that only a missing keepalive fails.
		quietDone := make(chan streamResult, 1)
		go func() {
			quietDone <- streamExec(raw, sb.ID, execBody{Command: []string{"sleep", "40"}}, time.Minute, sseItem.isComment)
		}()

		echo := streamExec(raw, sb.ID, execBody{Command: []string{"echo", "hi"}}, callTimeout, nil)
		if echo.err != nil {
			t.Fatalf("streamed echo hi: %v", echo.err)
		}
		if l := echo.log; l.exit == nil || string(l.stdout) != "hi\n" || len(l.stderr) != 0 {
			t.Errorf("streamed echo hi: stdout %q stderr %q exit %v", l.stdout, l.stderr, l.exit)
		} else if l.exit.State != "succeeded" || l.exit.ExitCode == nil || *l.exit.ExitCode != 0 || l.exit.JobID != echo.jobID {
			t.Errorf("streamed echo hi: exit %s of job %s; want succeeded, 0, job %s", l.exit, l.exit.JobID, echo.jobID)
		}
		var names []string
		for _, it := range echo.items {
			names = append(names, it.Event)
		}
		if !slices.Equal(names, []string{"job", "stdout", "exit"}) || echo.items[0].ID != "0" {
			t.Errorf("events %v (first id %q); want job (id 0), stdout, exit", names, echo.items[0].ID)
		}

		q := <-quietDone
		if q.err != nil {
			t.Fatalf("no keepalive comment from a quiet job: %v", q.err)
		}
		last := q.items[len(q.items)-1]
		if !last.isComment() || last.Comment != "keepalive" || q.sinceFirst > 20*time.Second {
			t.Fatalf("no keepalive comment within 20 s of a quiet job's job event (waited %v, %v in all, items %+v)", q.sinceFirst, q.elapsed, q.items)
		}
		t.Logf("keepalive %v after the job event (%v after the request)", q.sinceFirst.Round(time.Millisecond), q.elapsed.Round(time.Millisecond))
		if q.log.exit != nil {
			t.Fatalf("sleep 40 already ended: %s", q.log.exit)
		}
		// The stream's client went away; the job goes on to its end, up to
		// about 25 s of its sleep later.
		l := &jobLog{}
		raw.followLogs(t, q.jobID, l, 2*time.Minute)
		if l.exit.State != "succeeded" || l.exit.ExitReason != "exited" {
			t.Errorf("the job whose streaming client left: %s; want succeeded", l.exit)
		}
	})
}

// streamResult is what streamExec read.
type streamResult struct {
	jobID   string    // from the X-Genesis-Job-ID header
	items   []sseItem // in order, comments included
	log     *jobLog
	elapsed time.Duration // from the request to the end of reading
	// sinceFirst is the time from the first event (the job event) to the
	// end of reading, 0 if no event came.
	sinceFirst time.Duration
	err        error
}

// streamExec posts an exec with Accept: text/event-stream and reads items
// until the exit event or until stop (if set) returns true, for at most
// timeout. It checks the answer's headers and that the first event is the
// job event (id 0) with the job of the X-Genesis-Job-ID header.
func streamExec(raw *rawAPI, sandboxID string, body execBody, timeout time.Duration, stop func(sseItem) bool) (res streamResult) {
	start := time.Now()
	var first time.Time
	defer func() {
		res.elapsed = time.Since(start)
		if !first.IsZero() {
			res.sinceFirst = time.Since(first)
		}
	}()
	res.log = &jobLog{}
	ctx, cancel := contextWithTimeout(timeout)
	defer cancel()
	b, err := json.Marshal(body)
	if err != nil {
		res.err = err
		return res
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, raw.base+"/v1/sandboxes/"+sandboxID+"/exec", bytes.NewReader(b))
	if err != nil {
		res.err = err
		return res
	}
	req.Header.Set("Authorization", "Bearer "+raw.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := raw.hc.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		res.err = fmt.Errorf("answer %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
		return res
	}
	res.jobID = resp.Header.Get("X-Genesis-Job-ID")
	if res.jobID == "" || resp.Header.Get("Location") != "/v1/jobs/"+res.jobID {
		res.err = fmt.Errorf("headers X-Genesis-Job-ID %q, Location %q", res.jobID, resp.Header.Get("Location"))
		return res
	}
	r := newSSEReader(resp.Body)
	for res.log.exit == nil {
		it, err := r.next()
		if err != nil {
			res.err = fmt.Errorf("after %d items and %v (limit %v): %w", len(res.items), time.Since(start).Round(time.Millisecond), timeout, err)
			return res
		}
		res.items = append(res.items, it)
		if len(res.items) == 1 {
			first = time.Now()
			var j client.Job
			if it.Event != "job" || it.ID != "0" || json.Unmarshal([]byte(it.Data), &j) != nil || j.ID != res.jobID || j.Mode != "background" {
				res.err = fmt.Errorf("first item %+v; want the job event, id 0, of background job %s", it, res.jobID)
				return res
			}
		}
		if err := res.log.apply(it); err != nil {
			res.err = err
			return res
		}
		if stop != nil && stop(it) {
			break
		}
	}
	return res
}
