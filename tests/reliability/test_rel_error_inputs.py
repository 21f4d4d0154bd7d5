"""Error inputs of the public API, in the style of PyTorch's OpInfo ``error_inputs``.

One table, ``CASES``: for each public function (creation, random draws, tensor protocol,
indexing, math, reductions, shape ops, linear algebra, FFT, activations and norms, layers,
optimizer constructors, data loading), bad inputs with the error type expected and a
fragment of its message that names the argument (or the shapes/values) at fault. Every
case must raise exactly that: not a silent result, not a raw NumPy message wrapped in a
``PrimitiveError`` naming some internal primitive instead of the function called.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import pytest

import primflow as pf

F = pf.nn.functional
inf, nan = math.inf, math.nan


class ErrorInput(NamedTuple):
    id: str  # "<function>-<what is wrong>"
    call: Callable  # makes the bad call
    error: type  # the exception type expected
    fragment: str  # a part of the message (names the argument, shapes or values)


def _x():
    return pf.ones([2, 3])


def _v():
    return pf.to_tensor([1.0, 2.0, 3.0])


def _p():
    return [pf.create_parameter([2], "float32")]


def _ints():
    return pf.to_tensor([7, 8, 9])


def _mask(*values):
    return pf.to_tensor(list(values))


def _ds():
    return pf.io.TensorDataset([pf.ones([4, 2])])


E = ErrorInput
LA, FFT, OPT, IO = pf.linalg, pf.fft, pf.optimizer, pf.io

CREATION = [
    E("zeros-float-size", lambda: pf.zeros([2.5]), TypeError, "shape[0] must be an int"),
    E("zeros-bool-size", lambda: pf.zeros([True]), TypeError, "shape[0] must be an int"),
    E("zeros-str-size", lambda: pf.zeros(["3"]), TypeError, "shape[0] must be an int"),
    E("zeros-negative-size", lambda: pf.zeros([-1]), ValueError, "shape entries must be >= 0"),
    E("zeros-float-shape", lambda: pf.zeros(2.5), TypeError, "shape must be an int or a list"),
    E("zeros-none-shape", lambda: pf.zeros(None), TypeError, "shape must be an int or a list"),
    E("ones-integral-float", lambda: pf.ones([2.0]), TypeError, "shape[0] must be an int"),
    E("empty-negative", lambda: pf.empty([2, -3]), ValueError, "shape entries must be >= 0"),
    E("full-str-value", lambda: pf.full([2], "a"), TypeError, "fill_value must be a number"),
    E("full-float-size", lambda: pf.full([2.5], 1.0), TypeError, "shape[0] must be an int"),
    E("full_like-none-value", lambda: pf.full_like(_v(), None), TypeError,
      "full_like: fill_value must be a number"),
    E("eye-float-rows", lambda: pf.eye(2.5), TypeError, "eye: num_rows must be an int"),
    E("eye-negative-columns", lambda: pf.eye(2, -1), ValueError,
      "eye: num_columns must be >= 0"),
    E("arange-zero-step", lambda: pf.arange(0, 5, 0), ValueError, "step must not be zero"),
    E("arange-infinite-end", lambda: pf.arange(0, inf), ValueError,
      "arange: end must be finite"),
    E("arange-nan-end", lambda: pf.arange(nan), ValueError, "arange: end must be finite"),
    E("arange-str-end", lambda: pf.arange("a"), TypeError, "arange: end must be a real number"),
    E("linspace-float-num", lambda: pf.linspace(0, 1, 2.5), TypeError,
      "linspace: num must be an int"),
    E("linspace-zero-num", lambda: pf.linspace(0, 1, 0), ValueError,
      "linspace: num must be >= 1"),
    E("linspace-infinite-stop", lambda: pf.linspace(0, inf, 3), ValueError,
      "linspace: stop must be finite"),
    E("to_tensor-int64-overflow", lambda: pf.to_tensor(2 ** 70, dtype="int64"), OverflowError,
      "outside the range of int64"),
    E("to_tensor-list-overflow", lambda: pf.to_tensor([1, 2 ** 70]), OverflowError,
      "data[1] = 1180591620717411303424"),
    E("to_tensor-uint8-overflow", lambda: pf.to_tensor(300, dtype="uint8"), OverflowError,
      "outside the range of uint8 [0, 255]"),
    E("to_tensor-nan-to-int", lambda: pf.to_tensor([1.0, nan], dtype="int64"), ValueError,
      "data[1] = nan cannot be held by an integer dtype"),
    E("to_tensor-ragged", lambda: pf.to_tensor([[1, 2], [3]]), ValueError,
      "ragged: data[1] has length 1 but data[0] has 2"),
    E("to_tensor-deep-ragged", lambda: pf.to_tensor([[1, 2], [3, [4]]]), ValueError,
      "ragged"),
    E("to_tensor-str-entry", lambda: pf.to_tensor([1, "a"]), TypeError, "data[1] is 'a'"),
    E("to_tensor-none", lambda: pf.to_tensor(None), TypeError, "data is None"),
    E("to_tensor-bad-dtype", lambda: pf.to_tensor([1.0], dtype="float99"), TypeError,
      "unsupported dtype 'float99'"),
    E("to_tensor-bad-place", lambda: pf.to_tensor([1.0], place="tpu"), ValueError,
      "unknown device 'tpu'"),
]

RANDOM = [
    E("rand-float-size", lambda: pf.rand([1.5]), TypeError, "rand: shape[0] must be an int"),
    E("randn-negative-size", lambda: pf.randn([-1]), ValueError,
      "randn: shape entries must be >= 0"),
    E("randint-low-above-high", lambda: pf.randint(5, 2, [3]), ValueError,
      "randint: low (5) must be < high (2)"),
    E("randint-empty-range", lambda: pf.randint(2, 2, [3]), ValueError, "must be < high"),
    E("randint-float-low", lambda: pf.randint(0.5, 3, [3]), TypeError,
      "randint: low must be an int"),
    E("randint-float-dtype", lambda: pf.randint(0, 5, [3], dtype="float32"), TypeError,
      "randint: dtype must be an integer dtype"),
    E("randint-float-size", lambda: pf.randint(0, 5, [2.5]), TypeError,
      "randint: shape[0] must be an int"),
    E("normal-negative-std", lambda: pf.normal(std=-1.0, shape=[2]), ValueError,
      "normal: std must be >= 0"),
    E("normal-nan-std", lambda: pf.normal(std=nan, shape=[2]), ValueError,
      "normal: std must be finite"),
    E("normal-negative-tensor-std", lambda: pf.normal(pf.zeros([2]), pf.to_tensor([-1., 1.])),
      ValueError, "normal: std must be >= 0 everywhere"),
    E("normal-str-mean", lambda: pf.normal(mean="a", shape=[2]), TypeError,
      "normal: mean must be a real number"),
    E("uniform-min-above-max", lambda: pf.uniform([2], min=2.0, max=1.0), ValueError,
      "uniform: min (2.0) must be <= max (1.0)"),
    E("uniform-infinite-min", lambda: pf.uniform([2], min=-inf), ValueError,
      "uniform: min must be finite"),
    E("randperm-negative", lambda: pf.randperm(-1), ValueError, "randperm: n must be >= 0"),
    E("randperm-float", lambda: pf.randperm(2.5), TypeError, "randperm: n must be an int"),
    E("dropout-p-above-one", lambda: F.dropout(_x(), p=1.5), ValueError,
      "dropout: p (the drop probability) must be in [0, 1]"),
    E("dropout-negative-p", lambda: F.dropout(_x(), p=-0.1), ValueError, "dropout: p"),
    E("dropout-str-p", lambda: F.dropout(_x(), p="a"), TypeError,
      "dropout: p must be a real number"),
    E("dropout-axis-out-of-range", lambda: F.dropout(_x(), p=0.5, axis=5), ValueError,
      "axis 5 is out of range"),
    E("seed-negative", lambda: pf.seed(-1), ValueError, "seed must be a non-negative int"),
    E("seed-float", lambda: pf.seed(1.5), ValueError, "seed must be a non-negative int"),
]

TENSOR_PROTOCOL = [
    E("iter-0d", lambda: list(pf.to_tensor(3.0)), TypeError, "iteration over a 0-d tensor"),
    E("len-0d", lambda: len(pf.to_tensor(3.0)), TypeError, "len() of a 0-d tensor"),
    E("item-many", lambda: _v().item(), ValueError, "exactly one element, got shape [3]"),
    E("float-many", lambda: float(_v()), ValueError, "exactly one element"),
    E("bool-many", lambda: bool(_v()), ValueError, "truth value of a tensor with 3 elements"),
    E("astype-bad-dtype", lambda: _x().astype("float99"), TypeError,
      "unsupported dtype 'float99'"),
    E("astype-none", lambda: _x().astype(None), TypeError, "unsupported dtype None"),
    E("cast-not-tensor", lambda: pf.cast([1, 2], "float32"), TypeError,
      "cast expects a Tensor"),
    E("numel-not-tensor", lambda: pf.numel("a"), TypeError, "numel expects a Tensor"),
]

INDEXING = [
    E("getitem-float", lambda: _v()[1.5], IndexError, "unsupported index 1.5"),
    E("getitem-out-of-range", lambda: _v()[5], IndexError,
      "index 5 is out of range for dim 0 of size 3"),
    E("getitem-too-many", lambda: _v()[0, 0], IndexError, "too many indices (2)"),
    E("getitem-two-ellipses", lambda: _x()[..., ...], IndexError, "single ellipsis"),
    E("getitem-float-tensor", lambda: _v()[pf.to_tensor([0.5])], IndexError,
      "must be integer or bool, got float32"),
    E("getitem-int-tensor-out-of-range", lambda: _v()[pf.to_tensor([5])], IndexError,
      "index out of range for a dim of size 3"),
    E("getitem-short-mask", lambda: _v()[_mask(True, False)], IndexError,
      "size of axis is 3 but size of corresponding boolean axis is 2"),
    E("getitem-long-mask", lambda: _x()[_mask(True, False, True)], IndexError,
      "boolean index of shape [3] did not match the indexed tensor of shape [2, 3] along "
      "axis 0"),
    E("getitem-mask-second-axis", lambda: _x()[:, _mask(True, False)], IndexError,
      "along axis 1"),
    E("getitem-2d-mask", lambda: _x()[pf.ones([3, 2]) > 0], IndexError,
      "boolean index of shape [3, 2]"),
    E("setitem-short-mask", lambda: pf.setitem(_v(), _mask(True, True), 1.0), IndexError,
      "size of corresponding boolean axis is 2"),
    E("setitem-shape", lambda: pf.setitem(_x(), 0, pf.ones([4])), ValueError,
      "cannot be broadcast"),
    E("index_select-out-of-range", lambda: pf.index_select(_v(), pf.to_tensor([5])),
      IndexError, "index_select: index out of range"),
    E("index_select-float-index", lambda: pf.index_select(_v(), pf.to_tensor([0.5])),
      TypeError, "index_select: index must be an integer tensor"),
    E("index_select-2d-index", lambda: pf.index_select(_v(), pf.to_tensor([[0]])),
      ValueError, "index_select: index must be 1-d"),
    E("gather-out-of-range", lambda: pf.gather(_v(), pf.to_tensor([3])), IndexError,
      "index out of range for a dim of size 3"),
]

MATH = [
    E("add-shapes", lambda: pf.add(_x(), pf.ones([4])), ValueError,
      "shapes [2, 3] and [4] cannot be broadcast together"),
    E("add-str", lambda: pf.add(_x(), "a"), TypeError, "'a' (str)"),
    E("add-none", lambda: pf.add(_x(), None), TypeError, "None"),
    E("multiply-shapes", lambda: _x() * pf.ones([2]), ValueError, "cannot be broadcast"),
    E("floor_divide-int-by-zero", lambda: _ints() // 0, ZeroDivisionError,
      "floor_divide: integer division by zero"),
    E("floor_divide-int-zero-entry", lambda: _ints() // pf.to_tensor([1, 0, 2]),
      ZeroDivisionError, "integer division by zero"),
    E("remainder-int-by-zero", lambda: _ints() % 0, ZeroDivisionError,
      "remainder: integer division by zero"),
    E("mod-int-zero-entry", lambda: pf.mod(_ints(), pf.to_tensor([0, 1, 2])),
      ZeroDivisionError, "remainder: integer division by zero"),
    E("floor_divide-jit-int-by-zero",
      lambda: pf.jit(lambda a, b: a // b)(_ints(), pf.to_tensor([1, 0, 2])),
      ZeroDivisionError, "integer division by zero"),
    E("pow-str", lambda: pf.pow(_v(), "a"), TypeError, "'a' (str)"),
    E("maximum-shapes", lambda: pf.maximum(_v(), pf.ones([2])), ValueError,
      "cannot be broadcast"),
    E("where-shapes", lambda: pf.where(pf.ones([2]) > 0, _x(), pf.ones([4])), ValueError,
      "cannot be broadcast"),
    E("lerp-shapes", lambda: pf.lerp(_v(), pf.ones([4]), 0.5), ValueError,
      "cannot be broadcast"),
    E("matmul-shapes", lambda: pf.matmul(_x(), _x()), ValueError,
      "matmul: shapes [2, 3] and [2, 3] are not aligned"),
    E("matmul-0d", lambda: pf.matmul(pf.to_tensor(2.0), pf.to_tensor(3.0)), ValueError,
      "matmul needs at least 1-d operands"),
    E("dot-shapes", lambda: pf.dot(_v(), pf.ones([4])), ValueError,
      "dot needs two 1-d or 2-d tensors of the same shape"),
    E("maximum-complex", lambda: pf.maximum(pf.to_tensor([1j]), pf.to_tensor([2j])),
      pf.PrimitiveError, "maximum is not defined for complex tensors"),
]

REDUCTIONS = [
    E("sum-axis-out-of-range", lambda: pf.sum(_x(), axis=5), ValueError,
      "axis 5 is out of range for a tensor with 2 dims"),
    E("sum-float-axis", lambda: pf.sum(_x(), axis=1.0), TypeError, "axis must be an int"),
    E("sum-str-axis", lambda: pf.sum(_x(), axis="a"), TypeError, "axis must be an int"),
    E("sum-repeated-axis", lambda: pf.sum(_x(), axis=[0, 0]), ValueError,
      "names dim 0 twice"),
    E("sum-bool-axis", lambda: pf.sum(_x(), axis=True), TypeError, "got True (bool)"),
    E("mean-negative-axis", lambda: pf.mean(_x(), axis=-3), ValueError,
      "axis -3 is out of range"),
    E("mean-float-axis-list", lambda: pf.mean(_x(), axis=[0, 1.5]), TypeError,
      "axis[1] must be an int"),
    E("max-empty", lambda: pf.max(pf.zeros([0])), ValueError, "max of an empty tensor"),
    E("min-empty-axis", lambda: pf.min(pf.zeros([2, 0]), axis=1), ValueError,
      "min of an empty tensor (shape [2, 0]"),
    E("argmax-empty", lambda: pf.argmax(pf.zeros([0])), ValueError,
      "argmax of an empty tensor"),
    E("argmin-empty", lambda: pf.argmin(pf.zeros([3, 0]), axis=1), ValueError,
      "argmin of an empty tensor"),
    E("argmax-list-axis", lambda: pf.argmax(_x(), axis=[0, 1]), TypeError,
      "argmax: axis must be an int"),
    E("argmax-float-dtype", lambda: pf.argmax(_x(), dtype="float32"), TypeError,
      "argmax: dtype must be an integer dtype"),
    E("norm-negative-p", lambda: pf.norm(_v(), p=-1), ValueError, "norm: unsupported p=-1"),
    E("norm-str-p", lambda: pf.norm(_v(), p="nuc"), ValueError, "norm: unsupported p='nuc'"),
    E("norm-inf-empty", lambda: pf.norm(pf.zeros([0]), p=inf), ValueError,
      "norm with p=inf of an empty tensor"),
    E("cumsum-axis", lambda: pf.cumsum(_v(), axis=3), ValueError, "axis 3 is out of range"),
    E("prod-axis", lambda: pf.prod(_x(), axis=4), ValueError, "axis 4 is out of range"),
    E("std-float-axis", lambda: pf.std(_x(), axis=0.5), TypeError, "axis must be an int"),
    E("var-repeated-axis", lambda: pf.var(_x(), axis=[1, -1]), ValueError,
      "names dim 1 twice"),
    E("logsumexp-axis", lambda: pf.logsumexp(_x(), axis=2), ValueError,
      "axis 2 is out of range"),
    E("all-axis", lambda: pf.all(_x() > 0, axis=3), ValueError, "axis 3 is out of range"),
]

SHAPES = [
    E("reshape-float-size", lambda: pf.reshape(_x(), [2.5, 2]), TypeError,
      "reshape: shape[0] must be an int"),
    E("reshape-str-size", lambda: pf.reshape(_x(), ["a"]), TypeError,
      "reshape: shape[0] must be an int"),
    E("reshape-bool-size", lambda: pf.reshape(_x(), [True, 6]), TypeError,
      "reshape: shape[0] must be an int"),
    E("reshape-float-shape", lambda: _x().reshape(6.0), TypeError, "reshape: shape"),
    E("reshape-count", lambda: pf.reshape(_x(), [4, 2]), ValueError,
      "cannot reshape a tensor of shape [2, 3] (6 elements) into [4, 2] (8 elements)"),
    E("reshape-two-inferred", lambda: pf.reshape(_x(), [-1, -1]), ValueError,
      "only one dim may be -1"),
    E("reshape-negative", lambda: pf.reshape(_x(), [-2, 3]), ValueError,
      "dims must be >= 0 or -1"),
    E("reshape-inferred-mismatch", lambda: pf.reshape(_x(), [-1, 4]), ValueError,
      "cannot reshape a tensor of shape [2, 3]"),
    E("expand-float-size", lambda: pf.expand(_v(), [2.5, 3]), TypeError,
      "expand: shape[0] must be an int"),
    E("expand-mismatch", lambda: pf.expand(_v(), [2, 4]), ValueError,
      "cannot be broadcast together"),
    E("expand-fewer-dims", lambda: pf.expand(_x(), [3]), ValueError,
      "expand: shape [3] has fewer dims than the input's [2, 3]"),
    E("expand-negative", lambda: pf.expand(_v(), [-2, 3]), ValueError,
      "expand: shape entries must be >= 0 or -1"),
    E("expand-new-dim-inferred", lambda: pf.expand(_v(), [-1, 3]), ValueError,
      "expand: -1 in shape [-1, 3] names a new leading dim"),
    E("tile-float", lambda: pf.tile(_v(), [2.5]), TypeError,
      "tile: repeat_times[0] must be an int"),
    E("tile-negative", lambda: pf.tile(_v(), [-1]), ValueError,
      "tile: repeat_times must be >= 0"),
    E("tile-str", lambda: pf.tile(_v(), "a"), TypeError, "tile: repeat_times"),
    E("transpose-repeated", lambda: pf.transpose(_x(), [0, 0]), ValueError,
      "perm [0, 0] is not a permutation of range(2)"),
    E("transpose-short", lambda: pf.transpose(_x(), [0]), ValueError, "not a permutation"),
    E("transpose-float", lambda: pf.transpose(_x(), [0.0, 1.0]), TypeError,
      "transpose: perm[0] must be an int"),
    E("t-3d", lambda: pf.t(pf.ones([2, 2, 2])), ValueError, "t() expects at most 2 dims"),
    E("squeeze-axis", lambda: pf.squeeze(_x(), 5), ValueError, "axis 5 is out of range"),
    E("unsqueeze-float", lambda: pf.unsqueeze(_x(), 1.5), TypeError,
      "unsqueeze: axis must be an int"),
    E("unsqueeze-axis", lambda: pf.unsqueeze(_x(), 5), ValueError, "axis 5 is out of range"),
    E("flatten-float", lambda: pf.flatten(_x(), 0.5), TypeError,
      "flatten: start_axis must be an int"),
    E("flatten-order", lambda: pf.flatten(_x(), 1, 0), ValueError,
      "flatten: start_axis 1 is after stop_axis 0"),
    E("concat-tensor", lambda: pf.concat(_x()), TypeError,
      "concat takes a list or tuple of tensors, got a Tensor of shape [2, 3]"),
    E("concat-1d-tensor", lambda: pf.concat(_v()), TypeError,
      "concat takes a list or tuple of tensors"),
    E("concat-empty", lambda: pf.concat([]), ValueError, "concat needs at least one tensor"),
    E("concat-shapes", lambda: pf.concat([_x(), pf.ones([2, 4])]), ValueError,
      "tensor 1 has shape [2, 4] but tensor 0 has [2, 3]"),
    E("concat-axis", lambda: pf.concat([_x(), _x()], axis=5), ValueError,
      "axis 5 is out of range"),
    E("concat-0d", lambda: pf.concat([pf.to_tensor(1.0), pf.to_tensor(2.0)]), ValueError,
      "zero-dimensional tensors cannot be concatenated; use stack"),
    E("stack-tensor", lambda: pf.stack(_x()), TypeError,
      "stack takes a list or tuple of tensors"),
    E("stack-shapes", lambda: pf.stack([_x(), pf.ones([2, 4])]), ValueError,
      "tensor 1 has shape [2, 4] but tensor 0 has [2, 3]; all must be equal"),
    E("stack-empty", lambda: pf.stack([]), ValueError, "stack needs at least one tensor"),
    E("split-uneven", lambda: pf.split(_v(), 2), ValueError,
      "size 3 of axis 0 is not divisible by 2"),
    E("split-float", lambda: pf.split(_v(), 1.5), TypeError,
      "split: num_or_sections must be an int"),
    E("split-zero", lambda: pf.split(_v(), 0), ValueError,
      "split: num_or_sections must be >= 1"),
    E("split-sections-sum", lambda: pf.split(_v(), [1, 1]), ValueError,
      "sections [1, 1] do not add up to 3"),
    E("split-two-inferred", lambda: pf.split(_v(), [-1, -1]), ValueError,
      "at most one -1"),
    E("chunk-zero", lambda: pf.chunk(_v(), 0), ValueError, "chunk: chunks must be >= 1"),
    E("unbind-axis", lambda: pf.unbind(_x(), 5), ValueError, "axis 5 is out of range"),
    E("flip-axis", lambda: pf.flip(_x(), 5), ValueError, "axis 5 is out of range"),
    E("flip-repeated-axis", lambda: pf.flip(_x(), [0, 0]), ValueError, "names dim 0 twice"),
    E("moveaxis-lengths", lambda: pf.moveaxis(_x(), [0, 1], [0]), ValueError,
      "moveaxis: source [0, 1] and destination [0] name different numbers of dims"),
    E("moveaxis-float", lambda: pf.moveaxis(_x(), 1.5, 0), TypeError,
      "moveaxis: source must be an int"),
    E("tril-1d", lambda: pf.tril(_v()), ValueError, "tril/triu need at least 2 dims"),
    E("triu-float-diagonal", lambda: pf.triu(_x(), 0.5), TypeError,
      "tril/triu: diagonal must be an int"),
    E("broadcast_tensors-shapes", lambda: pf.broadcast_tensors([_x(), pf.ones([4])]),
      ValueError, "cannot be broadcast together"),
]

LINALG = [
    E("inv-not-square", lambda: LA.inv(_x()), ValueError, "inv: expects square matrices"),
    E("inv-1d", lambda: LA.inv(_v()), ValueError, "inv: expects a matrix (at least 2 dims)"),
    E("inv-int", lambda: LA.inv(pf.to_tensor([[1, 0], [0, 1]])), TypeError,
      "inv: expects a floating-point matrix, got int64"),
    E("inv-singular", lambda: LA.inv(pf.zeros([2, 2])), pf.PrimitiveError,
      "the matrix is singular"),
    E("solve-shapes", lambda: LA.solve(pf.eye(2), pf.ones([3])), ValueError,
      "solve: shapes"),
    E("cholesky-not-positive", lambda: LA.cholesky(-pf.eye(2)), pf.PrimitiveError,
      "not positive definite"),
    E("det-not-square", lambda: LA.det(_x()), ValueError, "det: expects square matrices"),
    E("eigh-not-square", lambda: LA.eigh(_x()), ValueError, "eigh: expects square matrices"),
    E("svd-1d", lambda: LA.svd(_v()), ValueError, "svd: expects a matrix"),
    E("svd-full-wide", lambda: LA.svd(_x(), full_matrices=True), ValueError,
      "full_matrices=True is not supported for non-square input"),
    E("qr-mode", lambda: LA.qr(_x(), mode="bad"), ValueError, "qr: mode must be"),
    E("matrix_power-float", lambda: LA.matrix_power(pf.eye(2), 1.5), TypeError,
      "matrix_power: n must be an int"),
    E("matrix_power-not-square", lambda: LA.matrix_power(_x(), 2), ValueError,
      "matrix_power: expects square matrices"),
    E("matrix_norm-p", lambda: LA.matrix_norm(pf.eye(2), p="bad"), ValueError,
      "matrix_norm: unsupported p='bad'"),
    E("vector_norm-p", lambda: LA.vector_norm(_v(), p="bad"), ValueError, "unsupported p"),
    E("lstsq-shapes", lambda: LA.lstsq(_x(), pf.ones([3, 1])), ValueError,
      "lstsq: shapes [2, 3] and [3, 1] do not match"),
    E("triangular_solve-shapes", lambda: LA.triangular_solve(pf.eye(2), pf.ones([3, 1])),
      ValueError, "triangular_solve: shapes"),
    E("pinv-1d", lambda: LA.pinv(_v()), ValueError, "pinv: expects a matrix"),
    E("matrix_power-bool", lambda: LA.matrix_power(pf.eye(2), True), TypeError,
      "matrix_power: n must be an int, got True"),
    E("matrix_norm-axis-range", lambda: LA.matrix_norm(pf.eye(2), axis=(0, 5)), ValueError,
      "matrix_norm: axis [0, 5] is out of range"),
    E("matrix_norm-one-axis", lambda: LA.matrix_norm(pf.eye(2), axis=0), ValueError,
      "matrix_norm: axis must name two dims"),
]

FOURIER = [
    E("fft-float-n", lambda: FFT.fft(_v(), n=2.5), TypeError, "fft: n must be an int"),
    E("fft-zero-n", lambda: FFT.fft(_v(), n=0), ValueError,
      "fft: transform length 0 must be >= 1"),
    E("fft-bool-n", lambda: FFT.fft(_v(), n=True), TypeError, "fft: n must be an int"),
    E("fft-axis", lambda: FFT.fft(_v(), axis=5), ValueError,
      "fft: axis 5 is out of range for a tensor of shape [3]"),
    E("fft-float-axis", lambda: FFT.fft(_v(), axis=0.5), TypeError, "fft: axis must be"),
    E("fft-norm", lambda: FFT.fft(_v(), norm="bad"), ValueError, "fft: norm must be one of"),
    E("ifft-float-n", lambda: FFT.ifft(_v(), n=4.0), TypeError, "ifft: n must be an int"),
    E("rfft-complex", lambda: FFT.rfft(pf.to_tensor([1j, 2j])), TypeError,
      "rfft expects a real tensor"),
    E("irfft-float-n", lambda: FFT.irfft(_v(), n=2.5), TypeError, "irfft: n must be an int"),
    E("hfft-float-n", lambda: FFT.hfft(_v(), n=1.5), TypeError, "hfft: n must be an int"),
    E("ihfft-zero-n", lambda: FFT.ihfft(_v(), n=0), ValueError, "transform length 0"),
    E("fft2-float-s", lambda: FFT.fft2(_x(), s=[2.5, 3]), TypeError,
      "fft2: s[0] must be an int"),
    E("fft2-1d", lambda: FFT.fft2(_v()), ValueError, "fft2: axis -2 is out of range"),
    E("ifft2-float-axes", lambda: FFT.ifft2(_x(), axes=(0.0, 1)), TypeError,
      "ifft2: axes[0] must be an int"),
    E("fftn-s-axes-lengths", lambda: FFT.fftn(_x(), s=[2], axes=[0, 1]), ValueError,
      "fftn: s=(2,) and axes=(0, 1) differ in length"),
    E("fftn-repeated-axes", lambda: FFT.fftn(_x(), axes=[0, 0]), ValueError,
      "fftn: axes (0, 0) must be distinct"),
    E("rfftn-float-s", lambda: FFT.rfftn(_x(), s=(2, 1.5)), TypeError,
      "rfftn: s[1] must be an int"),
    E("irfftn-zero-s", lambda: FFT.irfftn(_x(), s=(2, 0)), ValueError,
      "irfftn: transform length 0 must be >= 1"),
    E("fftfreq-float-n", lambda: FFT.fftfreq(2.5), TypeError, "fftfreq: n must be an int"),
    E("fftfreq-zero-spacing", lambda: FFT.fftfreq(4, d=0), ValueError,
      "fftfreq: d (the sample spacing) must be a nonzero number"),
    E("rfftfreq-negative-n", lambda: FFT.rfftfreq(-1), ValueError,
      "rfftfreq: n must be >= 0"),
    E("fftshift-axes", lambda: FFT.fftshift(_v(), axes=3), ValueError,
      "fftshift: axis 3 is out of range"),
]

FUNCTIONAL = [
    E("softmax-axis", lambda: F.softmax(_v(), axis=3), ValueError, "axis 3 is out of range"),
    E("softmax-float-axis", lambda: F.softmax(_v(), axis=0.5), TypeError,
      "axis must be an int"),
    E("log_softmax-axis", lambda: F.log_softmax(_x(), axis=-3), ValueError,
      "axis -3 is out of range"),
    E("relu-str", lambda: F.relu("a"), TypeError, "'a' (str)"),
    E("leaky_relu-str-slope", lambda: F.leaky_relu(_v(), negative_slope="a"), TypeError,
      "leaky_relu: negative_slope must be a real number"),
    E("elu-str-alpha", lambda: F.elu(_v(), alpha="a"), TypeError,
      "elu: alpha must be a real number"),
    E("gelu-approximate", lambda: F.gelu(_v(), approximate="bad"), ValueError,
      "gelu: approximate must be True/False (or 'tanh'/'none'), got 'bad'"),
    E("softplus-zero-beta", lambda: F.softplus(_v(), beta=0), ValueError,
      "softplus: beta must be nonzero"),
    E("layer_norm-shape", lambda: F.layer_norm(_x(), [4]), ValueError,
      "normalized_shape [4] does not match the last dims of the input shape [2, 3]"),
    E("layer_norm-negative-epsilon", lambda: F.layer_norm(_x(), [3], epsilon=-1.0),
      ValueError, "layer_norm: epsilon must be >= 0"),
    E("layer_norm-weight-shape", lambda: F.layer_norm(_x(), [3], weight=pf.ones([4])),
      ValueError, "weight/bias shape [4] must equal the normalized shape [3]"),
    E("rms_norm-shape", lambda: F.rms_norm(_x(), [4]), ValueError,
      "normalized_shape [4] does not match"),
    E("rms_norm-str-epsilon", lambda: F.rms_norm(_x(), epsilon="a"), TypeError,
      "rms_norm: epsilon must be a real number"),
    E("normalize-p", lambda: F.normalize(_x(), p=0), ValueError, "norm: unsupported p=0"),
    E("normalize-negative-epsilon", lambda: F.normalize(_x(), epsilon=-1.0), ValueError,
      "normalize: epsilon must be >= 0"),
    E("linear-shapes", lambda: F.linear(_x(), pf.ones([4, 2])), ValueError,
      "linear: input has 3 features (shape [2, 3]) but weight expects 4"),
]

LAYERS = [
    E("Linear-zero-features", lambda: pf.nn.Linear(0, 3), ValueError,
      "Linear: in_features must be a positive int"),
    E("Linear-float-features", lambda: pf.nn.Linear(2.5, 3), ValueError,
      "in_features must be a positive int, got 2.5"),
    E("Linear-input-shape", lambda: pf.nn.Linear(4, 3)(_x()), ValueError,
      "expects input of shape [..., 4], got [2, 3]"),
    E("create_parameter-float-shape", lambda: pf.create_parameter([2.5], "float32"),
      TypeError, "shape[0] must be an int"),
    E("create_parameter-zero-size", lambda: pf.create_parameter([0], "float32"), ValueError,
      "every dimension of shape must be positive"),
    E("initializer-negative-std",
      lambda: pf.create_parameter([2], "float32",
                                  default_initializer=pf.nn.initializer.Normal(0.0, -1.0)),
      ValueError, "Normal initializer: std must be >= 0"),
    E("Dropout-str-p", lambda: pf.nn.Dropout(p="a"), TypeError,
      "Dropout: p must be a real number"),
    E("LayerNorm-float-shape", lambda: pf.nn.LayerNorm(2.5), TypeError,
      "LayerNorm: normalized_shape must be an int"),
    E("LayerNorm-negative-epsilon", lambda: pf.nn.LayerNorm(3, epsilon=-1.0), ValueError,
      "LayerNorm: epsilon must be >= 0"),
    E("RMSNorm-zero-shape", lambda: pf.nn.RMSNorm(0), ValueError,
      "RMSNorm: normalized_shape must be a positive int"),
    E("LeakyReLU-str-slope", lambda: pf.nn.LeakyReLU("a"), TypeError,
      "LeakyReLU: negative_slope must be a real number"),
    E("ELU-str-alpha", lambda: pf.nn.ELU("a"), TypeError, "ELU: alpha must be a real number"),
    E("GELU-approximate", lambda: pf.nn.GELU(approximate="bad"), ValueError,
      "GELU: approximate must be True/False"),
    E("Softplus-str-beta", lambda: pf.nn.Softplus(beta="x"), TypeError,
      "Softplus: beta must be a real number"),
    E("Softmax-layer-float-axis", lambda: pf.nn.Softmax(axis=1.5)(_x()), TypeError,
      "axis must be an int"),
    E("MLP-zero-width", lambda: pf.nn.MLP([2, 0, 1]), ValueError,
      "MLP: sizes must list at least two positive ints"),
    E("SpectralConv1D-modes", lambda: pf.nn.SpectralConv1D(2, 2, 1.5), ValueError,
      "SpectralConv1D: modes must be a positive int, got 1.5"),
    E("Sequential-not-a-layer", lambda: pf.nn.Sequential(5), TypeError,
      "Sequential holds Layers, got int"),
    E("ClipGradByNorm-negative", lambda: pf.nn.ClipGradByNorm(-1.0), ValueError,
      "ClipGradByNorm: clip_norm must be > 0"),
    E("ClipGradByValue-order", lambda: pf.nn.ClipGradByValue(min=1.0, max=-1.0), ValueError,
      "ClipGradByValue: min (1.0) must be <= max (-1.0)"),
    E("set_default_dtype-int", lambda: pf.set_default_dtype("int64"), TypeError,
      "set_default_dtype expects a floating dtype"),
    E("set_num_threads-zero", lambda: pf.set_num_threads(0), ValueError,
      "the number of threads must be >= 1"),
    E("set_device-unknown", lambda: pf.set_device("tpu"), ValueError, "unknown device 'tpu'"),
]

OPTIMIZERS = [
    E("SGD-negative-lr", lambda: OPT.SGD(learning_rate=-1.0, parameters=_p()), ValueError,
      "SGD: learning_rate must be >= 0"),
    E("SGD-nan-lr", lambda: OPT.SGD(learning_rate=nan, parameters=_p()), ValueError,
      "SGD: learning_rate must be >= 0, got nan"),
    E("SGD-str-lr", lambda: OPT.SGD(learning_rate="a", parameters=_p()), TypeError,
      "SGD: learning_rate must be a float"),
    E("SGD-no-parameters", lambda: OPT.SGD(learning_rate=0.1), ValueError,
      "SGD needs the parameters to optimize"),
    E("SGD-tensor-parameters", lambda: OPT.SGD(learning_rate=0.1, parameters=pf.ones([2])),
      TypeError, "parameters must be a list of tensors, got a single Tensor"),
    E("SGD-empty-parameters", lambda: OPT.SGD(learning_rate=0.1, parameters=[]), ValueError,
      "SGD got an empty parameter list"),
    E("SGD-negative-weight_decay",
      lambda: OPT.SGD(learning_rate=0.1, parameters=_p(), weight_decay=-1.0), ValueError,
      "SGD: weight_decay must be >= 0"),
    E("SGD-str-weight_decay",
      lambda: OPT.SGD(learning_rate=0.1, parameters=_p(), weight_decay="a"), TypeError,
      "SGD: weight_decay must be a float"),
    E("Adam-beta1", lambda: OPT.Adam(beta1=1.5, parameters=_p()), ValueError,
      "Adam: beta1 must be in [0, 1)"),
    E("Adam-beta2", lambda: OPT.Adam(beta2=-0.1, parameters=_p()), ValueError,
      "Adam: beta2 must be in [0, 1)"),
    E("Adam-epsilon", lambda: OPT.Adam(epsilon=-1e-8, parameters=_p()), ValueError,
      "Adam: epsilon must be >= 0"),
    E("AdamW-negative-weight_decay", lambda: OPT.AdamW(weight_decay=-1.0, parameters=_p()),
      ValueError, "AdamW: weight_decay must be >= 0"),
    E("Momentum-negative-momentum", lambda: OPT.Momentum(momentum=-0.5, parameters=_p()),
      ValueError, "Momentum: momentum must be >= 0"),
    E("LBFGS-history_size", lambda: OPT.LBFGS(history_size=0, parameters=_p()), ValueError,
      "LBFGS: history_size must be a positive int"),
    E("LBFGS-line_search_fn", lambda: OPT.LBFGS(line_search_fn="bad", parameters=_p()),
      ValueError, "LBFGS: line_search_fn must be None or 'strong_wolfe'"),
]

DATA = [
    E("DataLoader-zero-batch_size", lambda: IO.DataLoader(_ds(), batch_size=0), ValueError,
      "batch_size must be a positive int, got 0"),
    E("DataLoader-float-batch_size", lambda: IO.DataLoader(_ds(), batch_size=2.5),
      ValueError, "batch_size must be a positive int, got 2.5"),
    E("DataLoader-bool-batch_size", lambda: IO.DataLoader(_ds(), batch_size=True),
      ValueError, "batch_size must be a positive int, got True"),
    E("DataLoader-negative-num_workers",
      lambda: IO.DataLoader(_ds(), batch_size=2, num_workers=-1), ValueError,
      "DataLoader: num_workers must be an int >= 0"),
    E("DataLoader-none-dataset", lambda: IO.DataLoader(None, batch_size=2), TypeError,
      "DataLoader: dataset must support indexing"),
    E("DataLoader-collate_fn", lambda: IO.DataLoader(_ds(), collate_fn=5), TypeError,
      "DataLoader: collate_fn must be callable"),
    E("DataLoader-str-shuffle", lambda: IO.DataLoader(_ds(), shuffle="yes"), TypeError,
      "shuffle must be True or False"),
    E("BatchSampler-str-drop_last", lambda: IO.BatchSampler(_ds(), drop_last=1), TypeError,
      "drop_last must be True or False"),
    E("BatchSampler-no-source", lambda: IO.BatchSampler(batch_size=2), ValueError,
      "give exactly one of dataset and sampler"),
    E("TensorDataset-lengths", lambda: IO.TensorDataset([pf.ones([4, 2]), pf.ones([3])]),
      ValueError, "different first dims"),
]

CASES = (CREATION + RANDOM + TENSOR_PROTOCOL + INDEXING + MATH + REDUCTIONS + SHAPES + LINALG
         + FOURIER + FUNCTIONAL + LAYERS + OPTIMIZERS + DATA)


def test_case_ids_are_unique_and_the_table_is_large():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert len(CASES) >= 150


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_error_input(case):
    with pytest.raises(case.error) as info:
        case.call()
    message = str(info.value)
    assert case.fragment in message, f"{case.id}: {type(info.value).__name__}: {message}"
    # the error talks about the function called, never a bare NumPy message behind
    # "primitive '...' failed" (which names an internal primitive instead)
    if case.error is not pf.PrimitiveError:
        assert not isinstance(info.value, pf.PrimitiveError), message
        assert "primitive '" not in message, message
