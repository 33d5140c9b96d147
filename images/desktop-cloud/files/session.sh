#!/bin/sh
# The XFCE session of a desktop-cloud sandbox, started once the display
# service's X server has made its socket (both are profile services,
# started together). The session bus is the session's own (dbus-launch);
# there is no system bus, no power or screen-lock manager to start.
set -eu
n="${DISPLAY#:}"
i=0
while [ ! -S "/tmp/.X11-unix/X$n" ] && [ "$i" -lt 500 ]; do
	sleep 0.02
	i=$((i + 1))
done
export XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$HOME/.config}" XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 0700 "$XDG_RUNTIME_DIR"
# The panel's default layout, so that its first start does not stop at the
# "default or empty panel?" question.
cfg="$XDG_CONFIG_HOME/xfce4/xfconf/xfce-perchannel-xml"
if [ ! -e "$cfg/xfce4-panel.xml" ] && [ -e /etc/xdg/xfce4/panel/default.xml ]; then
	mkdir -p "$cfg"
	cp /etc/xdg/xfce4/panel/default.xml "$cfg/xfce4-panel.xml"
fi
exec dbus-launch --exit-with-session xfce4-session
