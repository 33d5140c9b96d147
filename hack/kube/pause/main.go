// Command pause is the pod sandbox's process of the development Kubernetes
// control plane (hack/kube/up.sh builds it into a local image, so no
// registry is needed): it waits until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
