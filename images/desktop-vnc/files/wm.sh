#!/bin/sh
# The window manager of a desktop sandbox: openbox, started once the
# display service's X server has made its socket (both are profile
# services, started together).
set -eu
n="${DISPLAY#:}"
i=0
while [ ! -S "/tmp/.X11-unix/X$n" ] && [ "$i" -lt 500 ]; do
	sleep 0.02
	i=$((i + 1))
done
exec openbox
