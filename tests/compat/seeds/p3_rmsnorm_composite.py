# 飞桨框架 3.0 新特性 (seed 002), 5.1: RMSNorm written with tensor operations.
# Changed: the import. Added: `import primflow.nn as nn` (the document uses
# nn.initializer.Constant without importing paddle.nn as nn).
import primflow as paddle
import primflow.nn as nn  # added

class RMSNorm(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.variance_epsilon = 1e-6
        self.size = 768
        self.weight = paddle.create_parameter(
            shape=[self.size],
            dtype=paddle.get_default_dtype(),
            default_initializer=nn.initializer.Constant(1.0),
        )

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        x = paddle.rsqrt(variance + self.variance_epsilon) * x
        return x * self.weight
