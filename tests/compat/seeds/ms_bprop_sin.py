# 函数式和对象式融合编程范式 (seed 004), grad算法设计: the backward rule of Sin defined in
# Python and registered. Changed: the imports (bprop_getters lives in primflow.compat.mindspore).
import primflow.compat.mindspore.ops as ops
from primflow.compat.mindspore import bprop_getters

@bprop_getters.register(ops.Sin)
def get_bprop_sin(self):
    """Grad definition for `Sin` operation."""
    cos = ops.Cos()

    def bprop(x, out, dout):
        dx = dout * cos(x)
        return (dx,)

    return bprop
