#!/bin/sh
# The runtime stage's system part, on any Debian/Ubuntu base: the shared
# libraries OpenCV (from mediapipe) needs, a non-root user (uid and gid 10001),
# and the writable folders (/data storage, /cache home and caches, /models).
set -eu
need=""
for pkg in libgl1 libglib2.0-0; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"
done
if [ -n "$need" ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need
  rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
fi
if ! getent group faceweave >/dev/null; then
  if command -v groupadd >/dev/null; then groupadd --system --gid 10001 faceweave
  else echo "faceweave:x:10001:" >> /etc/group; fi
fi
if ! getent passwd faceweave >/dev/null; then
  if command -v useradd >/dev/null; then
    useradd --system --uid 10001 --gid 10001 --home-dir /cache --no-create-home --shell /usr/sbin/nologin faceweave
  else echo "faceweave:x:10001:10001:faceweave:/cache:/usr/sbin/nologin" >> /etc/passwd; fi
fi
mkdir -p /data /cache /models
chown 10001:10001 /data /cache /models
