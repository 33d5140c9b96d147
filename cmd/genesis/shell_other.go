//go:build !unix

package main

import "os"

// notifyResize does nothing where the system has no window-size signal
// (Windows): the size given when the terminal opens stays.
func notifyResize(chan<- os.Signal) {}
