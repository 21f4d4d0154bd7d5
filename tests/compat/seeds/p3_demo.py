# 飞桨框架 3.0 新特性 (seed 002), 九、开始使用: test_demo.py, the matmul + softmax demo of
# semi-automatic parallelism, compiled by dist.to_static. Changed: the four imports.
# Run on two processes: python -m primflow.distributed.launch -n 2 p3_demo.py (or mpiexec
# -n 2); the document's FLAGS_* variables switch Paddle's own compiler passes and have no
# primflow counterpart.
# test_demo.py
import primflow as paddle
import primflow.distributed as dist
import primflow.nn.functional as F
from primflow.io import Dataset, DataLoader
import numpy as np

mesh = dist.ProcessMesh([0, 1], dim_names=["x"])

class DemoDataset(Dataset):
    def __init__(self, num_samples):
        self.num_samples = num_samples

    def __getitem__(self, idx):
        return np.array([[1., 2.], [3., 4.],[5., 6.]]).astype('float32'), np.array([1.])

    def __len__(self):
        return self.num_samples

class DemoLayer(paddle.nn.Layer):
    def __init__(self):
        super(DemoLayer, self).__init__()
        self.w = dist.shard_tensor(
            paddle.create_parameter(shape=[2, 4], dtype='float32'),
            mesh, [dist.Shard(1)])
        self.b = paddle.to_tensor([0.1, 0.2, 0.3, 0.4])

    def forward(self, x):
        y = paddle.matmul(x, self.w)
        z = F.softmax(y + self.b)
        return z

dataset = DemoDataset(10)
loader = DataLoader(dataset, batch_size=1)

def loss_fn(logits, label):
    loss = paddle.nn.MSELoss(reduction="sum")
    logits = paddle.sum(logits, axis=[1, 2])
    return loss(logits, label)

layer = DemoLayer()
dist_layer = dist.to_static(layer, loader, loss_fn)
dist_layer.eval()
for data in loader():
    loss = dist_layer(data[0], data[1])
    print('loss', loss, flush=1)
