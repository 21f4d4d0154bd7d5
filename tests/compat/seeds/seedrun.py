"""Runs one seed example (a file of this folder: the document's code with its imports
changed) as a script, in this process, and returns what it defined and printed."""

import contextlib
import io
import pathlib
import runpy

import primflow as pf

HERE = pathlib.Path(__file__).resolve().parent


def run_example(name, seed=2024):
    """``(globals, stdout)`` of running ``name`` (random draws seeded with ``seed``)."""
    pf.seed(seed)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        namespace = runpy.run_path(str(HERE / name), run_name="__main__")
    return namespace, out.getvalue()
