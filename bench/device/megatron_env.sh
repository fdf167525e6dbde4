#!/usr/bin/env bash
# Source on the device machine before auto_real_jobs.sh ... megatron: installs the carried megatron-core wheel
# (.whl/*.whl, see the device README) into /tmp/site, gives its dataset helper the no-op Makefile Megatron needs
# to start (../shared/data/megatron/README.md), and points MEGATRON_DIR at the carried pretrain_gpt.py
# (.whl/megatron/, copied from ../shared/data/megatron/, which does not travel).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
printf 'all:\n\t@true\n' > /tmp/site/megatron/core/datasets/Makefile
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} MEGATRON_DIR=$PWD/.whl/megatron CUDA_DEVICE_MAX_CONNECTIONS=1
