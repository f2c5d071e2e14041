"""Builds the kernels of runtime/engine/kernels (the rest of the packaging is pyproject.toml).

Each kernel module is one Python source in Cython's pure-Python mode (runtime/engine/kernels/
__init__.py): compiled here to an extension beside it, which Python imports in its place; unbuilt,
the same source runs interpreted."""

import sys
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime.engine.kernels import MODULES  # noqa: E402  (the kernel modules, named once)

extensions = [
    Extension(
        "runtime.engine.kernels." + name,
        [f"runtime/engine/kernels/{name}.py"],
        include_dirs=[numpy.get_include()],
        extra_compile_args=["-O3"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name in MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
)
