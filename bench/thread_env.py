"""The thread environments of the side-by-side scripts (compare_torch.py, compare_torch_gpt.py).

PyTorch runs in its best setting here: every core, OMP_WAIT_POLICY=PASSIVE (so its OpenMP and
OpenBLAS pools do not fight). The scripts set it by running themselves again in torch_env before
torch loads; mdl-train, which has one OpenMP pool and no OpenBLAS, runs in mdl_env: the wait
policy the caller had (OpenMP's default when unset).
"""
import os

_WAS = "MDL_OMP_WAIT_POLICY_WAS"


def torch_env(cores):
    """This environment with PyTorch's thread settings, marked as set (MDL_COMPARE_ENV=1)."""
    return dict(os.environ, MDL_COMPARE_ENV="1", OMP_WAIT_POLICY="PASSIVE",
                **{_WAS: os.environ.get("OMP_WAIT_POLICY", "")},
                OPENBLAS_NUM_THREADS=str(cores), OMP_NUM_THREADS=str(cores))


def mdl_env():
    """The environment mdl-train runs in: this one, with the OpenMP wait policy the caller had."""
    env = dict(os.environ)
    policy = env.pop(_WAS, "")
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    else:
        env.pop("OMP_WAIT_POLICY", None)
    return env
