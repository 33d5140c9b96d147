package kube

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	v1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Names the driver gives the parts of a Pod.
const (
	startGate        = "dev.genesis/start"  // scheduling gate held until Start
	keepFinalizer    = "dev.genesis/keep"   // keeps a stopped Pod readable until Remove
	labelsAnnotation = "dev.genesis/labels" // every label, JSON
	// tokenAnnotation is the generation of the agent's token (absent: 0);
	// a pool reset moves it on.
	tokenAnnotation  = "dev.genesis/agent-token-generation"
	sandboxContainer = "sandbox"
	installContainer = "genesis-agent-install"
	agentVolume      = "genesis-agent"
	workspaceVolume  = "workspace"
	// agentImageBinary is where the agent image keeps the binary.
	agentImageBinary = "/genesis-agent"
)

// addressWait bounds how long a dial waits for a Pod's address.
const addressWait = time.Minute

// DefaultProbeTimeout bounds one runtime's smoke Pod.
const DefaultProbeTimeout = 90 * time.Second

// Config configures the driver.
type Config struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster.
	Kubeconfig string
	// Namespace holds every Pod the driver makes.
	Namespace string
	// RuntimeClasses maps each runtime the service offers to the
	// RuntimeClass its Pods run under ("" is the cluster's default
	// handler). A runtime missing here is refused, never run another way.
	RuntimeClasses map[sandbox.Runtime]string
	// AgentImage holds the agent binary at /genesis-agent: the service's
	// own image.
	AgentImage string
	// PullPolicy is the Pods' image pull policy: Never (images are on the
	// nodes; a missing one fails Create as image_not_built), IfNotPresent
	// or Always.
	PullPolicy corev1.PullPolicy
	// AgentPort is the agent's TCP port in each Pod.
	AgentPort int
	// TokenKey derives each sandbox agent's token; every replica needs
	// the same key.
	TokenKey []byte
	// RequestRatio is the share of the limits a Pod requests (0 means 1).
	RequestRatio float64
	// ProbeTimeout bounds one runtime's smoke Pod.
	ProbeTimeout time.Duration
	// StorageClass is the StorageClass of volumes' claims; empty means
	// the cluster's default. With neither, volumes are unavailable.
	StorageClass string
	Logger       *slog.Logger
}

// Driver runs containers as Pods. Safe for concurrent use.
type Driver struct {
	cfg Config
	cs  kubernetes.Interface
	log *slog.Logger
}

var (
	_ driver.Driver       = (*Driver)(nil)
	_ driver.Sandboxer    = (*Driver)(nil)
	_ driver.AgentRekeyer = (*Driver)(nil)
)

// New connects to the cluster (it does not call it yet).
func New(cfg Config) (*Driver, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kube: cluster config: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	// Sandboxes come in bursts (a lease storm, a pool refill): the
	// client's default 5 requests per second would queue them.
	rc.QPS, rc.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube: client: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	return NewWithClient(cfg, cs)
}

// NewWithClient is New over a given client.
func NewWithClient(cfg Config, cs kubernetes.Interface) (*Driver, error) {
	switch {
	case cfg.Namespace == "":
		return nil, errdefs.Invalid("kube: a namespace is required")
	case cfg.AgentImage == "":
		return nil, errdefs.Invalid("kube: an agent image is required")
	case len(cfg.TokenKey) < 16:
		return nil, errdefs.Invalid("kube: a token key of at least 16 bytes is required")
	case len(cfg.RuntimeClasses) == 0:
		return nil, errdefs.Invalid("kube: at least one runtime is required")
	}
	switch cfg.PullPolicy {
	case "":
		cfg.PullPolicy = corev1.PullIfNotPresent
	case corev1.PullNever, corev1.PullIfNotPresent, corev1.PullAlways:
	default:
		return nil, errdefs.Invalid("kube: pull policy %q is not Never, IfNotPresent or Always", cfg.PullPolicy)
	}
	if cfg.AgentPort == 0 {
		cfg.AgentPort = agentproto.DefaultTCPPort
	}
	if cfg.RequestRatio <= 0 || cfg.RequestRatio > 1 {
		cfg.RequestRatio = 1
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, cs: cs, log: cfg.Logger}, nil
}

