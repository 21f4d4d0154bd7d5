"""``pf.nn``: layers (Paddle's ``paddle.nn``), parameters, initialisers, gradient clipping
and the functional API (``pf.nn.functional``).

Layers keep their parameters as state (Paddle style) and are also pytrees of their
parameters, so ``pf.nn.functional_call(net, params, x)`` and the functional transforms can
take the parameters as inputs (JAX style).
"""

from . import functional
from . import initializer
from . import utils
from ._clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue
from ._container import MLP, LayerDict, LayerList, ParameterList, Sequential
from ._layer import Layer, ParamAttr, Parameter, create_parameter, functional_call
from ._layers import (ELU, GELU, BCEWithLogitsLoss, CrossEntropyLoss, Dropout, Flatten,
                      Identity, L1Loss, LayerNorm, LeakyReLU, Linear, LogSoftmax, Mish,
                      MSELoss, NLLLoss, ReLU, ReLU6, RMSNorm, Sigmoid, SiLU, Sin,
                      SmoothL1Loss, Softmax, Softplus, Softsign, Swish, Tanh, Tanhshrink)
# Fourier layers of neural operators
from ._spectral import SpectralConv1D, SpectralConv2D

__all__ = ["BCEWithLogitsLoss", "ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue",
           "CrossEntropyLoss", "Dropout", "ELU", "Flatten", "GELU", "Identity", "L1Loss",
           "Layer", "LayerDict", "LayerList", "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax",
           "MLP", "MSELoss", "Mish", "NLLLoss", "ParamAttr", "Parameter", "ParameterList",
           "RMSNorm", "ReLU", "ReLU6", "Sequential", "SiLU", "Sigmoid", "Sin", "SmoothL1Loss",
           "Softmax", "Softplus", "Softsign", "Swish", "Tanh", "Tanhshrink", "create_parameter",
           "functional", "functional_call", "initializer", "utils",
           # Fourier layers of neural operators
           "SpectralConv1D", "SpectralConv2D"]
