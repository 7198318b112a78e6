"""VariableTrackers: the symbolic values of the translator (see ``base``)."""

from .base import (
    AttributeMutationExisting,
    AttributeMutationNew,
    MutationType,
    ValueMutationExisting,
    ValueMutationNew,
    VariableTracker,
)
from .builder import build
from .builtins import BuiltinVariable
from .constant import ConstantVariable
from .functions import BoundMethodVariable, NestedUserFunctionVariable, UserFunctionVariable
from .misc import (
    BoundUserMethodVariable,
    CellVariable,
    ClassVariable,
    GradModeVariable,
    ListIteratorVariable,
    NullVariable,
    OpaqueCallableVariable,
    PythonModuleVariable,
    UserObjectVariable,
    WithExitVariable,
)
from .nn_module import NNModuleVariable
from .sequences import ListVariable, SliceVariable, TupleVariable
from .tensor import TensorVariable
from .torch_function import TorchFunctionVariable

VariableTracker._build_impl = staticmethod(build)

__all__ = [name for name in dir() if name[0].isupper() or name == "build"]