// Name is "kubernetes".
func (d *Driver) Name() string { return "kubernetes" }

// Capabilities: none of the optional ones.
func (d *Driver) Capabilities() driver.Capabilities { return driver.Capabilities{} }

func (d *Driver) pods() v1.PodInterface { return d.cs.CoreV1().Pods(d.cfg.Namespace) }

// Create makes the Pod of spec held back by a scheduling gate.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (string, error) {
	pod, err := d.pod(spec)
	if err != nil {
		return "", err
	}
	return d.create(ctx, pod)
}

func (d *Driver) create(ctx context.Context, pod *corev1.Pod) (string, error) {
	if d.cfg.PullPolicy == corev1.PullNever {
		var refs []string
		for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			refs = append(refs, c.Image)
		}
		missing, err := d.missingImages(ctx, refs)
		if err != nil {
			return "", err
		}
		if len(missing) > 0 {
			return "", errdefs.WithCode("image_not_built", fmt.Errorf(
				"image %s is not on the cluster's nodes (pull policy Never): %w", missing[0], errdefs.ErrFailedPrecondition))
		}
	}
	if _, err := d.pods().Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", apiErr("create pod "+pod.Name, err)
	}
	return pod.Name, nil
}

// pod is the Pod of a container spec: hardened, gated, finalized.
func (d *Driver) pod(spec driver.Spec) (*corev1.Pod, error) {
	claimVols, claimVMs, err := claimMounts(spec.Mounts)
	if err != nil {
		return nil, err
	}
	if spec.Network != "" && spec.Network != "none" {
		return nil, fmt.Errorf("kube: network %q: Pods get no network but the agent's: %w", spec.Network, errdefs.ErrNotImplemented)
	}
	rt := spec.Runtime
	if rt == "" {
		rt = sandbox.RuntimeRunc
	}
	rc, ok := d.cfg.RuntimeClasses[rt]
	if !ok {
		return nil, fmt.Errorf("kube: runtime %s has no RuntimeClass configured: %w", rt, errdefs.ErrFailedPrecondition)
	}
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, err
	}
	no := false
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[driver.LabelManaged] = "true"
	labels[driver.LabelRuntime] = string(rt)
	all, err := json.Marshal(labels)
	if err != nil {
		return nil, err
	}
	podLabels := map[string]string{}
	for k, v := range labels {
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			podLabels[k] = v
		}
	}
	env := make([]corev1.EnvVar, 0, len(spec.Env))
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	res, err := resources(spec.Resources, d.cfg.RequestRatio)
	if err != nil {
		return nil, err
	}
	var caps []corev1.Capability
	for _, c := range spec.CapAdd {
		caps = append(caps, corev1.Capability(strings.TrimPrefix(strings.ToUpper(c), "CAP_")))
	}
	c := corev1.Container{
		Name: sandboxContainer, Image: spec.Image, ImagePullPolicy: d.cfg.PullPolicy,
		Command: slices.Clone(spec.Cmd), Env: env, WorkingDir: spec.WorkDir, Resources: res,
		SecurityContext:          hardened(uid, gid, spec.ReadOnly, caps),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	vols := claimVols
	c.VolumeMounts = claimVMs
	for _, target := range sortedKeys(spec.Tmpfs) {
		name := fmt.Sprintf("tmpfs-%d", len(vols))
		ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if size := tmpfsSize(spec.Tmpfs[target]); size != nil {
			ed.SizeLimit = size
		}
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: target})
	}
	var sysctls []corev1.Sysctl
	for _, k := range sortedKeys(spec.Sysctls) {
		sysctls = append(sysctls, corev1.Sysctl{Name: k, Value: spec.Sysctls[k]})
	}
	grace := int64(2)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: objectName(spec.Name), Namespace: d.cfg.Namespace, Labels: podLabels,
			Annotations: map[string]string{labelsAnnotation: string(all)},
			Finalizers:  []string{keepFinalizer},
		},
		Spec: corev1.PodSpec{
			SchedulingGates:               []corev1.PodSchedulingGate{{Name: startGate}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			Hostname:                      spec.Hostname,
			TerminationGracePeriodSeconds: &grace,
			// No cluster DNS: a sandbox has no network but its agent's,
			// and its resolver points at its own loopback, where nothing
			// answers.
			DNSPolicy: corev1.DNSNone,
			DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				Sysctls:        sysctls,
			},
			Containers: []corev1.Container{c},
			Volumes:    vols,
		},
	}
	if rc != "" {
		p.Spec.RuntimeClassName = &rc
	}
	return p, nil
}

