# Quick start:  make run   (swap on the default images)   |   make test
VENV ?= .venv
PY := $(VENV)/bin/python
SHARED ?= ../shared/data/faces
SOURCE ?= $(SHARED)/single/biden2.jpg
TARGET ?= $(SHARED)/single/astronaut_eileen_collins.png
OUTPUT ?= out/swap.png

.PHONY: setup run test bench bench-watermark evaluate clean

$(VENV)/.installed: pyproject.toml
	python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,c2pa]'
	# the tests use the ONNX detector inside the nudenet wheel (AGPL, not a
	# default dependency); --no-deps keeps its second OpenCV package out
	$(PY) -m pip install -q --no-deps nudenet==3.4.2
	touch $@

setup: $(VENV)/.installed

run: $(VENV)/.installed
	$(VENV)/bin/faceweave swap -s $(SOURCE) -t $(TARGET) -o $(OUTPUT)

test: $(VENV)/.installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	$(PY) benchmarks/image_swap.py

bench-watermark: $(VENV)/.installed
	$(PY) benchmarks/watermark_robustness.py --out report/watermark.json

evaluate: $(VENV)/.installed
	$(VENV)/bin/faceweave evaluate $(SHARED) --out report/

clean:
	rm -rf $(VENV) out report
