#!/bin/sh
# Last step of a build stage: no pip or wheel in the runtime
# environment, no caches, and bytecode compiled now (the root filesystem is
# read-only at run time).  setuptools stays: face_recognition_models imports
# its pkg_resources.
set -eu
# jax and jaxlib (350 MB) come with mediapipe for its model-maker tools; faceweave never imports them
/opt/faceweave/bin/python -m pip --no-cache-dir uninstall -y -q jax jaxlib
/opt/faceweave/bin/python -m pip --no-cache-dir uninstall -y -q pip wheel
/opt/faceweave/bin/python -m compileall -q -j 0 /opt/faceweave/lib >/dev/null || true
rm -rf /root/.cache