// hardened is the security context of every container the driver makes.
func hardened(uid, gid *int64, readOnly bool, add []corev1.Capability) *corev1.SecurityContext {
	no := false
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Privileged:               &no,
		ReadOnlyRootFilesystem:   &readOnly,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: add},
		RunAsUser:                uid,
		RunAsGroup:               gid,
	}
	if uid != nil && *uid != 0 {
		yes := true
		sc.RunAsNonRoot = &yes
	}
	return sc
}

// parseUser is the Pod's user and group, nil for the image's own ("").
func parseUser(u string) (uid, gid *int64, err error) {
	if u == "" {
		return nil, nil, nil
	}
	x, y, err := driver.ParseUser(u)
	if err != nil {
		return nil, nil, fmt.Errorf("kube: %w", err)
	}
	a, b := int64(x), int64(y)
	return &a, &b, nil
}

// resources are the limits of r and requests of ratio of them (at 1 the
// Pod is Guaranteed: it never runs on more than it was given, nor on less).
func resources(r sandbox.Resources, ratio float64) (corev1.ResourceRequirements, error) {
	l, q := corev1.ResourceList{}, corev1.ResourceList{}
	if r.CPU > 0 {
		l[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(r.CPU*1000)), resource.DecimalSI)
		q[corev1.ResourceCPU] = *resource.NewMilliQuantity(max(1, int64(math.Ceil(r.CPU*1000*ratio))), resource.DecimalSI)
	}
	if r.MemoryMB > 0 {
		l[corev1.ResourceMemory] = *resource.NewQuantity(r.MemoryMB<<20, resource.BinarySI)
		q[corev1.ResourceMemory] = *resource.NewQuantity(max(1<<20, int64(float64(r.MemoryMB<<20)*ratio)), resource.BinarySI)
	}
	return corev1.ResourceRequirements{Requests: q, Limits: l}, nil
}

