# ffrecord — developer and CI entry points. Needs only Go, Python 3 (with venv and pip) and gcc.
#
#   make demo         venv + install, then write and read a dataset (examples/quickstart.py)
#   make test         venv + install with every extra, then go vet, go test and pytest; first
#                     bench-deps (the reference's build), peer-deps (MosaicML Streaming and
#                     datasets without their pins) and browser-deps (chromium, for the viewer)
#   make build        libffrecord.so in python/ffrecord/ for PYTHONPATH=python development
#   make megatron-venv  .venv-megatron: Megatron-Core (Python 3.12, torch) for benchmarks/columns.py
#   make bench        the benchmark suite (make bench-quick: a short run); both first run
#                     bench-deps: g++ and libaio-dev, which the reference's build needs
#                     (apt-get, as root), then the `bench` extra brings pybind11
#   make clean        build outputs (make distclean: the venv too)

PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
EXTRAS ?= test,torch,bench
PYTEST_ARGS ?=
# Tests run against the installed package, never against python/ on the path.
RUN := env -u PYTHONPATH -u FFRECORD_LIBRARY
# Packages go in with uv (itself from PyPI, into the venv): it fetches and unpacks wheels in
# parallel, so the extras' ~6 GB (torch with its CUDA libraries, ray) take a minute or two
# where pip took six; same resolution, same versions. Bytecode is compiled at install, as
# pip does: with PYTHONDONTWRITEBYTECODE set (as on CI), every process would compile torch
# again (6.7 s against 2.7 s to import it).
UV := $(VENV)/bin/uv
PIP_INSTALL := $(RUN) $(UV) pip install --python $(VPY) -q --compile-bytecode

.PHONY: build venv install demo test bench bench-quick bench-deps browser-deps peer-deps megatron-venv clean distclean

build:
	PYTHONWARNINGS=ignore $(PYTHON) setup.py -q build_ext --inplace

$(VPY):
	$(PYTHON) -m venv $(VENV)

$(UV): $(VPY)
	$(VPY) -m pip install --disable-pip-version-check -q "uv>=0.9"

venv: $(UV)

install: venv
	$(PIP_INSTALL) ".[$(EXTRAS)]"

demo: venv
	$(PIP_INSTALL) .
	$(RUN) $(VPY) examples/quickstart.py

test: bench-deps install peer-deps browser-deps
	go vet ./...
	go test ./...
	$(RUN) $(VPY) -m pytest -q -rfEs --durations=15 $(PYTEST_ARGS)

# The reference implementation is built by shared/reference/build.sh (g++, libaio-dev,
# pybind11); without them the benchmarks still run, and say why the reference is missing.
bench-deps:
	@if [ -f /usr/include/libaio.h ] && command -v g++ >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && apt-get install -y -qq g++ libaio-dev >/dev/null; \
	else echo "bench-deps: install g++ and libaio-dev to measure the reference" >&2; fi

# The converters' tests and the benchmarks use MosaicML Streaming and Hugging Face datasets, the
# real libraries, whose pins (mosaicml-streaming: numpy<2.2; datasets: fsspec<=2026.6) the other
# extras cannot share (s3fs needs fsspec 2026.9): both are installed without their pins, beside
# the versions of what they import that were tested with them.
peer-deps: install
	$(PIP_INSTALL) --no-deps mosaicml-streaming==0.13.0 datasets==5.0.1
	$(PIP_INSTALL) transformers==4.57.6 \
		huggingface_hub==0.36.2 multiprocess==0.70.19 dill==0.4.1 xxhash==3.8.2 catalogue \
		zstd python-snappy brotli pandas httpx pyyaml

# benchmarks/columns.py measures Megatron-Core's IndexedDatasetBuilder, which needs Python >= 3.12
# (PYTHON312: any such interpreter; pyenv's, or Debian's python3.12) and torch: a venv of its own.
PYTHON312 ?= $(shell command -v python3.12 || ls $$HOME/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1)
megatron-venv: venv
	$(PYTHON312) -m venv .venv-megatron
	$(RUN) $(UV) pip install --python .venv-megatron/bin/python -q torch==2.15.0 megatron-core==0.19.2 numpy

# The viewer's test drives a real headless browser: Debian's chromium (apt-get, as root).
browser-deps:
	@if command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	else echo "browser-deps: install chromium to run the viewer's browser test" >&2; fi

bench: bench-deps install peer-deps
	$(RUN) $(VPY) benchmarks/run.py

bench-quick: bench-deps install peer-deps
	$(RUN) $(VPY) benchmarks/run.py --quick

clean:
	rm -rf build dist python/*.egg-info .pytest_cache
	rm -f python/ffrecord/libffrecord.so python/ffrecord/libffrecord.h python/ffrecord/_version.py
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
