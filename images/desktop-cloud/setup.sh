# The display stack is started by the profile's services (display.sh, the
# XFCE session); nothing here runs at build time but version records.
chmod 0755 /opt/genesis/desktop/display.sh /opt/genesis/desktop/session.sh
chmod -R a+rX /opt/genesis/desktop
mkdir -p /etc/genesis/versions
dpkg-query -W -f '${Version}' tigervnc-standalone-server | sed 's/-[^-]*$//' >/etc/genesis/versions/tigervnc
dpkg-query -W -f '${Version}' xfce4-session | sed 's/-[^-]*$//' >/etc/genesis/versions/xfce
test -s /etc/genesis/versions/xfce