// installResources are the install container's: limits of 100m CPU and
// 64 MiB, requests no more than the sandbox container's (sandbox) nor the
// limits. A Pod's scheduling request is the larger of its init and its
// regular containers', so the install step never makes a sandbox ask for
// more than its own request; where that equals the limits (request_ratio
// 1) the Pod stays Guaranteed.
func installResources(sandbox corev1.ResourceList) corev1.ResourceRequirements {
	lim := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	floor := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("1Mi")}
	req := corev1.ResourceList{}
	for name, l := range lim {
		r := floor[name]
		if q, ok := sandbox[name]; ok {
			r = q.DeepCopy()
		}
		if r.Cmp(l) > 0 {
			r = l.DeepCopy()
		}
		req[name] = r
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

// tmpfsSize reads size=N[kmg] from tmpfs options.
func tmpfsSize(opts string) *resource.Quantity {
	for _, o := range strings.Split(opts, ",") {
		v, ok := strings.CutPrefix(o, "size=")
		if !ok {
			continue
		}
		mult := int64(1)
		switch {
		case strings.HasSuffix(v, "k"):
			mult, v = 1<<10, strings.TrimSuffix(v, "k")
		case strings.HasSuffix(v, "m"):
			mult, v = 1<<20, strings.TrimSuffix(v, "m")
		case strings.HasSuffix(v, "g"):
			mult, v = 1<<30, strings.TrimSuffix(v, "g")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil
		}
		return resource.NewQuantity(n*mult, resource.BinarySI)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Start lets the Pod go: the scheduling gate is removed.
func (d *Driver) Start(ctx context.Context, id string) error {
	id = objectName(id)
	for attempt := 0; ; attempt++ {
		p, err := d.pods().Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return apiErr("get pod "+id, err)
		}
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("kube: pod %s is stopping or stopped and cannot start again: %w", id, errdefs.ErrFailedPrecondition)
		}
		if len(p.Spec.SchedulingGates) == 0 {
			return nil
		}
		// Only if the Pod is still the one read: its gates are removed whole.
		patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/resourceVersion","value":%q},{"op":"remove","path":"/spec/schedulingGates"}]`, p.ResourceVersion)
		started, err := d.pods().Patch(ctx, id, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
		if err == nil {
			return d.waitScheduled(ctx, started)
		}
		// A failed test: the Pod changed meanwhile (its status); read again.
		if attempt < 5 && (apierrors.IsConflict(err) || apierrors.IsInvalid(err) || strings.Contains(err.Error(), "test operation")) {
			continue
		}
		return apiErr("start pod "+id, err)
	}
}

// scheduleWait is how long Start waits for the scheduler to bind a Pod
// that no node has room for yet (Pods being deleted free room; the
// scheduler tries again as they go).
const scheduleWait = 10 * time.Second

// waitScheduled waits until the scheduler has bound p to a node. A Pod
// that the scheduler still finds no node for after scheduleWait means the
// cluster has no room: errdefs.ErrUnavailable with code
// "capacity_exhausted" and the scheduler's reason, rather than an agent
// that never answers. Anything else (the Pod gone, the watch failing, ctx
// ending) returns nil: the wait for the agent tells.
func (d *Driver) waitScheduled(ctx context.Context, p *corev1.Pod) error {
	wctx, cancel := context.WithTimeout(ctx, scheduleWait)
	defer cancel()
	for {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			return nil
		}
		why := unschedulable(p)
		next, err := d.nextVersion(wctx, p)
		switch {
		case err != nil && why != "" && wctx.Err() != nil && ctx.Err() == nil:
			return errdefs.WithRetryAfter(5*time.Second, errdefs.WithCode("capacity_exhausted", fmt.Errorf(
				"kube: no node of the cluster took pod %s within %v: %s: %w", p.Name, scheduleWait, why, errdefs.ErrUnavailable)))
		case err != nil:
			return nil
		}
		p = next
	}
}

// unschedulable is the scheduler's reason why no node takes p, or "".
func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// Stop deletes the Pod with grace; the finalizer keeps it readable as
// exited until Remove. It returns once the container is not running.
func (d *Driver) Stop(ctx context.Context, id string, grace time.Duration) error {
	id = objectName(id)
	p, err := d.pods().Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return apiErr("get pod "+id, err)
	}
	if p.DeletionTimestamp == nil {
		secs := max(1, int64(math.Ceil(grace.Seconds())))
		uid := p.UID
		if err := d.pods().Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &secs,
			Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return apiErr("stop pod "+id, err)
		}
	}
	for {
		st, err := d.Inspect(ctx, id)
		if err != nil || !st.Running {
			if errors.Is(err, errdefs.ErrNotFound) {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube: pod %s still running: %w", id, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Remove drops the finalizer and deletes the Pod at once.
func (d *Driver) Remove(ctx context.Context, id string) error {
	id = objectName(id)
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := d.pods().Patch(ctx, id, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return apiErr("remove pod "+id, err)
	}
	zero := int64(0)
	if err := d.pods().Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		return apiErr("remove pod "+id, err)
	}
	return nil
}

// Inspect reads the Pod.
func (d *Driver) Inspect(ctx context.Context, id string) (driver.Status, error) {
	id = objectName(id)
	p, err := d.pods().Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return driver.Status{}, apiErr("inspect pod "+id, err)
	}
	return status(p), nil
}

// List returns every managed Pod of the namespace.
func (d *Driver) List(ctx context.Context) ([]driver.Status, error) {
	l, err := d.pods().List(ctx, metav1.ListOptions{LabelSelector: driver.LabelManaged + "=true"})
	if err != nil {
		return nil, apiErr("list pods", err)
	}
	out := make([]driver.Status, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, status(&l.Items[i]))
	}
	return out, nil
}

