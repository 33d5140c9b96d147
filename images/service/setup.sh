# Setup of the service's own image (not a profile image). Runs as root with
# /bin/sh inside the freshly bootstrapped root filesystem (chroot), set -eu.

# The data dir the image's default command serves from: a volume (or a bind
# mount of the Docker host) is mounted here.
mkdir -p /var/lib/genesis /etc/genesis
chmod 0755 /var/lib/genesis /etc/genesis

printf 'LANG=C.UTF-8\n' >/etc/default/locale
printf 'genesis\n' >/etc/hostname
: >/etc/resolv.conf

# Keep the image small (copyright notices are kept).
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/partial
find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
rm -rf /usr/share/man/* /usr/share/info/* /usr/share/lintian/* /usr/share/linda/*
rm -rf /var/cache/debconf/*-old /var/lib/dpkg/*-old
rm -f /var/log/bootstrap.log /var/log/dpkg.log /var/log/alternatives.log
rm -rf /var/log/apt/* /root/.cache /tmp/* /var/tmp/*
