# 函数式和对象式融合编程范式 (seed 004): training written only with classes. Changed: the
# imports. Added at the end: three steps on a fixed batch (the document builds the trainer
# and stops).
import primflow.compat.mindspore as mindspore
import primflow.compat.mindspore.nn as nn
from primflow.compat.mindspore import value_and_grad

class TrainOneStepCell(nn.Cell):
    def __init__(self, network, optimizer):
        super().__init__()
        self.network = network
        self.optimizer = optimizer
        self.grad_fn = value_and_grad(self.network, None, self.optimizer.parameters)

    def construct(self, *inputs):
        loss, grads = self.grad_fn(*inputs)
        self.optimizer(grads)
        return loss

network = nn.Dense(5, 3)
loss_fn = nn.BCEWithLogitsLoss()
network_with_loss = nn.WithLossCell(network, loss_fn)
optimizer = nn.SGD(network.trainable_params(), 0.001)
trainer = TrainOneStepCell(network_with_loss, optimizer)

import numpy as np  # added from here on
data = mindspore.Tensor(np.linspace(-1.0, 1.0, 20, dtype=np.float32).reshape(4, 5))
label = mindspore.Tensor(np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]], np.float32))
losses = [float(trainer(data, label)) for _ in range(3)]