// status maps a Pod to a container status.
func status(p *corev1.Pod) driver.Status {
	st := driver.Status{ID: p.Name, Name: p.Name, Labels: map[string]string{}, CreatedAt: p.CreationTimestamp.Time, State: "created"}
	if err := json.Unmarshal([]byte(p.Annotations[labelsAnnotation]), &st.Labels); err != nil {
		st.Labels = p.Labels
	}
	st.Runtime = st.Labels[driver.LabelRuntime]
	if len(p.Spec.Containers) > 0 {
		st.Image = p.Spec.Containers[0].Image
	}
	if p.Status.PodIP != "" {
		st.Networks = map[string]string{"pod": p.Status.PodIP}
	}
	var cs *corev1.ContainerStatus
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == sandboxContainer {
			cs = &p.Status.ContainerStatuses[i]
		}
	}
	switch {
	case cs != nil && cs.State.Terminated != nil:
		t := cs.State.Terminated
		st.State, st.ExitCode, st.OOMKilled, st.StartedAt = "exited", int(t.ExitCode), t.Reason == "OOMKilled", t.StartedAt.Time
	case p.DeletionTimestamp != nil && (cs == nil || cs.State.Running == nil):
		st.State = "exited"
	case cs != nil && cs.State.Running != nil && p.DeletionTimestamp == nil:
		st.State, st.Running, st.StartedAt = "running", true, cs.State.Running.StartedAt.Time
	case cs != nil && cs.State.Running != nil:
		// Deleted with grace: the container is being stopped.
		st.State, st.Running, st.StartedAt = "running", true, cs.State.Running.StartedAt.Time
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		st.State = "exited"
	}
	return st
}

// ImagePresent says whether ref is on a node of the cluster (the kubelet
// reports node images); with a pull policy other than Never every image
// counts as present: the node pulls it.
func (d *Driver) ImagePresent(ctx context.Context, ref string) (bool, error) {
	if d.cfg.PullPolicy != corev1.PullNever {
		return true, nil
	}
	missing, err := d.missingImages(ctx, []string{ref})
	return err == nil && len(missing) == 0, err
}

// missingImages are those of refs on no node, from one read of the nodes.
func (d *Driver) missingImages(ctx context.Context, refs []string) ([]string, error) {
	nodes, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiErr("list nodes", err)
	}
	have := map[string]bool{}
	for _, n := range nodes.Items {
		for _, im := range n.Status.Images {
			for _, name := range im.Names {
				have[normalizeRef(name)] = true
			}
		}
	}
	var missing []string
	for _, r := range refs {
		if !have[normalizeRef(r)] {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// normalizeRef spells an image reference the way container runtimes
// report it: with a registry, and library/ for Docker Hub's own images.
func normalizeRef(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if !ok {
		return "docker.io/library/" + ref
	}
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io/" + ref
	}
	return ref
}

// apiErr maps a Kubernetes API error onto errdefs.
func apiErr(what string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube: %s: %v: %w", what, err, errdefs.ErrNotFound)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("kube: %s: %v: %w", what, err, errdefs.ErrAlreadyExists)
	case apierrors.IsConflict(err):
		return fmt.Errorf("kube: %s: %v: %w", what, err, errdefs.ErrConflict)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return fmt.Errorf("kube: %s: %v: %w", what, err, errdefs.ErrInvalidArgument)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("kube: %s: %v: %w", what, err, errdefs.ErrFailedPrecondition)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return fmt.Errorf("kube: %s: %w", what, err)
	}
	return fmt.Errorf("kube: %s: %v: %w", what, err, errdefs.ErrUnavailable)
}

// podName is the Pod of sandbox id.
func podName(id string) string { return objectName("genesis-" + id) }

// objectName spells a container name as a Kubernetes object name:
// sandbox ids carry underscores, which object names may not.
func objectName(name string) string { return strings.ReplaceAll(strings.ToLower(name), "_", "-") }

// token is the agent token of a Pod in generation gen: HMAC-SHA256 of its
// name (generation 0) or of its name, "#" and the generation. Only the
// service's replicas, which share the key, can make it; the Pod is given
// its SHA-256 only.
func (d *Driver) token(pod string, gen int64) []byte {
	m := hmac.New(sha256.New, d.cfg.TokenKey)
	io.WriteString(m, pod)
	if gen > 0 {
		io.WriteString(m, "#"+strconv.FormatInt(gen, 10))
	}
	return m.Sum(nil)
}

