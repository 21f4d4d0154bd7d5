# 函数式和对象式融合编程范式 (seed 004), 函数式+面向对象融合编程: the recommended training step.
# Changed: the imports. Added (marked): the document leaves Net's body, lr, epochs and
# dataset as "......" and names its function forword_fn but calls forward_fn, and passes
# optim.parameters though the optimizer is called optimizer; the marked lines fill in a
# two-layer classifier on a fixed 8-sample dataset and the two missing names.
import numpy as np  # added
import primflow.compat.mindspore as mindspore  # added
from primflow.compat.mindspore import nn, value_and_grad  # added: the document's imports

lr, epochs = 0.05, 5  # added

def dataset():  # added: one batch of 8 points of 3 classes
    inputs = np.linspace(-1.0, 1.0, 32, dtype=np.float32).reshape(8, 4)
    targets = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int64)
    yield mindspore.Tensor(inputs), mindspore.Tensor(targets)

# Class definition
class Net(nn.Cell):
    def __init__(self):
        super().__init__()  # added: the body the document elides
        self.hidden = nn.Dense(4, 6, activation="tanh")  # added
        self.out = nn.Dense(6, 3)  # added
    def construct(self, inputs):
        return self.out(self.hidden(inputs))  # added

# Object instantiation
net = Net() # network
loss_fn = nn.CrossEntropyLoss() # loss function
optimizer = nn.Adam(net.trainable_params(), lr) # optimizer

# define forward function
def forword_fn(inputs, targets):
    logits = net(inputs)
    loss = loss_fn(logits, targets)
    return loss, logits

forward_fn, optim = forword_fn, optimizer  # added: the names the next line uses

# get grad function
grad_fn = value_and_grad(forward_fn, None, optim.parameters, has_aux=True)

# define train step function
def train_step(inputs, targets):
    (loss, logits), grads = grad_fn(inputs, targets) # get values and gradients
    optimizer(grads) # update gradient
    return loss, logits

for i in range(epochs):
    for inputs, targets in dataset():
        loss = train_step(inputs, targets)
