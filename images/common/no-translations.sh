# Message translations (/usr/share/locale/<language>): the images run in
# C.UTF-8, where programs speak English and never read them. About 45 MB
# in an image with git and the other everyday tools. locale.alias stays.
find /usr/share/locale -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
