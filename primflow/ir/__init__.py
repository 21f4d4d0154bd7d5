"""The SSA program that ``pf.jit`` traces into, its text form, verifier, reference
interpreter, passes (``primflow.ir.passes``) and declarative rewrite rules
(``primflow.ir.rewrite``)."""

from ._program import CONSTANT as CONSTANT
from ._program import IMPURE as IMPURE
from ._program import Builder as Builder
from ._program import Function as Function
from ._program import Operation as Operation
from ._program import Value as Value
from ._program import normalize_params as normalize_params
from .interpreter import evaluate as evaluate
from .interpreter import evaluate_bound as evaluate_bound
from .parser import ParseError as ParseError
from .parser import parse as parse
from .printer import print_function as print_function
from .verifier import VerificationError as VerificationError
from .verifier import verify as verify
