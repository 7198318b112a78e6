"""VariableTrackers: the symbolic values of the translator (see ``base``).

Modules, in layer order (each imports only those before it): ``base`` (tracker base,
mutation types, lazy trackers, the builder registry) → ``constant`` → ``object_ids`` (``id()``) →
``sym_node`` (symbolic numbers) → ``tensor`` →
``sequences``, ``sizes`` (``torch.Size``), ``dicts``, ``sets``, ``view_sets`` (dict views as sets), ``tuple_iterators`` (an existing tuple iterator stepped in the trace), ``iterators`` (containers) → ``random_values`` → ``cells`` → ``functions``
→ ``partial_subclasses`` (instances of Python subclasses of ``functools.partial``) → ``exceptions`` → ``object_protocol``, ``instance_attrs``, ``dict_objects``,
``builtin_subclasses`` (tuple/set subclasses, mappingproxy), ``objects``, ``weak_dicts``
(``WeakKeyDictionary``/``WeakValueDictionary`` read as mappings),
``nn_module``, ``lazy_modules`` (lazy modules' first call), ``namedtuple_classes``
(``collections.namedtuple`` in the trace), ``torchscript``, ``numpy_tensors`` (numpy on arrays of tensors, through
``torch._numpy``), ``numpy_ufuncs`` (a ufunc on tensors: ``__array__`` in,
``__array_wrap__`` out), ``numpy_values`` (Python objects; TorchScript's opaque ones; numpy
folded on constants), ``generators`` →
``operators``, ``grad_mode``, ``builtins``, ``interpreter`` (frames, ``importlib.import_module``),
``torch_function``, ``checkpoint``, ``copying``
(``copy.copy``/``deepcopy``), ``functional_call`` → ``tensor_subclasses``, ``mode_stack``,
``dispatch_probe``, ``torch_modes`` (``__torch_function__``) → the ``hops`` package
(higher-order operators: control flow and torch.func) → ``builder`` (how callables are
modelled).  Importing this package imports them all, which registers every builder.
"""

from .base import (
    AttributeMutationExisting,
    AttributeMutationNew,
    LazyVariableTracker,
    MethodVariable,
    MutationType,
    NullVariable,
    ValueMutationExisting,
    ValueMutationNew,
    VariableTracker,
    is_new,
)
from .constant import ConstantVariable
from .sym_node import SymNodeVariable
from .tensor import TensorVariable
from .sequences import BaseSequenceVariable, DequeVariable, ListVariable, SliceVariable, TupleVariable
from .dicts import DictVariable, DictViewVariable
from .sets import SetVariable
from .sizes import SizeVariable
from .random_values import PrologueValueVariable, RandomObjectVariable
from .iterators import EnumerateVariable, GeneratorVariable, IteratorVariable, ListIteratorVariable, ZipVariable
from .cells import CellVariable
from .functions import (
    NestedUserFunctionVariable,
    OpaqueCallableVariable,
    PartialVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from .exceptions import ExceptionVariable
from .objects import ClassVariable, InstanceDictVariable, PythonModuleVariable, SuperVariable, UserObjectVariable
from .weak_dicts import WeakDictVariable
from .nn_module import NNModuleVariable
from .namedtuple_classes import NamedTupleFactoryVariable, NewNamedTupleClassVariable
from .torchscript import ScriptFunctionVariable, ScriptModuleVariable
from .numpy_values import NumpyFunctionVariable, NumpyValueVariable
from .generators import TorchGeneratorVariable
from .grad_mode import (GradModeExit, GradModeVariable, InferenceModeExitVariable,
                        InferenceModeVariable, WithExitVariable)
from .builtins import BuiltinVariable
from . import library  # noqa: F401  (registers inspect.signature and its values)
from . import immutable_values  # noqa: F401  (str.isalnum(c), re's functions, patterns)
from . import formatting  # noqa: F401  (str()/repr()/f-strings of non-constant values)
from . import interpreter  # noqa: F401  (sys._getframe, inspect.currentframe, importlib.import_module)
from .torch_function import TorchFunctionVariable
from .checkpoint import CheckpointVariable
from . import copying  # noqa: F401  (registers copy.copy/deepcopy and the C methods they reach)
from . import functional_call  # noqa: F401  (registers torch.func.functional_call)
from .torch_modes import DispatchedFunctionVariable, TorchFunctionStateCall
from . import hops  # noqa: F401  (registers the higher-order operators)
from . import builder  # noqa: F401  (registers the callable builders)

__all__ = [name for name in dir() if name[0].isupper() or name == "is_new"]
