#!/bin/sh
# Install faceweave itself from /src into the venv install-deps.sh made,
# without its dependencies (they are there already).
#   install-faceweave.sh            into /opt/faceweave
#   install-faceweave.sh /app       into /app/opt/faceweave only: the runtime
#                                   stage copies that over the dependencies'
#                                   venv, so a source change copies faceweave alone
# (setuptools and wheel for building faceweave come from /wheels into pip's
# isolated build environment.)
#
# pip compiles faceweave's kernels (faceweave/kernels/_raster.c, _pixels.c) where the
# stage has a C compiler and Python's headers; where not, setuptools skips
# them (they are optional) and their NumPy formulations run, slower.  This
# script says which; with REQUIRE_KERNELS=1 a skipped build fails it.
set -eu
pip="/opt/faceweave/bin/python -m pip --no-cache-dir --disable-pip-version-check"
export PIP_CONFIG_FILE=/dev/null

check_kernels() {  # check_kernels [SITE_PACKAGES]: faceweave.kernels.compiled(), as the runtime will import it
  if PYTHONPATH=${1:-} PYTHONDONTWRITEBYTECODE=1 /opt/faceweave/bin/python -c \
      'import sys, faceweave.kernels as k; sys.exit(not k.compiled())'; then
    echo "faceweave's compiled kernels: built"
  elif [ "${REQUIRE_KERNELS:-0}" = 1 ]; then
    echo "faceweave's compiled kernels were not built (no C compiler or no Python headers in this stage?) and REQUIRE_KERNELS=1" >&2
    exit 1
  else
    echo "faceweave's compiled kernels: not built (no C compiler or Python headers here); their NumPy formulations run" >&2
  fi
}

if [ $# -eq 0 ]; then
  $pip install --no-deps --find-links /wheels /src
  check_kernels
  exit 0
fi
root=$1
$pip install --no-deps --find-links /wheels --prefix "$root/opt/faceweave" /src
site="$root/opt/faceweave/lib/python3.11/site-packages"
test -x "$root/opt/faceweave/bin/faceweave" && test -d "$site/faceweave"
check_kernels "$site"
# bytecode now (the root filesystem is read-only at run time), named as the runtime will see it
/opt/faceweave/bin/python -m compileall -q -j 0 --invalidation-mode checked-hash -s "$root" -p / "$root/opt/faceweave/lib" >/dev/null
