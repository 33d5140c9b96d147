# Common setup for every Genesis profile image. Runs as root with /bin/sh
# inside the freshly bootstrapped root filesystem (chroot), with set -eu.
# Changing this file changes the hash, and so the tag, of every image.

# The unprivileged user sandboxes run as.
groupadd --gid 1000 sandbox
useradd --uid 1000 --gid 1000 --home-dir /home/sandbox --create-home \
	--shell /bin/bash --comment "Genesis sandbox" sandbox
chown 1000:1000 /home/sandbox
chmod 0755 /home/sandbox

# The working directory of every sandbox.
mkdir -p /workspace
chown 1000:1000 /workspace
chmod 0755 /workspace

mkdir -p /tmp
chmod 1777 /tmp

# Empty mount points for the agent binary and its per-sandbox run directory.
mkdir -p /.genesis /run/genesis
chmod 0755 /.genesis /run/genesis

# Locale: C.UTF-8 is built into glibc; no locales package needed.
printf 'LANG=C.UTF-8\n' >/etc/default/locale

# Nothing of the build host should stay in the image; Docker provides these.
printf 'sandbox\n' >/etc/hostname
: >/etc/resolv.conf

# Keep the image small: package caches and lists, documentation (copyright
# notices are kept), man and info pages, logs of the bootstrap.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/partial
find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
rm -rf /usr/share/man/* /usr/share/info/* /usr/share/lintian/* /usr/share/linda/*
rm -rf /var/cache/debconf/*-old /var/lib/dpkg/*-old
rm -f /var/log/bootstrap.log /var/log/dpkg.log /var/log/alternatives.log
rm -rf /var/log/apt/*
rm -rf /root/.cache /tmp/* /var/tmp/*
