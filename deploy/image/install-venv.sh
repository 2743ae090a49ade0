#!/bin/sh
# Build faceweave's virtual environment at /opt/faceweave from the source in
# /src, with pip reading /wheels first (offline with PIP_NO_INDEX=1).
#   install-venv.sh PYTHON EXTRA_PACKAGES...
# Runs in a build stage only; the runtime stage copies /opt/faceweave.
set -eu
python=${1:-python3}
shift || true
if ! "$python" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  echo "faceweave needs Python 3.11 with its venv module in the base image; '$python' is $("$python" --version 2>&1 || echo missing)" >&2
  exit 1
fi
"$python" -m venv /opt/faceweave
pip="/opt/faceweave/bin/python -m pip --no-cache-dir --disable-pip-version-check"
# a base image's own pip.conf or constraints do not apply to this build
export PIP_CONFIG_FILE=/dev/null
# (setuptools and wheel for building faceweave come from /wheels into pip's isolated build environment)
# face_recognition_models imports pkg_resources, which setuptools 81 dropped
$pip install --find-links /wheels "/src[distributed,s3]" "setuptools>=68,<81" "$@"
