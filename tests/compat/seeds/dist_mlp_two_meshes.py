# 飞桨框架 3.0 新特性 (seed 002), 4.2 自动并行: the MlpModel on two meshes (a pipeline of
# two stages, tensor parallel inside each), trained through dist.to_static with a plain
# AdamW. Changed: the imports, and the two meshes: the document's are 2x2 each (8
# processes), here 1x1 each (mesh0 = [[0]], mesh1 = [[1]], same dim names) so the example
# runs on two processes: python -m primflow.distributed.launch -n 2 dist_mlp_two_meshes.py.
# The 1024/4096 sizes are the document's. Its "..." lines are completed, marked `# added`:
#   a dataset and loader (as in the document's 九、开始使用), sharded over both meshes;
#   AdamW's arguments; a loss; the document's `dist_model, dist_loader =
#   dist.to_static(model, opt, ...)` (Paddle 2.6's order and return value) written in
#   Paddle 3's form `dist.to_static(model, loader, loss_fn, opt)`; the loss printed.
import primflow as paddle
import primflow.distributed as dist
from primflow.io import BatchSampler, DataLoader, Dataset
import numpy as np

# added: two processes, one per mesh (the document: [[0, 1], [2, 3]] and [[4, 5], [6, 7]])
mesh0 = dist.ProcessMesh([[0]], dim_names=['x', 'y'])
mesh1 = dist.ProcessMesh([[1]], dim_names=['x', 'y'])
paddle.seed(2024)  # added: the test recomputes the run in NumPy
np.random.seed(2024)


class RandomDataset(Dataset):  # added
    def __init__(self, seq_len, hidden, num_samples=4):
        super().__init__()
        self.inputs = np.random.uniform(size=[num_samples, seq_len, hidden]).astype("float32")
        self.labels = np.random.uniform(size=[num_samples, seq_len, hidden]).astype("float32")

    def __getitem__(self, index):
        return self.inputs[index], self.labels[index]

    def __len__(self):
        return len(self.inputs)


class MlpModel(paddle.nn.Layer):
    def __init__(self):
        super(MlpModel, self).__init__()
        # 张量切分标记
        self.w0 = dist.shard_tensor(
            self.create_parameter(shape=[1024, 4096]),
            mesh0, [dist.Replicate(), dist.Shard(1)])
        self.w1 = dist.shard_tensor(
            self.create_parameter(shape=[4096, 1024]),
            mesh1, [dist.Replicate(), dist.Shard(0)])

    def forward(self, x):
        # 张量切分标记
        dist.shard_tensor(x, mesh0, [dist.Shard(0), dist.Replicate()])
        y = paddle.matmul(x, self.w0)
        # 张量重切分
        y = dist.reshard(y, mesh1, [dist.Shard(0), dist.Shard(2)])
        z = paddle.matmul(y, self.w1)
        return z


# 创建模型
model = MlpModel()
dataset = RandomDataset(seq_len=2, hidden=1024)  # added
loader = DataLoader(dataset, batch_sampler=BatchSampler(dataset, batch_size=2))  # added
dist_loader = dist.shard_dataloader(loader, meshes=[mesh0, mesh1], shard_dims="x")  # added
opt = paddle.optimizer.AdamW(learning_rate=0.001, parameters=model.parameters())  # added args
loss_fn = paddle.nn.MSELoss()  # added
# 动转静训练
dist_model = dist.to_static(model, dist_loader, loss_fn, opt)  # Paddle 3's form (see top)
for step, data in enumerate(dist_loader()):
    x, label = data  # added
    loss = dist_model(x, label)
    if dist.get_rank() in mesh1.process_ids:  # added: the loss lives on the last stage
        print("step", step, "loss", float(loss.numpy()), flush=True)
