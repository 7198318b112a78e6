"""``ctx`` of a ``torch.autograd.Function`` while its ``forward`` is traced for speculation
(see ``AutogradFunctionApplyVariable``): the methods forward calls on its context, as
no-ops that keep what they are given (a traced forward must be able to call them; the real
``ctx`` is the one autograd makes when the graph runs ``apply``)."""


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
