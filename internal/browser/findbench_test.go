package browser

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/coder/websocket"

	"genesis.dev/sandbox/api"
)

// BenchmarkFindCost (GENESIS_BENCH_FIND=N calls a variant, default 100)
// times ways of a click's find evaluate against this machine's Chromium,
// alternating call by call: p50 and the CPU a call of the benchmark's
// process and of Chromium's processes.
func BenchmarkFindCost(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("GENESIS_BENCH_FIND"))
	if n <= 0 {
		n = 100
	}
	tgt := hostBrowser(b)
	m := newManager(b, tgt, &memKeeper{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := runOK(b, ctx, m)
	run(api.BrowserAction{Type: "evaluate", Expression: `document.body.innerHTML = '<button id="b" style="position:absolute;left:10px;top:10px;width:200px;height:80px">0</button>'; let n = 0; document.getElementById('b').addEventListener('click', () => { n++; document.title = 'clicked ' + n; }); 1`})
	run(api.BrowserAction{Type: "click", Selector: "#b"})
	s, err := m.session(ctx, tgt)
	if err != nil {
		b.Fatal(err)
	}
	tc := s.tabs[s.active]
	pid, _ := chromiumPIDs.Load(tgt.Spec.CDPPort)

	// A direct client: its own connection, attached to the same page.
	v, err := fetchVersion(ctx, tgt)
	if err != nil {
		b.Fatal(err)
	}
	ws, _, err := websocket.Dial(ctx, v.WebSocketDebuggerURL, nil)
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(1 << 24)
	defer ws.CloseNow()
	id := 0
	raw := func(session, method string, params any) json.RawMessage {
		id++
		req, _ := json.Marshal(map[string]any{"id": id, "sessionId": session, "method": method, "params": params})
		if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
			b.Fatal(err)
		}
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			var msg struct {
				ID     int
				Result json.RawMessage
				Error  json.RawMessage
			}
			json.Unmarshal(data, &msg)
			if msg.ID == id {
				if msg.Error != nil {
					b.Fatalf("%s: %s", method, msg.Error)
				}
				return msg.Result
			}
		}
	}
	var att struct{ SessionID string }
	json.Unmarshal(raw("", "Target.attachToTarget", map[string]any{"targetId": string(s.active), "flatten": true}), &att)

	variants := []struct {
		name string
		f    func(c context.Context) error
	}{
		{"old: evaluate, listenScript+clickTarget(sel, remaining)", func(c context.Context) error {
			_, err := inWorld(s, c, func(id runtime.ExecutionContextID) (point, error) {
				return evalIn[point](s, c, id, listenScript+";\n"+clickTarget("#b", remaining(c)), true)
			})
			return err
		}},
		{"new: callFunctionOn findInWorld", func(c context.Context) error {
			_, err := inWorld(s, c, func(id runtime.ExecutionContextID) (point, error) {
				return callIn[point](s, c, id, findInWorld, "#b", remaining(c))
			})
			return err
		}},
		{"world: evaluate 1", func(c context.Context) error {
			_, err := inWorld(s, c, func(id runtime.ExecutionContextID) (int, error) { return evalIn[int](s, c, id, "1", false) })
			return err
		}},
		{"session: evaluate 1", func(c context.Context) error {
			_, err := evalPage[int](s, c, "1", false)
			return err
		}},
		{"direct: evaluate 1", func(c context.Context) error {
			raw(att.SessionID, "Runtime.evaluate", map[string]any{"expression": "1", "returnByValue": true})
			return nil
		}},
		{"direct: evaluate clickTarget(sel, remaining)", func(c context.Context) error {
			raw(att.SessionID, "Runtime.evaluate", map[string]any{"expression": clickTarget("#b", remaining(c)), "returnByValue": true, "awaitPromise": true})
			return nil
		}},
		{"direct: cdpdirect's constant find", func(c context.Context) error {
			raw(att.SessionID, "Runtime.evaluate", map[string]any{"expression": `(() => { const e = document.querySelector('#b'); e.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'}); const r = e.getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()`, "returnByValue": true, "awaitPromise": true})
			return nil
		}},
		{"direct: evaluate clickTarget(sel, 10000), constant", func(c context.Context) error {
			raw(att.SessionID, "Runtime.evaluate", map[string]any{"expression": clickTarget("#b", 10000), "returnByValue": true, "awaitPromise": true})
			return nil
		}},
	}
	took := make([][]float64, len(variants))
	self := make([]time.Duration, len(variants))
	chrome := make([]time.Duration, len(variants))
	for i := range n {
		for k := range variants {
			j := (k + i) % len(variants)
			c, cancel := context.WithTimeout(tc.ctx, 10*time.Second)
			cs, ss := chromiumCPU(pid.(int)), selfCPU()
			t0 := time.Now()
			err := variants[j].f(c)
			d := time.Since(t0)
			self[j] += selfCPU() - ss
			chrome[j] += chromiumCPU(pid.(int)) - cs
			cancel()
			if err != nil {
				b.Fatalf("%s: %v", variants[j].name, err)
			}
			took[j] = append(took[j], float64(d.Microseconds())/1000)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("n = %d, load %s", n, strings.Fields(string(load))[:3])
	for j, v := range variants {
		slices.Sort(took[j])
		b.Logf("%-55s p50 %.3f p90 %.3f min %.3f ms; CPU a call: test %d µs, chromium %d µs", v.name,
			took[j][len(took[j])/2], took[j][len(took[j])*9/10], took[j][0], self[j].Microseconds()/int64(n), chrome[j].Microseconds()/int64(n))
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// chromiumCPU is the CPU time of the threads of the processes of
// process group pgid (schedstat: ns on a CPU).
func chromiumCPU(pgid int) time.Duration {
	var ns int64
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		tasks, _ := filepath.Glob(filepath.Join(filepath.Dir(d), "task", "*", "schedstat"))
		for _, ts := range tasks {
			b, err := os.ReadFile(ts)
			if err != nil {
				continue
			}
			v, _ := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
			ns += v
		}
	}
	return time.Duration(ns)
}
