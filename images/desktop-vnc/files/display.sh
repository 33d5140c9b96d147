#!/bin/sh
# The display service of a desktop sandbox: Xtigervnc is the X server and
# the VNC server in one process (no screen scraping). Both listen on
# loopback only: the VNC server with -localhost on 127.0.0.1:5900+N, the X
# server on TCP 6000+N (the sandbox has no network but loopback; the
# service reaches both through the agent's port dial) and on its Unix
# socket for programs inside. No VNC password: the service is the only
# client, and it enforces who may send input.
set -eu
display="${GENESIS_DISPLAY:-:1}"
n="${display#:}"
geometry="${GENESIS_DISPLAY_SIZE:-1280x800}"
mkdir -p /tmp/.X11-unix
# A display that crashed leaves its lock and socket behind; the restart
# would refuse the display number.
rm -f "/tmp/.X$n-lock" "/tmp/.X11-unix/X$n"
exec Xtigervnc "$display" -geometry "$geometry" -depth 24 \
	-rfbport "$((5900 + n))" -localhost -interface 127.0.0.1 \
	-SecurityTypes None -AlwaysShared -AcceptSetDesktopSize=0 \
	-listen tcp -ac \
	-desktop genesis
