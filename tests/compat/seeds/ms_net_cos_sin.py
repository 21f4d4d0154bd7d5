# 函数式和对象式融合编程范式 (seed 004), grad示例: f(x) = cos(sin(x)) as a Cell. Changed: the
# imports (the document's cell [1] imported ops). Added at the end: its gradient at three
# points, f'(x) = -sin(sin(x)) * cos(x) (formula 14).
import primflow.compat.mindspore.ops as ops
import primflow.compat.mindspore.nn as nn

class Net(nn.Cell):
    def __init__(self):
        super(Net, self).__init__()
        self.sin = ops.Sin()
        self.cos = ops.Cos()

    def construct(self, x):
        a = self.sin(x)
        out = self.cos(a)
        return out

import primflow.compat.mindspore as mindspore  # added from here on
import numpy as np
net = Net()
x = mindspore.Tensor(np.array([0.3, 1.0, 2.5], np.float64))
out = net(x)
dx = mindspore.grad(lambda t: net(t).sum())(x)
