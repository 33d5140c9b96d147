//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResize delivers the terminal's window-size changes (SIGWINCH) on ch.
func notifyResize(ch chan<- os.Signal) { signal.Notify(ch, syscall.SIGWINCH) }
