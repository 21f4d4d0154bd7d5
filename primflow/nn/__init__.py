"""Neural-network building blocks. This release has the functional API
(``pf.nn.functional``); layers and initialisers come with the layers issue."""

from . import functional
