#!/bin/sh
# Install faceweave itself from /src into the venv install-deps.sh made,
# without its dependencies (they are there already).
#   install-faceweave.sh            into /opt/faceweave
#   install-faceweave.sh /app       into /app/opt/faceweave only: the runtime
#                                   stage copies that over the dependencies'
#                                   venv, so a source change copies faceweave alone
# (setuptools and wheel for building faceweave come from /wheels into pip's
# isolated build environment.)
set -eu
pip="/opt/faceweave/bin/python -m pip --no-cache-dir --disable-pip-version-check"
export PIP_CONFIG_FILE=/dev/null
if [ $# -eq 0 ]; then
  $pip install --no-deps --find-links /wheels /src
  exit 0
fi
root=$1
$pip install --no-deps --find-links /wheels --prefix "$root/opt/faceweave" /src
test -x "$root/opt/faceweave/bin/faceweave" && test -d "$root/opt/faceweave/lib/python3.11/site-packages/faceweave"
# bytecode now (the root filesystem is read-only at run time), named as the runtime will see it
/opt/faceweave/bin/python -m compileall -q -j 0 --invalidation-mode checked-hash -s "$root" -p / "$root/opt/faceweave/lib" >/dev/null
