"""Shape and indexing ops: reshape, broadcast, transpose, slices, pads, joins, splits,
gather/scatter and Python indexing."""

from __future__ import annotations

import numpy as np

import primflow as pf
from primflow import prims

from .base import OpInfo, _ints, _s, binary, fixed, unary, with_params


def _np_pad(x, value, config):
    shape, index = [], []
    for n, (lo, hi, interior) in zip(x.shape, config):
        shape.append(lo + hi + n + max(n - 1, 0) * interior)
        index.append(lo + np.arange(n) * (interior + 1))
    out = np.full(shape, float(value))
    out[np.ix_(*index)] = x
    return out


def _np_scatter_add(operand, indices, updates):
    out = np.array(operand, dtype=np.float64)
    k = indices.shape[-1]
    flat_idx = indices.reshape(-1, k)
    flat_upd = updates.reshape((flat_idx.shape[0],) + operand.shape[k:])
    for row, upd in zip(flat_idx, flat_upd):
        out[tuple(row)] += upd
    return out


def _np_setitem(x, value, key):
    out = np.array(x, dtype=np.float64)
    out[key] = value
    return out


def _pf_setitem(x, value, key):
    y = pf.multiply(x, 1.0)  # a non-leaf copy: leaves that need grad refuse in-place writes
    y[key] = value
    return y



