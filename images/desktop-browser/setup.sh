# The display stack and the browser are started by the profile's services;
# nothing here runs at build time but version records. (Chromium's wrapper
# cannot run here: it reads /proc/cpuinfo, which the build chroot lacks.)
chmod 0755 /opt/genesis/desktop/display.sh /opt/genesis/desktop/wm.sh /opt/genesis/desktop/browser.sh
chmod -R a+rX /opt/genesis/desktop
mkdir -p /etc/genesis/versions
dpkg-query -W -f '${Version}' tigervnc-standalone-server | sed 's/-[^-]*$//' >/etc/genesis/versions/tigervnc
dpkg-query -W -f '${Version}' chromium | sed 's/-[^-]*$//' >/etc/genesis/versions/chromium
test -s /etc/genesis/versions/chromium
