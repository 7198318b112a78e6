"""``ctx`` of a ``torch.autograd.Function`` while its ``forward`` is traced for speculation
(see ``AutogradFunctionApplyVariable``): the methods forward calls on its context, as
no-ops that keep what they are given (a traced forward must be able to call them; the real
``ctx`` is the one autograd makes when the graph runs ``apply``)."""

from .. import _compat


class FunctionCtx:
    """Stands for the ``ctx`` of ``forward(ctx, *args)``."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        self.materialize_grads = value

    if _compat.HAS_SET_OUTPUT_GRAD_DTYPE:  # torch 2.14
        def set_output_grad_dtype(self, *dtypes):
            if getattr(self, "output_grad_dtypes", None) is not None:
                raise RuntimeError("set_output_grad_dtype can only be called once")
            self.output_grad_dtypes = dtypes
