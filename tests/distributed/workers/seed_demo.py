# Paddle 3's semi-automatic parallel demo with only the import changed (primflow for paddle)
import numpy as np

import primflow as paddle
import primflow.distributed as dist
from primflow.io import BatchSampler, DataLoader, Dataset

paddle.seed(2024)
np.random.seed(2024)
mesh = dist.ProcessMesh([0, 1], dim_names=["x"])


class RandomDataset(Dataset):
    def __init__(self, seq_len, hidden, num_samples=8):
        super().__init__()
        self.seq_len = seq_len
        self.hidden = hidden
        self.num_samples = num_samples
        self.inputs = np.random.uniform(size=[num_samples, seq_len, hidden]).astype("float32")
        self.labels = np.random.uniform(size=[num_samples, seq_len, hidden]).astype("float32")

    def __getitem__(self, index):
        return self.inputs[index], self.labels[index]

    def __len__(self):
        return self.num_samples


class MlpModel(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.w0 = dist.shard_tensor(
            self.create_parameter(shape=[2, 4]), mesh, [dist.Shard(1)])
        self.w1 = dist.shard_tensor(
            self.create_parameter(shape=[4, 2]), mesh, [dist.Shard(0)])

    def forward(self, x):
        y = paddle.matmul(x, self.w0)
        y = paddle.nn.functional.softmax(y)
        z = paddle.matmul(y, self.w1)
        return z


model = MlpModel()
dataset = RandomDataset(4, 2)
sampler = BatchSampler(dataset, batch_size=2)
dataloader = DataLoader(dataset, batch_sampler=sampler)
dataloader = dist.shard_dataloader(dataloader, meshes=[mesh], shard_dims="x")
opt = paddle.optimizer.AdamW(learning_rate=0.1, parameters=model.parameters())
opt = dist.shard_optimizer(opt)
loss_fn = paddle.nn.MSELoss(reduction="sum")
dist_model = dist.to_static(model, dataloader, loss_fn, opt)
dist_model.train()
for epoch in range(2):
    for step, inputs in enumerate(dataloader()):
        data, label = inputs
        loss = dist_model(data, label)
        value = float(loss.numpy())
        if dist.get_rank() == 0:
            print(f"epoch {epoch} step {step} loss {value:.6f}")
