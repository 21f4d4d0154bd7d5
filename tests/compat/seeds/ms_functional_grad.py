# 函数式和对象式融合编程范式 (seed 004), 函数式编程: grad of mindspore.numpy.tanh to order 3.
# Changed: the imports.
import primflow.compat.mindspore.numpy as mnp
from primflow.compat.mindspore import grad

grad_tanh = grad(mnp.tanh)
print(grad_tanh(2.0))
# 0.070650816

print(grad(grad(mnp.tanh))(2.0))
print(grad(grad(grad(mnp.tanh)))(2.0))
# -0.13621868
# 0.25265405
