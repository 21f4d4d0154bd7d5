# 高阶自动微分功能支持科学计算 (seed 000), 4.1: tanh's derivatives of order 1-3 by paddle.grad.
# Changed: the import. Added: x.stop_gradient = False (paddle.rand gives stop_gradient=True,
# so paddle.grad raises in Paddle 3.3.1 without it).
import primflow as paddle

# 组网代码
x = paddle.rand((2,))
x.stop_gradient = False  # added
y = paddle.tanh(x)
grad1 = paddle.grad(y, x, create_graph=True)     # 一阶微分
grad2 = paddle.grad(grad1, x, create_graph=True) # 二阶微分
grad3 = paddle.grad(grad2, x) # 三阶微分

print(grad1, grad2, grad3)
# [0.41997433] [-0.6397] [0.6216267]
