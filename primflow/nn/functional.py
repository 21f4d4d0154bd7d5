"""``pf.nn.functional``: activations, normalisations and losses (composites from ops)."""

from ..ops.activation import (dropout, elu, gelu, layer_norm, leaky_relu, log_softmax, mish,
                              normalize, relu, relu6, rms_norm, sigmoid, silu, softmax,
                              softplus, softsign, tanhshrink)
from ..ops.losses import (binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss,
                          nll_loss, smooth_l1_loss)
from ..ops.linalg import linear
from ..ops.math import tanh
from ..ops import swish  # an alias (ops/aliases.py)

__all__ = ["binary_cross_entropy_with_logits", "cross_entropy", "dropout", "elu", "gelu",
           "l1_loss", "layer_norm", "leaky_relu", "linear", "log_softmax", "mish", "mse_loss",
           "nll_loss", "normalize", "relu", "relu6", "rms_norm", "sigmoid", "silu",
           "smooth_l1_loss", "softmax", "softplus", "softsign", "swish", "tanh", "tanhshrink"]
