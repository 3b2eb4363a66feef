"""``functional_call`` under its torch 1.x name (torch.nn.utils.stateless), deprecated there in
favour of ``torch.func.functional_call``: the same call, with torch's FutureWarning."""
import warnings

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True,
                    strict=False):
    """``ember.func.functional_call(module, parameters_and_buffers, args, kwargs, ...)``: call
    ``module`` with the given tensors in place of its parameters and buffers for this call
    only. Warns (FutureWarning) that the name is deprecated, as torch does."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
                  "and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    from ember.func import functional_call as call
    return call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
                strict=strict)
