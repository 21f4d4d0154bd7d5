"""The compiler: turns an optimized program into an executable (generated NumPy code with
fused elementwise groups writing into planned buffers; numba kernels for arithmetic groups
when numba is available), with an in-memory compile cache."""

from ._pipeline import Executable as Executable
from ._pipeline import compile_program as compile_program
from ._pipeline import optimize_program as optimize_program
