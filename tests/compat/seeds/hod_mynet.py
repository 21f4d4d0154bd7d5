# 高阶自动微分功能支持科学计算 (seed 000), 四、开始使用, steps 1-5: MyNet, the second
# derivative of y with respect to x, its L2 norm as the loss, an Adam step.
# Changed: the import. Added (marked below): x.stop_gradient = False and create_graph=True
# on both paddle.grad calls (without them paddle.grad raises in Paddle 3.3.1 too, and no
# weight would reach the loss). Left out: the document's
#     opt = paddle.optimizer.Adam(0.01)
#     opt.update(loss)
# Adam without parameters raises in Paddle 3.3.1's dynamic mode and Adam has no update();
# test_seeds_paddle_hod.py checks primflow refuses them too.
import primflow as paddle

class MyNet(paddle.nn.Layer):
    def __init__(self):
        super(MyNet, self).__init__()
        self.weight = self.create_parameter(shape=(2,2), dtype=paddle.float32, is_bias=False)
        self.bias = self.create_parameter(shape=(2,2), dtype=paddle.float32, is_bias=True)
        self.add_parameter("weight", self.weight)
        self.add_parameter("bias", self.bias)

    def forward(self, x):
        y = paddle.matmul(x, self.weight) + self.bias
        return paddle.tanh(y)

x = paddle.randn(shape=(2,2), dtype=paddle.float32)
x.stop_gradient = False  # added
net = MyNet()
y = net(x)

grad1 = paddle.grad(y, x, create_graph=True)  # added: create_graph=True
grad2 = paddle.grad(grad1, x, create_graph=True)  # added: create_graph=True
loss = paddle.norm(grad2, p=2)

opt = paddle.optimizer.Adam(parameters=net.parameters())
loss.backward()
opt.step()
