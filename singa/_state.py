"""Process-wide switches that several layers of the package read, kept below all of them.

    from singa import _state
    if _state.training: ...                 # what ``autograd.training = True`` sets

``training``: record operations for backward (autograd) and use batch statistics / dropout
(layers). Users set it as ``autograd.training`` (SINGA's API) or through ``Model.train()``.
``leaf_creator``: the autograd class (Dummy) that becomes the creator of a tensor no operator
produced; singa.autograd registers it when imported, so the tensor module needs no import of
autograd (which imports the tensor module).
"""
training = False
leaf_creator = None
# autograd.amp.autocast: the hook that casts an operator's inputs by its policy, and the low dtype
autocast = None
autocast_dtype = None
