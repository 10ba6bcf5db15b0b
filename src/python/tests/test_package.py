"""The tenax Python package: its version is the C++ core's, and it imports
from an install prefix in a clean environment."""

import os
import subprocess
import sys
from pathlib import Path

import tenax

BUILD = Path(os.environ["TENAX_BUILD_DIR"])
SOURCE = Path(os.environ["TENAX_SOURCE_DIR"])


def test_version_is_the_one_tenax_prints():
    out = subprocess.run([str(BUILD / "src" / "tenax"), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"tenax {tenax.__version__}"


def test_the_package_imports_from_an_install_prefix_in_a_clean_environment(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(prefix), "--component", "python"],
                   check=True, capture_output=True)
    site = prefix / "lib" / "python3" / "dist-packages"
    assert (site / "tenax" / "torch" / "__init__.py").exists()
    # Nothing of the build folder or the source tree in sight.
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)}
    code = ("import tenax, tenax.torch, torch.distributed as d; "
            "print(tenax.__version__, tenax.__file__, d.Backend.TENAX)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    version, path, backend = out.stdout.split()
    assert version == tenax.__version__
    assert path.startswith(str(site)), path
    assert backend == "TENAX"