ENTRIES = [
    # ---- shape primitives ----
    OpInfo("reshape", lambda x, shape: pf.reshape(x, shape),
           lambda x, shape: np.reshape(x, [x.shape[i] if s == 0 else s
                                           for i, s in enumerate(shape)]),
           with_params([((2, 3), {"shape": [3, 2]}), ((2, 3, 2), {"shape": [0, -1]}),
                        ((), {"shape": [1, 1]}), ((6,), {"shape": [2, 1, 3]})]),
           prims=("reshape",), covers=("reshape", "view")),
    OpInfo("broadcast_in_dim",
           lambda x, **p: prims.broadcast_in_dim(x, **p),
           lambda x, shape, broadcast_dimensions: np.broadcast_to(
               x.reshape([x.shape[broadcast_dimensions.index(d)] if d in broadcast_dimensions
                          else 1 for d in range(len(shape))]), shape),
           with_params([((3,), {"shape": (2, 3), "broadcast_dimensions": (1,)}),
                        ((3, 1), {"shape": (3, 2, 4), "broadcast_dimensions": (0, 2)}),
                        ((), {"shape": (2, 2), "broadcast_dimensions": ()}),
                        ((2,), {"shape": (2, 3), "broadcast_dimensions": (0,)})]),
           prims=("broadcast_in_dim",), covers=()),
    OpInfo("expand", lambda x, shape: pf.expand(x, shape),
           lambda x, shape: np.broadcast_to(x, [x.shape[i - len(shape) + x.ndim] if s == -1
                                                else s for i, s in enumerate(shape)]),
           with_params([((3, 1), {"shape": [3, 4]}), ((3,), {"shape": [2, -1]}),
                        ((), {"shape": [2]})]),
           prims=("broadcast_in_dim",), covers=("expand",)),
    OpInfo("broadcast_tensors", lambda *xs: pf.broadcast_tensors(list(xs)),
           lambda *xs: list(np.broadcast_arrays(*xs)),
           binary(((((3, 1), (4,))), (((2, 3), ()))),),
           prims=("broadcast_in_dim",), covers=("broadcast_tensors",)),
    OpInfo("transpose", lambda x, perm: pf.transpose(x, perm),
           lambda x, perm: np.transpose(x, perm),
           with_params([((2, 3, 2), {"perm": [2, 0, 1]}), ((2, 3), {"perm": [1, 0]}),
                        ((2, 3, 2), {"perm": [0, 2, 1]})]),
           prims=("transpose",), covers=("transpose",)),
    OpInfo("t", pf.t, lambda x: x.T, unary((2, 3), (3,)), prims=("transpose",),
           covers=("t",)),
    OpInfo("moveaxis", lambda x, s, d: pf.moveaxis(x, s, d),
           lambda x, s, d: np.moveaxis(x, s, d),
           with_params([((2, 3, 2), {"s": 0, "d": -1}), ((2, 3, 2), {"s": [0, 1], "d": [2, 0]})]),
           prims=("transpose",), covers=("moveaxis",)),
    OpInfo("slice", lambda x, **p: prims.slice(x, **p),
           lambda x, start, limit, strides: x[tuple(
               slice(s, e, st) for s, e, st in zip(start, limit, strides))],
           with_params([((4, 5), {"start": (1, 0), "limit": (4, 5), "strides": (2, 2)}),
                        ((5,), {"start": (1,), "limit": (4,), "strides": (1,)}),
                        ((3, 4), {"start": (0, 1), "limit": (3, 4), "strides": (3, 2)})]),
           prims=("slice",), covers=()),
    OpInfo("pad", lambda x, v, config: prims.pad(x, v, config=config), _np_pad,
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, ())),
                    {"config": ((1, 0, 1), (0, 2, 0))}, desc="interior"),
                 _s(lambda i, r: (i.make(r, (3,)), i.make(r, ())),
                    {"config": ((2, 1, 2),)}),
                 _s(lambda i, r: (i.make(r, (2, 2)), i.make(r, ())),
                    {"config": ((0, 0, 0), (1, 1, 0))})),
           prims=("pad",), covers=()),
    OpInfo("concatenate", lambda *xs, axis=0: pf.concat(list(xs), axis=axis),
           lambda *xs, axis=0: np.concatenate(xs, axis=axis),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (1, 3))), {"axis": 0}),
                 _s(lambda i, r: (i.make(r, (2, 1)), i.make(r, (2, 3)), i.make(r, (2, 2))),
                    {"axis": -1}),
                 _s(lambda i, r: (i.make(r, (3,)), i.make(r, (2,))), {})),
           prims=("concatenate",), covers=("concat", "cat")),
    OpInfo("stack", lambda *xs, axis=0: pf.stack(list(xs), axis=axis),
           lambda *xs, axis=0: np.stack(xs, axis=axis),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (2, 3))), {"axis": 1}),
                 _s(lambda i, r: (i.make(r, ()), i.make(r, ()), i.make(r, ())), {}),
                 _s(lambda i, r: (i.make(r, (3,)), i.make(r, (3,))), {"axis": -1})),
           prims=("concatenate",), covers=("stack",)),
    OpInfo("split", lambda x, sections, axis=0: pf.split(x, sections, axis),
           lambda x, sections, axis=0: np.split(
               x, sections if isinstance(sections, int) else np.cumsum(
                   [s if s != -1 else 0 for s in sections])[:-1], axis=axis),
           with_params([((4, 3), {"sections": 2}), ((2, 5), {"sections": [2, 3], "axis": 1})]),
           prims=("slice",), covers=("split",)),
    OpInfo("chunk", lambda x, chunks, axis=0: pf.chunk(x, chunks, axis),
           lambda x, chunks, axis=0: np.split(x, chunks, axis=axis),
           with_params([((2, 6), {"chunks": 3, "axis": 1})]), prims=("slice",),
           covers=("chunk",)),
    OpInfo("unbind", lambda x, axis=0: pf.unbind(x, axis),
           lambda x, axis=0: [np.take(x, i, axis=axis) for i in range(x.shape[axis])],
           with_params([((3, 2), {}), ((2, 3), {"axis": 1})]), prims=("slice",),
           covers=("unbind",)),
    OpInfo("squeeze", lambda x, **kw: pf.squeeze(x, **kw),
           lambda x, axis=None: np.squeeze(x, axis=axis),
           with_params([((1, 3, 1), {}), ((1, 3, 1), {"axis": 2}), ((1,), {})]),
           prims=("reshape",), covers=("squeeze",)),
    OpInfo("unsqueeze", lambda x, axis: pf.unsqueeze(x, axis),
           lambda x, axis: np.expand_dims(x, axis),
           with_params([((2, 3), {"axis": 1}), ((), {"axis": 0}),
                        ((3,), {"axis": [0, 2]})]),
           prims=("reshape",), covers=("unsqueeze",)),
    OpInfo("flatten", lambda x, **kw: pf.flatten(x, **kw),
           lambda x, start_axis=0, stop_axis=-1: x.reshape(
               x.shape[:start_axis] + (-1,) + x.shape[stop_axis % x.ndim + 1:]),
           with_params([((2, 3, 2), {}), ((2, 3, 2), {"start_axis": 1})]),
           prims=("reshape",), covers=("flatten",)),
    OpInfo("flip", lambda x, axis: pf.flip(x, axis), lambda x, axis: np.flip(x, axis),
           with_params([((2, 3), {"axis": 1}), ((2, 3), {"axis": [0, 1]}),
                        ((4,), {"axis": 0})]),
           prims=("gather",), covers=("flip",)),
    OpInfo("tile", lambda x, reps: pf.tile(x, reps), lambda x, reps: np.tile(x, reps),
           with_params([((2, 3), {"reps": [2, 1]}), ((3,), {"reps": [2, 2]}),
                        ((), {"reps": [3]})]),
           prims=("broadcast_in_dim",), covers=("tile",)),
    OpInfo("tril", lambda x, diagonal=0: pf.tril(x, diagonal),
           lambda x, diagonal=0: np.tril(x, diagonal),
           with_params([((3, 4), {}), ((3, 3), {"diagonal": -1}), ((2, 3, 3), {"diagonal": 1})]),
           prims=("select", "iota"), covers=("tril",)),
    OpInfo("triu", lambda x, diagonal=0: pf.triu(x, diagonal),
           lambda x, diagonal=0: np.triu(x, diagonal),
           with_params([((3, 4), {}), ((2, 3, 3), {"diagonal": -1})]),
           prims=("select",), covers=("triu",)),

    # ---- indexing ----
    OpInfo("gather", lambda x, idx: prims.gather(x, idx),
           lambda x, idx: x[tuple(idx[..., k] for k in range(idx.shape[-1]))],
           fixed(_s(lambda i, r: (i.make(r, (4, 3)), np.array([[2], [0], [2], [3], [2]])),
                    desc="repeated rows"),
                 _s(lambda i, r: (i.make(r, (3, 4, 2)), _ints(r, (2, 3, 2), 0, 3)),
                    desc="k=2 with batch (2,3)")),
           prims=("gather",), covers=()),
    OpInfo("scatter_add", lambda x, idx, upd: prims.scatter_add(x, idx, upd),
           _np_scatter_add,
           fixed(_s(lambda i, r: (i.make(r, (4, 3)), np.array([[2], [0], [2], [3], [2]]),
                                  i.make(r, (5, 3))), desc="repeated rows"),
                 _s(lambda i, r: (i.make(r, (3, 4)), np.array([[[0, 1], [2, 3]], [[0, 1],
                                                                                [1, 1]]]),
                                  i.make(r, (2, 2))), desc="k=2 with repeats")),
           prims=("scatter_add",), covers=()),
    OpInfo("index_select", lambda x, index, axis=0: pf.index_select(x, index, axis),
           lambda x, index, axis=0: np.take(x, index, axis=axis),
           fixed(_s(lambda i, r: (i.make(r, (4, 3)), np.array([3, 0, 3])), {"axis": 0}),
                 _s(lambda i, r: (i.make(r, (2, 3)), np.array([2, 1])), {"axis": 1})),
           prims=("gather",), covers=("index_select", "gather")),
    OpInfo("getitem", lambda x, key: x[key], lambda x, key: x[key],
           fixed(*[_s(lambda i, r, s=s: (i.make(r, s),), {"key": k}, desc=d) for s, k, d in [
               ((3, 4), (slice(1, None), slice(None, None, 2)), "basic slices"),
               ((3, 4), (slice(None, None, -1), 1), "negative step"),
               ((3, 4), np.array([2, 0, 2]), "int array with repeats"),
               ((3, 4), (slice(None), np.array([3, 1])), "slice and int array"),
               ((3, 4), np.array([[True, False, True, True], [False] * 4,
                                  [True, False, False, True]]), "bool mask"),
               ((2, 3, 4), (Ellipsis, None, slice(3, 0, -2)), "ellipsis, None, -step"),
               ((3, 4), (np.array([0, 2]), np.array([1, 3])), "two int arrays"),
               ((3, 4), -1, "negative int"),
               ((3, 4), np.array([True, False, True]), "bool on dim 0"),
               ((2, 3, 4), (1, slice(None), np.array([0, 0, 3])), "int then array")]]),
           prims=("slice", "gather"), covers=("getitem",)),
    OpInfo("setitem", _pf_setitem, _np_setitem,
           fixed(_s(lambda i, r: (i.make(r, (3, 4)), i.make(r, (4,))), {"key": 1}),
                 _s(lambda i, r: (i.make(r, (3, 4)), i.make(r, ())),
                    {"key": (slice(None), 2)}),
                 _s(lambda i, r: (i.make(r, (3, 4)), i.make(r, (2, 4))),
                    {"key": np.array([2, 0])})),
           prims=("scatter_add", "select"), covers=("setitem",)),

]
