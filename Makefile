# exportlab — two commands matter:  `make lab` (open the lessons)  and  `make test` (run every check).
# Both create .venv/ with Python 3.11 on first use and install requirements.txt + this project (editable: the
# export-doctor command, `import exportlab`; tools/checkout_path.py makes `import helpers` read this checkout).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export EXPORTLAB_CACHE_DIR ?= $(CURDIR)/.cache/exportlab
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: lab test unit nbval browser lint notebooks sync-check bench cards clean-cache help

help:
	@echo "make lab    - start JupyterLab on notebooks/ (127.0.0.1, token-protected); the lessons' programs build meanwhile"
	@echo "make test   - lint + unit tests + every notebook under strict nbval + real-browser widget tests"
	@echo "make notebooks - re-execute every notebook and save its outputs (after editing a lesson)"
	@echo "make cards  - printable interview answer cards: build/interview-cards.html"
	@echo "make bench  - a newcomer's timings (make lab URL, Run All per lesson, widgets, checks); rewrites README timings"

# Byte-compiled on both cores after the install (pip compiles on one: 69 s → 57 s measured); never left out, since
# a machine with PYTHONDONTWRITEBYTECODE=1 would compile the modules again at every import. Only one file of the
# pins does not compile on 3.11 (a test helper in Python 3.12 syntax): it is excluded, so any other failure stops make.
$(STAMP): requirements.txt pyproject.toml tools/kernelspec.py tools/checkout_path.py
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -r requirements.txt
	$(BIN)/python -m compileall -q -j 0 -x 'torch/testing/_internal/py312_intrinsics\.py' \
		"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python tools/checkout_path.py >/dev/null
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (exportlab)" >/dev/null
	$(BIN)/python tools/kernelspec.py >/dev/null
	touch $(STAMP)

# JupyterLab settings that make the lessons reliable (windowingMode: none) come from jupyter/overrides.json.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
# JupyterLab starts at once; the lessons' programs build in the background meanwhile (tools/lab.py: lowest CPU
# priority, lesson by lesson; progress in the terminal and .cache/exportlab/warm.log, or
# `.venv/bin/python tools/notebooks.py warm-status`). LAB_ARGS: more JupyterLab options (e.g. --port=8899).
lab: $(STAMP)
	$(BIN)/python tools/lab.py --notebook-dir=notebooks --ServerApp.ip=127.0.0.1 --ServerApp.open_browser=False \
		--LabApp.app_settings_dir=$(CURDIR)/jupyter $(ROOT_FLAG) $(LAB_ARGS)

# Three pytest workers on two cores, one torch (OpenMP) thread per process, kernels and JupyterLab's included. With
# torch's default (one thread per core) each worker's threads spin-wait for cores the other workers hold: the suite
# took 898 s instead of 776 s on 2 cores (measured 2026-12-05). A third worker uses the time the others spend
# waiting (for a kernel, a subprocess, a page, a build another process holds): 700 s against 756 s with two on
# 2026-12-07 (README). Lessons that time something say how many threads.
test: $(STAMP)
	bash tools/ensure_chromium.sh
	$(MAKE) --no-print-directory lint sync-check
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder tests notebooks --nbval --nbval-current-env \
		--nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=900 -p no:randomly

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests --ignore=tests/browser

nbval: $(STAMP)
	$(BIN)/python -m pytest -q notebooks --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg

browser: $(STAMP)
	bash tools/ensure_chromium.sh
	$(BIN)/python -m pytest -q tests/browser

lint: $(STAMP)
	$(BIN)/ruff check helpers tests benchmarks tools notebooks jupyter conftest.py
	$(BIN)/mypy

sync-check: $(STAMP)
	$(BIN)/python tools/notebooks.py check

notebooks: $(STAMP)
	$(BIN)/python tools/notebooks.py execute $(NB)

cards: $(STAMP)
	$(BIN)/python -m helpers.interview cards build/interview-cards.html

bench: $(STAMP)
	bash tools/ensure_chromium.sh
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_widgets.py
	$(BIN)/python benchmarks/bench_exercises.py
	$(BIN)/python benchmarks/bench_lab_url.py
	$(BIN)/python benchmarks/bench_first_verdict.py
	$(BIN)/python benchmarks/bench_browser.py
	$(BIN)/python benchmarks/report.py

clean-cache:
	rm -rf .cache/exportlab
