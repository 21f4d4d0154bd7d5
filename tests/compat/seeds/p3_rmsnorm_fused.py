# 飞桨框架 3.0 新特性 (seed 002), 5.1: RMSNorm through the fused operator.
# Changed: the import. Added: `import primflow.nn as nn` (used, never imported) and
# `self.hidden_size = self.size` (the document reads self.hidden_size but sets only
# self.size: an AttributeError in Paddle too). As in Paddle, fused_rms_norm returns
# (out, residual_out), so this layer returns that pair.
import primflow as paddle
import primflow.nn as nn  # added

class RMSNorm(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.variance_epsilon = 1e-6
        self.size = 768
        self.hidden_size = self.size  # added
        self.weight = paddle.create_parameter(
            shape=[self.hidden_size],
            dtype=paddle.get_default_dtype(),
            default_initializer=nn.initializer.Constant(1.0),
        )

    def forward(self, x):
        return paddle.incubate.nn.functional.fused_rms_norm(
            x=x,
            norm_weight=self.weight,
            norm_bias=None,
            epsilon=self.variance_epsilon,
            begin_norm_axis=2,
        )
