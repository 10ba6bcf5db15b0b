"""The tenax Python package: its version is the C++ core's, and it imports
from an install prefix in a clean environment."""

import ast
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
    subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(prefix), "--component", "tenax"],
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


def _cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def _warnings_of_import(env, before=""):
    """The RuntimeWarnings that `import tenax.torch` gives in a fresh
    interpreter with `env`, after torch is loaded and `before` ran."""
    code = ("import os, warnings, torch\n" + before +
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import tenax.torch\n"
            "print(repr([str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_importing_the_backend_warns_when_openblas_runs_fallback_kernels_the_cpu_outgrew():
    # OpenBLAS reads OPENBLAS_CORETYPE when torch loads it: force a pre-AVX2
    # pick, then unset the variable so that tenax sees a process that did
    # not choose. Whether the warning is due depends only on the CPU's flags.
    warned = _warnings_of_import(dict(os.environ, OPENBLAS_CORETYPE="Nehalem"),
                                 before="del os.environ['OPENBLAS_CORETYPE']\n")
    flags = _cpu_flags()
    best = ("SkylakeX" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
            else "Haswell" if {"avx2", "fma"} <= flags else None)
    from tenax import _tenax
    assert _tenax.best_openblas_core() == (best or "")
    if best is None:
        assert warned == []
    else:
        assert len(warned) == 1, warned
        assert "its Nehalem kernels" in warned[0] and f"OPENBLAS_CORETYPE={best}" in warned[0], warned[0]


def test_no_warning_when_the_caller_chose_the_kernels():
    warned = _warnings_of_import(dict(os.environ, OPENBLAS_CORETYPE="Nehalem"))
    assert [w for w in warned if "OPENBLAS_CORETYPE" in w] == []