// tokenGeneration reads the generation of a Pod's agent token.
func tokenGeneration(p *corev1.Pod) (int64, error) {
	v, ok := p.Annotations[tokenAnnotation]
	if !ok {
		return 0, nil
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil || g < 0 {
		return 0, fmt.Errorf("kube: pod %s: annotation %s is %q, not a generation: %w", p.Name, tokenAnnotation, v, errdefs.ErrInternal)
	}
	return g, nil
}

// NextAgentToken is the generation after the Pod's current one, and the
// SHA-256 of its token.
func (d *Driver) NextAgentToken(ctx context.Context, id string) (driver.AgentToken, error) {
	name := podName(id)
	p, err := d.pods().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return driver.AgentToken{}, apiErr("get pod "+name, err)
	}
	gen, err := tokenGeneration(p)
	if err != nil {
		return driver.AgentToken{}, err
	}
	return driver.AgentToken{Generation: gen + 1, SHA256: sha256.Sum256(d.token(name, gen+1))}, nil
}

// UseAgentToken records next's generation on the Pod: every dialer (of
// every replica) reads it when it connects.
func (d *Driver) UseAgentToken(ctx context.Context, id string, next driver.AgentToken) error {
	name := podName(id)
	if next.SHA256 != sha256.Sum256(d.token(name, next.Generation)) {
		return errdefs.Invalid("kube: pod %s: not the token of generation %d", name, next.Generation)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{tokenAnnotation: strconv.FormatInt(next.Generation, 10)}}})
	if err != nil {
		return err
	}
	if _, err := d.pods().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return apiErr("record the agent token of pod "+name, err)
	}
	return nil
}

// CreateSandbox makes the sandbox's Pod: the agent installed by an init
// container into an emptyDir and run from it as PID 1 on TCP, the
// workspace an emptyDir (capped at DiskMB).
func (d *Driver) CreateSandbox(ctx context.Context, spec driver.SandboxSpec) (string, error) {
	c := spec.Container
	c.Name = podName(spec.ID)
	c.Cmd = []string{driver.AgentBinary, "serve", "--listen", ":" + strconv.Itoa(d.cfg.AgentPort)}
	// The agent is given the SHA-256 of its token, never the token: the
	// sandbox's processes can read the agent's environment
	// (/proc/1/environ), and what they find there opens nothing.
	sum := sha256.Sum256(d.token(c.Name, 0))
	c.Env = append(slices.Clone(c.Env), agentproto.TokenSHA256Env+"="+hex.EncodeToString(sum[:]))
	pod, err := d.pod(c)
	if err != nil {
		return "", err
	}
	uid, gid := int64(spec.UID), int64(spec.GID)
	ws := &corev1.EmptyDirVolumeSource{}
	if spec.DiskMB > 0 {
		ws.SizeLimit = resource.NewQuantity(spec.DiskMB<<20, resource.BinarySI)
	}
	ps := &pod.Spec
	ps.Volumes = append(ps.Volumes,
		corev1.Volume{Name: agentVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: ws}})
	// The workspace and the volumes belong to the sandbox's user (a
	// volume's files are given to its group once, when its root is not
	// yet: a large volume is not walked at every mount).
	ps.SecurityContext.FSGroup = &gid
	onMismatch := corev1.FSGroupChangeOnRootMismatch
	ps.SecurityContext.FSGroupChangePolicy = &onMismatch
	sc := &ps.Containers[0]
	ps.InitContainers = []corev1.Container{{
		Name: installContainer, Image: d.cfg.AgentImage, ImagePullPolicy: d.cfg.PullPolicy,
		Command:         []string{agentImageBinary, "install", driver.AgentMountDir},
		VolumeMounts:    []corev1.VolumeMount{{Name: agentVolume, MountPath: driver.AgentMountDir}},
		SecurityContext: hardened(&uid, &gid, true, nil),
		Resources:       installResources(sc.Resources.Requests),
	}}
	sc.VolumeMounts = append(sc.VolumeMounts,
		corev1.VolumeMount{Name: agentVolume, MountPath: driver.AgentMountDir, ReadOnly: true},
		corev1.VolumeMount{Name: workspaceVolume, MountPath: "/workspace"})
	sc.Ports = []corev1.ContainerPort{{Name: "agent", ContainerPort: int32(d.cfg.AgentPort), Protocol: corev1.ProtocolTCP}}
	return d.create(ctx, pod)
}

