# parlab: the two commands a learner needs are `make lab` and `make test`.
# Both create .venv on first use with the CPU build of torch 2.13.0 (pinned here, before the
# package, so that pip never resolves an unpinned multi-GB CUDA build), then the package.
# TORCH_INDEX is PyTorch's CPU wheel index, added to pip's own indexes (--extra-index-url, so a
# local wheel cache or mirror in pip's config still answers) for torch alone (--no-deps; its
# dependencies then come from pip's usual indexes): 2.13.0+cpu sorts above PyPI's CUDA 2.13.0.
# A CUDA user names another index: make lab TORCH_INDEX=https://download.pytorch.org/whl/cu126
# (TORCH_INDEX= empty leaves pip's configuration alone).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
STAMP  := $(VENV)/.parlab-installed

.PHONY: setup lab test notebooks exercises bench lint browser site clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-deps $(if $(TORCH_INDEX),--extra-index-url "$(TORCH_INDEX)") "$(TORCH)"
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

## Open the course in JupyterLab (http://127.0.0.1:8888, or the next free port); once it is up,
## print its link and the direct link to chapter 00 (for a machine with no browser).
lab: setup
	$(BIN)/python -m parlab.course.nbtools lab

## Install everything and run the whole suite: unit tests, nbval over course/ and solutions/,
## exercise checks, and the real-browser test (needs /usr/bin/chromium; `make browser` installs it).
## Test files run on $(WORKERS) pytest-xdist workers, one file per worker at a time (a notebook's
## cells, a module's warm World stay together); WORKERS=0 runs them in this one process. Four on
## any machine: the suite mostly waits (kernels, the browser, ranks meeting), so four workers on
## two cores finish in about half the time of two (measured: see the README).
WORKERS ?= 4
test: setup
	$(BIN)/python -m pytest $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile)

## Re-execute every notebook in place and regenerate exercises/ from solutions/.
notebooks: setup
	$(BIN)/python -m parlab.course.nbtools execute
	$(BIN)/python -m parlab.course.nbtools exercises

## Regenerate exercises/ from solutions/ only.
exercises: setup
	$(BIN)/python -m parlab.course.nbtools exercises

bench: setup
	$(BIN)/parlab bench all

lint: setup
	$(BIN)/ruff check parlab tests

## The course as a static site in site/ (from the notebooks' stored outputs; nothing is executed),
## with the calculators running parlab's cost model in the browser (Pyodide, fetched once with npm
## into build/site-cache); ends with the link check. Serve it: python -m http.server -d site
site: setup
	$(BIN)/python -m parlab.site build site

## Debian's chromium for the browser test (root + apt only; never `playwright install`).
## and a CJK font, so that the Chinese text (中文口述版, the drill in Chinese) renders, not boxes.
browser:
	test -x /usr/bin/chromium && fc-list :lang=zh | grep -q . || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fonts-noto-cjk)

clean:
	rm -rf $(VENV) test-artifacts site build/site-cache
