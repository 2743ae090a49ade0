# Quick start:  make run   (the service and web page on http://127.0.0.1:8000)   |   make test
VENV ?= .venv
PY := $(VENV)/bin/python
SHARED ?= ../shared/data/faces
SOURCE ?= $(SHARED)/single/biden2.jpg
TARGET ?= $(SHARED)/single/astronaut_eileen_collins.png
OUTPUT ?= out/swap.png

# Debian packages some tests drive (the web page in headless Chromium, the
# distributed service on a real redis-server and PostgreSQL; the container
# image and its tests: podman with runc, and mmdebstrap for a Debian-made base;
# prometheus and promtool for the monitoring rules and the scrape test; coturn
# for the live sessions' TURN tests; gcc, which builds faceweave's compiled
# kernels when it is installed, before the venv is made);
# installed when missing and when running as root with apt-get, otherwise
# those tests skip with the reason
SYSTEM_PACKAGES ?= gcc chromium redis-server postgresql podman runc mmdebstrap prometheus coturn

.PHONY: system-deps setup lock run swap lint test bench bench-service bench-watermark evaluate image clean

# the extras development and CI install; their exact versions (and every
# package under them) are requirements.lock's, used as pip constraints
DEV_EXTRAS := test,lint,c2pa,distributed

$(VENV)/.installed: pyproject.toml requirements.lock faceweave/kernels/_raster.c faceweave/kernels/_pixels.c | system-deps
	python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock -e '.[$(DEV_EXTRAS)]'
	# the tests use the ONNX detector inside the nudenet wheel (AGPL, not a
	# default dependency); --no-deps keeps its second OpenCV package out
	$(PY) -m pip install -q --no-deps -c requirements.lock nudenet
	touch $@

# requirements.lock anew: the newest versions pyproject.toml's ranges allow,
# resolved in a scratch virtual environment (run it, then make test)
lock:
	rm -rf .lock-venv && (python3.11 -m venv .lock-venv || python3 -m venv .lock-venv)
	.lock-venv/bin/python -m pip install -q --upgrade pip
	.lock-venv/bin/python -m pip install -q -e '.[$(DEV_EXTRAS)]'
	.lock-venv/bin/python -m pip install -q --no-deps nudenet
	{ sed -n '1,/^# Refresh with/p' requirements.lock; .lock-venv/bin/python -m pip freeze --exclude-editable; } > requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf .lock-venv

setup: $(VENV)/.installed

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	    || echo "could not install$$missing: the tests that need them will skip"; \
	else echo "missing$$missing (not root or no apt-get): the tests that need them will skip"; fi

# the service on embedded defaults: SQLite jobs, in-process workers, local
# storage, web page and API on http://127.0.0.1:8000 (Ctrl-C stops it)
run: $(VENV)/.installed
	$(VENV)/bin/faceweave serve

# one swap from the command line: make swap SOURCE=me.jpg TARGET=photo.jpg OUTPUT=out.png
swap: $(VENV)/.installed
	$(VENV)/bin/faceweave swap -s $(SOURCE) -t $(TARGET) -o $(OUTPUT)

# the gates: ruff (lint rules and formatting) and mypy, configured in pyproject.toml
LINTED := faceweave tests benchmarks tools
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

test: $(VENV)/.installed system-deps lint
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	$(PY) benchmarks/image_swap.py

bench-service: $(VENV)/.installed
	$(PY) benchmarks/service_load.py

bench-watermark: $(VENV)/.installed
	$(PY) benchmarks/watermark_robustness.py --out report/watermark.json

evaluate: $(VENV)/.installed
	$(VENV)/bin/faceweave evaluate $(SHARED) --out report/

# the CPU container image localhost/faceweave:cpu (deploy/Containerfile, docs/DEPLOY.md), built
# offline from a Debian-made base and a host wheelhouse (both cached under deploy/)
image: $(VENV)/.installed system-deps
	$(PY) tools/container_image.py build

clean:
	rm -rf $(VENV) out report