// RemoveSandbox removes the sandbox's Pod (its own volumes go with it). A
// Pod that mounts named volumes' claims is stopped first and removed only
// once its container has ended: the caller releases the volumes' holds
// when this returns, and the next writer's processes must not overlap
// this Pod's (removed at once, a Pod's containers are killed by the
// kubelet some time after its object is gone).
func (d *Driver) RemoveSandbox(ctx context.Context, id, containerID string) error {
	if containerID == "" {
		containerID = podName(id)
	}
	name := objectName(containerID)
	p, err := d.pods().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return apiErr("get pod "+name, err)
	case mountsClaims(p):
		if err := d.Stop(ctx, name, time.Second); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	return d.Remove(ctx, name)
}

// mountsClaims reports whether p mounts a PersistentVolumeClaim.
func mountsClaims(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil })
}

// AgentAddress names the agent's Pod and port.
func (d *Driver) AgentAddress(id string) string {
	return fmt.Sprintf("pod %s/%s port %d", d.cfg.Namespace, podName(id), d.cfg.AgentPort)
}

// AgentDialer dials the agent on its Pod's address and presents its token
// of the Pod's current generation. Each dial reads the Pod, so a token
// another replica moved on is followed at the next connection.
func (d *Driver) AgentDialer(id string) driver.Dialer {
	name := podName(id)
	nd := &net.Dialer{Timeout: 5 * time.Second}
	port := strconv.Itoa(d.cfg.AgentPort)
	return func(ctx context.Context) (net.Conn, error) {
		ip, gen, err := d.podAddr(ctx, name)
		if err != nil {
			return nil, err
		}
		c, err := nd.DialContext(ctx, "tcp", net.JoinHostPort(ip, port))
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetWriteDeadline(dl)
		}
		preface := []byte(agentproto.TokenPreface + hex.EncodeToString(d.token(name, gen)) + "\n")
		if _, err := c.Write(preface); err != nil {
			c.Close()
			return nil, err
		}
		_ = c.SetWriteDeadline(time.Time{})
		return c, nil
	}
}

// podAddr is the Pod's address and the generation of its agent's token:
// read, and if the Pod has no address yet, watched for until ctx ends.
func (d *Driver) podAddr(ctx context.Context, name string) (string, int64, error) {
	// A Pod that is scheduled gets its address within seconds; nobody
	// waits for one for ever (a dial holds its agent client's dialling).
	ctx, cancel := context.WithTimeout(ctx, addressWait)
	defer cancel()
	p, err := d.pods().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", 0, apiErr("get pod "+name, err)
	}
	for p.Status.PodIP == "" {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return "", 0, fmt.Errorf("kube: pod %s ended without an address: %w", name, errdefs.ErrUnavailable)
		}
		if len(p.Spec.SchedulingGates) > 0 {
			return "", 0, fmt.Errorf("kube: pod %s was never started: %w", name, errdefs.ErrUnavailable)
		}
		if p, err = d.nextVersion(ctx, p); err != nil {
			return "", 0, err
		}
	}
	gen, err := tokenGeneration(p)
	return p.Status.PodIP, gen, err
}

// nextVersion waits for the next version of Pod p: the watch's next event
// or, when the watch ends first, a fresh read.
func (d *Driver) nextVersion(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	w, err := d.pods().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", p.Name).String(),
		ResourceVersion: p.ResourceVersion})
	if err != nil {
		return nil, apiErr("watch pod "+p.Name, err)
	}
	next, err := nextPod(ctx, w, p)
	w.Stop()
	if err != nil || next != nil {
		return next, err
	}
	if next, err = d.pods().Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
		return nil, apiErr("get pod "+p.Name, err)
	}
	return next, nil
}

// nextPod waits for the next change of the watched Pod.
func nextPod(ctx context.Context, w watch.Interface, last *corev1.Pod) (*corev1.Pod, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kube: pod %s has no address yet: %w", last.Name, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil // the watch ended: read again
			}
			switch ev.Type {
			case watch.Error:
				return nil, nil
			case watch.Deleted:
				return nil, fmt.Errorf("kube: pod %s is gone: %w", last.Name, errdefs.ErrNotFound)
			case watch.Added, watch.Modified:
				if p, ok := ev.Object.(*corev1.Pod); ok {
					return p, nil
				}
			}
		}
	}
}
