#!/bin/sh
# Replace the CPU onnxruntime in /opt/faceweave by an accelerator's build
# (both install the same `onnxruntime` module, so only one may be present):
#   swap-onnxruntime.sh onnxruntime-gpu[cuda,cudnn]==1.31.1 nvidia-cublas~=13.0 ...
set -eu
pip="/opt/faceweave/bin/python -m pip --no-cache-dir --disable-pip-version-check"
export PIP_CONFIG_FILE=/dev/null
$pip uninstall -y onnxruntime
$pip install --find-links /wheels "$@"
/opt/faceweave/bin/python -c 'import onnxruntime as ort; print("onnxruntime", ort.__version__, ort.get_available_providers())'
