# 函数式和对象式融合编程范式 (seed 004): a Linear layer as an nn.Cell. Changed: the imports
# (mindspore -> primflow.compat.mindspore). Added: `import ... as mindspore` (the document
# uses mindspore.float32 without importing mindspore).
import primflow.compat.mindspore as mindspore  # added
from primflow.compat.mindspore import nn, Parameter
from primflow.compat.mindspore import initializer
import primflow.compat.mindspore.ops as ops

class Linear(nn.Cell):
    def __init__(self, in_features, out_features, has_bias): # class constructor (code)
        super().__init__()
        self.weight = Parameter(initializer('normal', [out_features, in_features], mindspore.float32), 'weight') # layer weight (data)
        self.bias = Parameter(initializer('zeros', [out_features], mindspore.float32), 'bias') # layer weight (data)

    def construct(self, inputs): # method declaration (code)
        output = ops.matmul(inputs, self.weight.transpose(0, 1)) # tensor transformation (code)
        output = output + self.bias # tensor transformation (code)
        return output
