#!/bin/bash
# Runs a command on the device machine with what smat needs there (issue 34):
#   bash benchmarks/gpu_lease.sh COMMAND...      (the call carries .gpu, see gpu.py --pack)
# The machine's image has JAX, Flax, Optax, Orbax, transformers and PyTorch but not Captum,
# and receives the checkout without installing it: the wheels in .gpu/wheels go to
# /tmp/site, and smat gets package metadata so `smat --version` reads a version.
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
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv 2>&1
python3 -c "import jax, flax, transformers, torch; print('jax', jax.__version__, 'flax',
flax.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__,
jax.devices())" || exit 1
date -u
"$@"
status=$?
date -u
exit $status
