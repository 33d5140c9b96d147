package kube

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
)

// Probe asks the cluster for its version, checks that each configured
// RuntimeClass exists and runs a smoke Pod under it: the agent image's
// "genesis-agent version", whose kernel line says what really ran (gVisor
// reports its own kernel).
func (d *Driver) Probe(ctx context.Context) (driver.ProbeResult, error) {
	res := driver.ProbeResult{Driver: d.Name(), CheckedAt: time.Now().UTC(),
		DiskQuota: driver.Feature{Supported: false, Reason: "workspace size limits are the kubelet's emptyDir sizeLimit, not a quota the service enforces"}}
	v, err := d.cs.Discovery().ServerVersion()
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	res.DaemonVersion, res.APIVersion, res.Healthy = v.GitVersion, v.Major+"."+v.Minor, true
	rts := make([]string, 0, len(d.cfg.RuntimeClasses))
	for rt := range d.cfg.RuntimeClasses {
		rts = append(rts, string(rt))
	}
	slices.Sort(rts)
	for _, rt := range rts {
		rc := d.cfg.RuntimeClasses[sandbox.Runtime(rt)]
		ri := driver.RuntimeInfo{Name: rt, Path: "runtimeclass/" + rc, CheckedAt: time.Now().UTC(), Features: stateFeatures}
		if rc == "" {
			ri.Path = "the cluster's default handler"
		} else if _, err := d.cs.NodeV1().RuntimeClasses().Get(ctx, rc, metav1.GetOptions{}); err != nil {
			ri.Error = fmt.Sprintf("RuntimeClass %s: %v", rc, err)
			res.Runtimes = append(res.Runtimes, ri)
			continue
		}
		d.smoke(ctx, &ri)
		res.Runtimes = append(res.Runtimes, ri)
	}
	return res, nil
}

// smoke runs the agent's version command in a Pod under ri.Name.
func (d *Driver) smoke(ctx context.Context, ri *driver.RuntimeInfo) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ProbeTimeout)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "genesis-probe-" + ri.Name + "-" + hex.EncodeToString(b[:])
	begin := time.Now()
	pod, err := d.pod(driver.Spec{
		Name: name, Image: d.cfg.AgentImage, Runtime: sandbox.Runtime(ri.Name),
		Labels:    map[string]string{driver.LabelPurpose: "probe"},
		User:      "65534:65534",
		Cmd:       []string{agentImageBinary, "version"},
		Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 128},
		ReadOnly:  true,
	})
	if err == nil {
		_, err = d.create(ctx, pod)
	}
	if err != nil {
		ri.Error, ri.TimedOut = err.Error(), ctx.Err() != nil
		return
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := d.Remove(cctx, name); err != nil {
			d.log.Error("probe: remove smoke pod", "pod", name, "err", err)
		}
	}()
	if err := d.Start(ctx, name); err != nil {
		ri.Error, ri.TimedOut = err.Error(), ctx.Err() != nil
		return
	}
	for {
		st, err := d.Inspect(ctx, name)
		if err != nil {
			ri.Error, ri.TimedOut = err.Error(), ctx.Err() != nil
			return
		}
		// A pod sandbox the node cannot make is not retried into health:
		// report the node's reason now rather than at the deadline.
		if st.State == "created" && time.Since(begin) > 3*time.Second {
			if ev := d.events(ctx, name); strings.Contains(ev, "FailedCreatePodSandBox") {
				ri.Error = "the node cannot start a pod under this RuntimeClass: " + ev
				return
			}
		}
		if st.State == "exited" {
			if st.ExitCode != 0 {
				ri.Error = fmt.Sprintf("smoke pod exited %d: %s", st.ExitCode, d.events(ctx, name))
				return
			}
			break
		}
		select {
		case <-ctx.Done():
			ri.TimedOut = true
			ri.Error = fmt.Sprintf("smoke pod did not finish in %v: %s", d.cfg.ProbeTimeout, d.events(context.WithoutCancel(ctx), name))
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	out, err := d.pods().GetLogs(name, &corev1.PodLogOptions{Container: sandboxContainer}).DoRaw(ctx)
	ri.SmokeMS = time.Since(begin).Milliseconds()
	if err != nil {
		ri.Error = "reading the smoke pod's output: " + err.Error()
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var v agentproto.VersionInfo
		if json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &v) == nil && v.Kernel != "" {
			ri.Healthy, ri.Version = true, v.Kernel
			return
		}
	}
	ri.Error = "the smoke pod printed no version line: " + string(out)
}

// events are the Pod's latest warning events, for errors.
func (d *Driver) events(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := d.cs.CoreV1().Events(d.cfg.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	if err != nil {
		return "(no events: " + err.Error() + ")"
	}
	var out []string
	for _, e := range l.Items {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	if len(out) == 0 {
		return "(no warning events)"
	}
	if len(out) > 3 {
		out = out[len(out)-3:]
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// stateFeatures: the kubelet offers no freeze of a Pod, a Pod's files live
// on its node, and memory checkpoints of Pods are not exposed (gVisor's
// containerd shim and Kubernetes' pod checkpointing are not released for
// this), so none of them is offered on Kubernetes yet; the API answers 501
// with these reasons.
var stateFeatures = driver.RuntimeFeatures{
	Pause:            driver.Feature{Reason: "Kubernetes offers no way to freeze a Pod's processes through the kubelet"},
	FSSnapshot:       driver.Feature{Reason: "the Kubernetes driver keeps no snapshots of a Pod's files yet (they live on its node)"},
	MemoryCheckpoint: driver.Feature{Reason: "Kubernetes exposes no checkpoint and restore of a Pod's memory here"},
}
