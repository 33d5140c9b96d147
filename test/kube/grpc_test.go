//go:build kube

package kube

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
)

// TestGRPCOnPlane: the service with driver kubernetes answers the
// official grpc-go client in cleartext HTTP/2 (h2c) on the port that
// also serves its HTTP API — a port deploy/kubernetes's Service forwards
// (checked below against the manifest: each Service port targets the
// container port its flag listens on and declares kubernetes.io/h2c). Over
// it: health, then create → exec → delete of a sandbox that is a Pod of
// the plane (its kernel is the node's; its Pod goes with the delete).
func TestGRPCOnPlane(t *testing.T) {
	checkServicePortH2C(t)
	clearManagedPods(t)
	s := startService(t, t.TempDir(), "")
	addr := strings.TrimPrefix(s.url, "http://")
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	hres, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hres.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health: %v, %v; want SERVING", hres, err)
	}
	// The same port still serves HTTP/1.1 (startService waited on
	// /readyz there); a call without the key is refused by gRPC's code.
	const sandboxSvc, execSvc = "/genesis.sandbox.v1.SandboxService/", "/genesis.sandbox.v1.ExecService/"
	if err := cc.Invoke(ctx, sandboxSvc+"ListProfiles", &sandboxv1.ListProfilesRequest{}, &sandboxv1.ListProfilesResponse{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a call without a key: %v; want Unauthenticated", err)
	}
	kctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.key)

	var sb sandboxv1.Sandbox
	if err := cc.Invoke(kctx, sandboxSvc+"CreateSandbox", &sandboxv1.CreateSandboxRequest{Profile: "code-python-basic", Runtime: "runc", RiskLevel: "low"}, &sb); err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	if sb.State != "ready" || sb.Runtime != "runc" {
		t.Fatalf("created %v", &sb)
	}
	cs := clientset(t)
	pod := "genesis-" + strings.ReplaceAll(sb.Id, "_", "-")
	if _, err := cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{}); err != nil {
		t.Fatalf("the sandbox's Pod %s: %v", pod, err)
	}
	host, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	var res sandboxv1.ExecResult
	if err := cc.Invoke(kctx, execSvc+"Exec", &sandboxv1.ExecRequest{SandboxId: sb.Id, Script: "uname -r; echo oops >&2; exit 3"}, &res); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if strings.TrimSpace(string(res.Stdout)) != strings.TrimSpace(string(host)) || string(res.Stderr) != "oops\n" || res.ExitCode != 3 {
		t.Fatalf("Exec in the Pod: %v; want the node's kernel %q, oops on stderr, exit 3", &res, host)
	}
	if err := cc.Invoke(kctx, sandboxSvc+"DeleteSandbox", &sandboxv1.DeleteSandboxRequest{Id: sb.Id}, &sandboxv1.DeleteSandboxResponse{}); err != nil {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	var got sandboxv1.Sandbox
	err = cc.Invoke(kctx, sandboxSvc+"GetSandbox", &sandboxv1.GetSandboxRequest{Id: sb.Id}, &got)
	if (err == nil && got.State != "destroyed") || (err != nil && status.Code(err) != codes.NotFound) {
		t.Fatalf("after DeleteSandbox: %v, %v", &got, err)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{}); err == nil {
		noManagedPods(t) // its removal may still be under way
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// checkServicePortH2C fails t unless deploy/kubernetes's Service forwards
// one port, declared kubernetes.io/h2c, to the Deployment's container port
// that the service's --addr listens on.
func checkServicePortH2C(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/kubernetes/50-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	var svc *corev1.Service
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta metav1.TypeMeta
		if err := k8syaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		var into any
		switch meta.Kind {
		case "Deployment":
			dep = &appsv1.Deployment{}
			into = dep
		case "Service":
			svc = &corev1.Service{}
			into = svc
		default:
			continue
		}
		if err := k8syaml.Unmarshal([]byte(doc), into); err != nil {
			t.Fatal(err)
		}
	}
	if dep == nil || svc == nil || len(svc.Spec.Ports) != 2 || len(dep.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("deploy/kubernetes/50-deployment.yaml: want a Deployment and a Service of two ports (http, grpc)")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	// Each Service port declares h2c and targets the container port its
	// flag listens on: http the API's (--addr), grpc the native gRPC
	// listener's (--grpc-addr).
	for _, p := range svc.Spec.Ports {
		flag := map[string]string{"http": "--addr", "grpc": "--grpc-addr"}[p.Name]
		var container *corev1.ContainerPort
		for i := range c.Ports {
			if (p.TargetPort.Type == intstr.String && c.Ports[i].Name == p.TargetPort.StrVal) || (p.TargetPort.Type == intstr.Int && c.Ports[i].ContainerPort == p.TargetPort.IntVal) {
				container = &c.Ports[i]
			}
		}
		if flag == "" || p.AppProtocol == nil || *p.AppProtocol != "kubernetes.io/h2c" || container == nil ||
			!strings.Contains(strings.Join(c.Args, " "), flag+" 0.0.0.0:"+strconv.Itoa(int(container.ContainerPort))) {
			t.Fatalf("the Service's port %+v must declare kubernetes.io/h2c and target the port the service listens on (container ports %+v, args %v)", p, c.Ports, c.Args)
		}
	}
}
