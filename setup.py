"""Builds the Cython kernels of runtime/engine/kernels (the rest of the packaging is pyproject.toml)."""

from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = sorted(Path("runtime/engine/kernels").glob("*.pyx"))

extensions = [
    Extension(
        "runtime.engine.kernels." + path.stem,
        [str(path)],
        include_dirs=[numpy.get_include()],
        extra_compile_args=["-O3"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for path in KERNELS
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
)
