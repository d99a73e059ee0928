"""No module touches a JAX backend at import time: `jax.distributed.initialize()` must be able to
run after the launcher's imports (multi-host), and importing a library must stay cheap."""
import subprocess
import sys

from tests.conftest import ROOT

CHECK = r"""
import importlib, pkgutil
import jax._src.xla_bridge as xb
names = [m.name for pkg in ("ttw_jax", "experiments")
         for m in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + ".")]
assert len(names) > 100, names
for name in names:
    importlib.import_module(name)
    if xb.backends_are_initialized():
        raise SystemExit(f"importing {name} started a JAX backend")
print(len(names))
"""


def test_no_module_starts_a_backend_at_import():
    out = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:] + out.stdout[-500:]


def test_the_check_catches_a_module_that_starts_a_backend(tmp_path):
    (tmp_path / "eager.py").write_text("import jax.numpy as jnp\nX = jnp.zeros(3)\n")
    probe = ("import sys; sys.path.insert(0, %r)\nimport jax._src.xla_bridge as xb\n"
             "import eager\nprint(xb.backends_are_initialized())" % str(tmp_path))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().endswith("True")
