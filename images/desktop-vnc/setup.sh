# The display stack is started by the profile's services (display.sh, the
# window manager); nothing here runs at build time but version records.
chmod 0755 /opt/genesis/desktop/display.sh /opt/genesis/desktop/wm.sh
chmod -R a+rX /opt/genesis/desktop
mkdir -p /etc/genesis/versions
dpkg-query -W -f '${Version}' tigervnc-standalone-server | sed 's/-[^-]*$//' >/etc/genesis/versions/tigervnc
dpkg-query -W -f '${Version}' openbox | sed 's/-[^-]*$//' >/etc/genesis/versions/openbox
test -s /etc/genesis/versions/tigervnc
