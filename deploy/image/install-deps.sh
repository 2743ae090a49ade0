#!/bin/sh
# Build faceweave's virtual environment at /opt/faceweave with its
# dependencies only, read from /src/pyproject.toml (the source is not copied
# yet, so a source change keeps this layer cached), with pip reading /wheels
# first (offline with PIP_NO_INDEX=1).
#   install-deps.sh PYTHON EXTRA_PACKAGES...
# Runs in a build stage only; install-faceweave.sh installs faceweave itself.
set -eu
python=${1:-python3}
shift || true
if ! "$python" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  echo "faceweave needs Python 3.11 with its venv module in the base image; '$python' is $("$python" --version 2>&1 || echo missing)" >&2
  exit 1
fi
"$python" -m venv /opt/faceweave
# the requirements of faceweave[distributed,s3,webrtc], from pyproject.toml alone (webrtc: aiortc,
# for the live sessions of POST /v1/live)
"$python" - /src/pyproject.toml distributed s3 webrtc >/tmp/requirements.txt <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as handle:
    project = tomllib.load(handle)["project"]
extras = project.get("optional-dependencies", {})
for requirement in [*project["dependencies"], *(r for extra in sys.argv[2:] for r in extras[extra])]:
    print(requirement)
PY
pip="/opt/faceweave/bin/python -m pip --no-cache-dir --disable-pip-version-check"
# a base image's own pip.conf or constraints do not apply to this build
export PIP_CONFIG_FILE=/dev/null
# face_recognition_models imports pkg_resources, which setuptools 81 dropped
$pip install --find-links /wheels -r /tmp/requirements.txt "setuptools>=68,<81" "$@"
rm /tmp/requirements.txt
