//go:build kube

package kube_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"genesis.dev/sandbox/internal/driver/drivertest"
	"genesis.dev/sandbox/internal/driver/kube"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

// These tests run against the control plane of hack/kube (make test-kube):
// GENESIS_KUBECONFIG names its admin kubeconfig.

var (
	imagesOnce   sync.Once
	busybox      string
	agentImage   string
	imagesFailed string
)

// plane returns a driver on the plane, with the test busybox image and the
// agent image of this tree imported into its containerd.
func plane(t *testing.T) *kube.Driver {
	t.Helper()
	kc := os.Getenv("GENESIS_KUBECONFIG")
	if kc == "" {
		t.Skip("GENESIS_KUBECONFIG is not set: run make test-kube")
	}
	imagesOnce.Do(func() {
		busybox = testenv.BusyboxImage(t, testenv.Docker(t))
		sock := os.Getenv("GENESIS_KUBE_CONTAINERD")
		imp := exec.Command("sh", "-c", "docker save "+busybox+" | ctr -a "+sock+" -n k8s.io images import -")
		if out, err := imp.CombinedOutput(); err != nil {
			imagesFailed = "importing " + busybox + ": " + err.Error() + ": " + string(out)
			return
		}
		out, err := exec.Command("../../../hack/kube/agent-image.sh").Output()
		if err != nil {
			imagesFailed = "agent image: " + err.Error()
			return
		}
		agentImage = strings.TrimSpace(string(out))
		if err := ensureNamespace(kc); err != nil {
			imagesFailed = err.Error()
			return
		}
		// The kubelet reports a node's images in its status some seconds
		// after they arrive; the driver's image check reads them there.
		d := driver(t, kc)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, im := range []string{busybox, agentImage} {
			for {
				ok, err := d.ImagePresent(ctx, im)
				if ok {
					break
				}
				if ctx.Err() != nil {
					imagesFailed = fmt.Sprintf("the node never reported image %s: %v", im, err)
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
		}
	})
	if imagesFailed != "" {
		t.Fatal(imagesFailed)
	}
	return driver(t, kc)
}

func driver(t *testing.T, kc string) *kube.Driver {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	d, err := kube.New(kube.Config{
		Kubeconfig: kc, Namespace: testNamespace, AgentImage: agentImage, PullPolicy: "Never", TokenKey: key,
		RuntimeClasses: map[sandbox.Runtime]string{sandbox.RuntimeRunc: "runc", sandbox.RuntimeRunsc: "gvisor"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// testNamespace holds this package's Pods, apart from those of test/kube,
// whose tests clear the Pods of their namespace and run at the same time.
const testNamespace = "genesis-driver-test"

// ensureNamespace makes testNamespace if it is missing.
func ensureNamespace(kc string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d := plane(t)
		return drivertest.Harness{
			Driver:   d,
			Image:    busybox,
			Runtimes: []sandbox.Runtime{sandbox.RuntimeRunc},
			Cmd:      []string{"/bin/busybox", "sleep", "300"},
			Labels:   map[string]string{"dev.genesis.test": "conformance"},
			NoPids:   true,
		}
	})
}

// TestProbe: runc's smoke pod runs and reports the host's kernel; gVisor's
// RuntimeClass exists, and its verdict is whatever really happened.
func TestProbe(t *testing.T) {
	d := plane(t)
	res, err := d.Probe(context.Background())
	if err != nil || !res.Healthy {
		t.Fatalf("Probe = %+v, %v", res, err)
	}
	host, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	runc, ok := res.Runtime(sandbox.RuntimeRunc)
	if !ok || !runc.Healthy || runc.Version != strings.TrimSpace(string(host)) {
		t.Errorf("runc = %+v; want healthy with the host's kernel %s", runc, host)
	}
	gv, ok := res.Runtime(sandbox.RuntimeRunsc)
	if !ok {
		t.Fatalf("no runsc entry in %+v", res.Runtimes)
	}
	t.Logf("runsc: %+v", gv)
	if gv.Healthy && gv.Version == runc.Version {
		t.Errorf("runsc healthy with the host's kernel %s: not gVisor", gv.Version)
	}
}
