"""Build of the one compiled part of topicjax: the fused CPU kernels (``csrc/``: the E-step of
PLSA/ARTM, the PTM E-step and trial flips, the LIDA-family token sweep), XLA FFI handlers
packaged as one extension module, ``topicjax.core._estep_ffi``, with one thread pool (see
topicjax/core/kernels.py).

Everything else about the package is in pyproject.toml.  ``pip install -e .`` compiles the kernel
in place (next to kernels.py), ``pip install .`` into the wheel.  The XLA FFI headers come from
jaxlib (a build requirement).  Flags: ``-O3`` and, by default, ``-march=native`` (the kernel is
built on the machine that runs it; set ``TOPICJAX_NATIVE=0`` for a portable build, e.g. a wheel
for other machines).  The extension is optional: without a C++17 compiler the install still
succeeds, and topicjax runs its pure-JAX E-step with a warning.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import SetupError

HERE = Path(__file__).resolve().parent
SOURCES = sorted((HERE / "csrc").glob("*"))


def source_hash() -> str:
    """Hash of the kernel's sources, compiled in so that kernels.py can tell a stale build."""
    h = hashlib.sha256()
    for p in SOURCES:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def jaxlib_include() -> str:
    spec = importlib.util.find_spec("jaxlib")  # the headers only: jaxlib is not imported
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("building the E-step kernel needs jaxlib (for the XLA FFI headers)")
    return os.path.join(list(spec.submodule_search_locations)[0], "include")


def native() -> bool:
    """``TOPICJAX_NATIVE``: ``1`` (default; blank counts as unset) builds for this machine's CPU
    (``-march=native``), ``0`` for any CPU of its kind; anything else stops the build with one line."""
    raw = os.environ.get("TOPICJAX_NATIVE", "").strip() or "1"
    if raw not in ("0", "1"):
        raise SetupError(f"TOPICJAX_NATIVE must be one of '0', '1', got {os.environ['TOPICJAX_NATIVE']!r}")
    return raw == "1"


class BuildKernel(build_ext):
    def build_extensions(self):
        flags = ["-std=c++17", "-O3", "-fopenmp-simd", "-fno-math-errno", "-fvisibility=hidden"]
        if native() and self.compiler.compiler_type == "unix":
            if self._accepts("-march=native"):
                flags.append("-march=native")
        desc = " ".join(flags)
        for ext in self.extensions:
            # -isystem: the XLA headers' own warnings are not ours to fix
            ext.extra_compile_args = flags + ["-isystem", jaxlib_include()] + ext.extra_compile_args
            ext.define_macros += [("TOPICJAX_BUILD_FLAGS", f'"{desc}"'), ("TOPICJAX_SOURCE_HASH", f'"{source_hash()}"')]
        super().build_extensions()

    def _accepts(self, flag: str) -> bool:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "probe.cc"
            src.write_text("int main() { return 0; }\n")
            try:
                self.compiler.compile([str(src)], output_dir=tmp, extra_postargs=[flag])
            except Exception:
                return False
        return True


setup(
    ext_modules=[
        Extension(
            "topicjax.core._estep_ffi",
            sources=["csrc/estep_ffi.cc", "csrc/ptm_ffi.cc", "csrc/lida_ffi.cc"],
            depends=[str(p.relative_to(HERE)) for p in SOURCES],
            include_dirs=["csrc"],
            language="c++",
            optional=True,
        ),
    ],
    cmdclass={"build_ext": BuildKernel},
)
