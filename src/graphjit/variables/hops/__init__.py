"""Higher-order operators: calls whose arguments are functions, traced into subgraphs.

``body`` traces one function into a subgraph (shared by all of them); ``pytree`` flattens
their nested arguments and results; ``control_flow`` models ``torch.cond``,
``while_loop``, ``map`` and ``scan``; ``transforms`` (with their graph targets in
``transform_calls``) the ``torch.func`` transforms; ``compile_region``
``torch.compiler.nested_compile_region``; ``wrap`` torch's ``wrap`` operator.
"""

from . import control_flow  # noqa: F401  (registers the front ends)
from . import transforms  # noqa: F401  (registers torch.func's transforms)
from . import compile_region  # noqa: F401  (registers nested_compile_region's placeholder)
from . import wrap  # noqa: F401  (registers torch._higher_order_ops.wrap)
from . import repeated_blocks  # noqa: F401  (hooks module calls: repeated blocks traced once)
