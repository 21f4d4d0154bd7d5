"""primflow's options: one object, ``pf.config``, holds every switch of the compiler and
the backends, with fixed defaults. Nothing in primflow reads environment variables, so a
program behaves the same wherever it runs; set an option in code instead.

``pf.jit(f, backend=..., tiered=..., blocking=...)`` overrides the jit options for one
function; the ones here are what ``None`` (the default) means. The jit options apply when a
program is compiled (a jitted function's first call per signature).
"""

from __future__ import annotations

import contextlib
import os

_JIT_BACKENDS = ("auto", "numpy", "numba", "interpret")


def _choice(name, choices):
    def check(value):
        if value not in choices:
            raise ValueError(f"pf.config.{name} must be one of {choices}, got {value!r}")
        return value

    return check


def _flag(name):
    def check(value):
        if not isinstance(value, bool):
            raise TypeError(f"pf.config.{name} must be True or False, got {value!r}")
        return value

    return check


def _block_bytes(value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"pf.config.jit_block_bytes must be a positive int (bytes) or None, "
                         f"got {value!r}")
    return value


def _positive_int(name):
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"pf.config.{name} must be a positive int, got {value!r}")
        return value

    return check


def _seconds(name):
    def check(value):
        import datetime  # noqa: PLC0415 - only when a timedelta is passed

        if isinstance(value, datetime.timedelta):
            value = value.total_seconds()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"pf.config.{name} must be a positive number of seconds (or a "
                             f"datetime.timedelta), got {value!r}")
        return float(value)

    return check


def _cache_dir(value):
    if not isinstance(value, (str, os.PathLike)) or not isinstance(os.fspath(value), str):
        raise TypeError(f"pf.config.cache_dir must be a path (str or os.PathLike of str), got "
                        f"{type(value).__name__}")
    path = os.path.expanduser(os.fspath(value))
    # pf.jit keeps compiled kernels (code it runs) there: an empty or relative path would
    # put them in whatever folder the program happens to run in
    if not path.strip():
        raise ValueError("pf.config.cache_dir must name a folder, got an empty path; e.g. "
                         "os.path.expanduser('~/.cache/primflow')")
    if not os.path.isabs(path):
        raise ValueError(f"pf.config.cache_dir must be an absolute path (pf.jit runs the "
                         f"kernels kept there, so the folder must not depend on the current "
                         f"directory), got {value!r}; e.g. os.path.abspath({path!r})")
    return os.path.normpath(path)


# name -> (default, validator, description)
_OPTIONS = {
    "jit_backend": ("auto", _choice("jit_backend", _JIT_BACKENDS),
                    "what pf.jit compiles to: 'numpy' (generated NumPy code), 'numba' (plus "
                    "numba kernels, compiled in the first call), 'interpret' (the reference "
                    "interpreter) or 'auto' (numpy, plus numba kernels for large arithmetic "
                    "groups when numba is importable)"),
    "jit_tiered": (True, _flag("jit_tiered"),
                   "with 'auto', compile numba kernels in a background process while the "
                   "NumPy code runs (False: compile them in the first call)"),
    "jit_blocking": (True, _flag("jit_blocking"),
                     "run programs whose rows are independent in cache-sized row blocks"),
    "jit_block_bytes": (None, _block_bytes,
                        "the largest value of a row-blocked program in bytes (None: the "
                        "compiler's BLOCK_BYTES, 1 MiB)"),
    "cache_dir": (os.path.join(os.path.expanduser("~"), ".cache", "primflow"), _cache_dir,
                  "where pf.jit keeps numba kernels between processes: an absolute path "
                  "('~' expanded) to a folder only you can write (created mode 700)"),
    "blas": ("auto", _choice("blas", ("auto", "numpy")),
             "matrix products: 'auto' (Intel MKL when the mkl package is installed, else "
             "NumPy's BLAS) or 'numpy' (always NumPy's BLAS)"),
    "jit_max_trace_ops": (100_000, _positive_int("jit_max_trace_ops"),
                          "the most operations pf.jit records while tracing one function: a "
                          "Python loop unrolled without end (its condition known while "
                          "tracing) stops with an error naming its line instead of hanging"),
    "dist_timeout": (1800.0, _seconds("dist_timeout"),
                     "seconds a rank waits in a collective (all_reduce, barrier, recv, a "
                     "mesh's group creation...) for the other ranks before it ends the job "
                     "with an error naming the rank and the collective (torch.distributed's "
                     "default, 30 minutes; dist.init_parallel_env(timeout=...) sets it too)"),
}


class Config:
    """primflow's options (``pf.config``). Read and set them as attributes; each is checked
    when set. ``override`` sets some for a ``with`` block.

    Options: ``jit_backend`` ('auto'), ``jit_tiered`` (True), ``jit_blocking`` (True),
    ``jit_block_bytes`` (None), ``cache_dir`` (``~/.cache/primflow``), ``blas`` ('auto'),
    ``jit_max_trace_ops`` (100,000), ``dist_timeout`` (1800.0 s); ``pf.config.describe()``
    says what each does.

    Example:
        >>> import primflow as pf
        >>> pf.config.jit_backend
        'auto'
        >>> with pf.config.override(jit_backend="numpy"):
        ...     pf.config.jit_backend
        'numpy'
        >>> pf.config.jit_backend = "gpu"  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: pf.config.jit_backend must be one of (...), got 'gpu'
    """

    __slots__ = tuple(_OPTIONS)

    def __init__(self):
        for name, (default, _, _) in _OPTIONS.items():
            object.__setattr__(self, name, default)

    def __setattr__(self, name, value):
        if name not in _OPTIONS:
            raise AttributeError(f"pf.config has no option {name!r}; the options are "
                                 f"{', '.join(_OPTIONS)}")
        object.__setattr__(self, name, _OPTIONS[name][1](value))

    def update(self, name, value):
        """Sets one option by name (JAX's ``jax.config.update``).

        Example:
            >>> import primflow as pf
            >>> pf.config.update("jit_tiered", False); pf.config.jit_tiered
            False
            >>> pf.config.update("jit_tiered", True)
        """
        setattr(self, name, value)

    @contextlib.contextmanager
    def override(self, **options):
        """Sets ``options`` inside a ``with`` block and restores the previous values after.

        Example:
            >>> import primflow as pf
            >>> with pf.config.override(jit_blocking=False):
            ...     pf.config.jit_blocking
            False
            >>> pf.config.jit_blocking
            True
        """
        saved = {name: getattr(self, name) for name in options}
        try:
            for name, value in options.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, value in saved.items():
                object.__setattr__(self, name, value)

    def reset(self):
        """Restores every option's default.

        Example:
            >>> from primflow.core.config import Config
            >>> options = Config(); options.blas = "numpy"; options.reset(); options.blas
            'auto'
        """
        self.__init__()

    def as_dict(self) -> dict:
        """The options and their current values.

        Example:
            >>> import primflow as pf
            >>> pf.config.as_dict()["jit_blocking"]
            True
        """
        return {name: getattr(self, name) for name in _OPTIONS}

    def describe(self) -> str:
        """One line per option: its value and what it does.

        Example:
            >>> import primflow as pf
            >>> print(pf.config.describe().splitlines()[0][:30])
            jit_backend = 'auto': what pf.
        """
        return "\n".join(f"{name} = {getattr(self, name)!r}: {desc}"
                         for name, (_, _, desc) in _OPTIONS.items())

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"


config = Config()
