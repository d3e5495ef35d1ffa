# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_attention: the fused scaled dot-product attention of
# singa/ops/attention.h.
#
#   out, lse, seed = ScaledDotProductAttention(q, k, v, mask=None, causal=True)
#   dq, dk, dv = ScaledDotProductAttentionBackward(dout, q, k, v, None, out, lse, seed,
#                                                  causal=True)
#
# mask: None, an int32 tensor (nonzero: the key takes part) or a float32 one (added to the
# scores), broadcast to (..., L, S). scale 0 means 1/sqrt(E). seed is None without dropout.
# autograd.scaled_dot_product_attention (singa/autograd/attention.py) is the differentiable op.
from libcpp cimport bool
from libcpp.vector cimport vector

from csinga cimport *
from singa._wrap_tensor cimport Tensor, wrap

register_error_classes()

cdef extern from "singa/ops/attention.h" namespace "singa":
    cdef cppclass CAttentionOptions "singa::AttentionOptions":
        float scale, dropout_p
        bool causal
    cdef cppclass CAttentionForwardResult "singa::AttentionForwardResult":
        CTensor out, lse, seed
    CAttentionForwardResult c_ScaledDotProductAttention \
        "SINGA_NOGIL(singa::ScaledDotProductAttention)"(
            const CTensor& q, const CTensor& k, const CTensor& v, const CTensor& mask,
            const CAttentionOptions& o) except +raise_py_error
    vector[CTensor] c_ScaledDotProductAttentionBackward \
        "SINGA_NOGIL(singa::ScaledDotProductAttentionBackward)"(
            const CTensor& dout, const CTensor& q, const CTensor& k, const CTensor& v,
            const CTensor& mask, const CAttentionForwardResult& fwd,
            const CAttentionOptions& o) except +raise_py_error


cdef CAttentionOptions _attention_options(float scale, float dropout_p, bint causal):
    cdef CAttentionOptions o
    o.scale = scale
    o.dropout_p = dropout_p
    o.causal = causal
    return o


cdef CTensor _or_empty(Tensor t):
    return CTensor() if t is None else t.c


def ScaledDotProductAttention(Tensor q not None, Tensor k not None, Tensor v not None,
                              Tensor mask=None, float scale=0.0, float dropout_p=0.0,
                              bint causal=False):
    """(out, lse, seed): softmax(q k^T scale + mask) v, lse per query row, the dropout seed
    (None without dropout)."""
    cdef CAttentionForwardResult r = c_ScaledDotProductAttention(
        q.c, k.c, v.c, _or_empty(mask), _attention_options(scale, dropout_p, causal))
    return wrap(r.out), wrap(r.lse), (None if r.seed.block() == NULL else wrap(r.seed))


def ScaledDotProductAttentionBackward(Tensor dout not None, Tensor q not None,
                                      Tensor k not None, Tensor v not None, Tensor mask,
                                      Tensor out not None, Tensor lse not None, Tensor seed,
                                      float scale=0.0, float dropout_p=0.0, bint causal=False):
    """(dq, dk, dv) in the shapes of q, k, v, from the forward's out, lse and seed."""
    cdef CAttentionForwardResult f
    f.out = out.c
    f.lse = lse.c
    f.seed = _or_empty(seed)
    cdef vector[CTensor] r = c_ScaledDotProductAttentionBackward(
        dout.c, q.c, k.c, v.c, _or_empty(mask), f, _attention_options(scale, dropout_p, causal))
    return wrap(r[0]), wrap(r[1]), wrap(r[2])
