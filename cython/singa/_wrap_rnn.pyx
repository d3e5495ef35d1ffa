# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_rnn: one LSTM, GRU or plain RNN layer in one direction over a whole sequence,
# singa/ops/rnn.h.
#
#   hs, cs, gates = LSTMForward(gx, h0, c0, w_hh, b_hh, False)      # b_hh may be None
#   dgx, dh0, dc0, dw_hh, db_hh = LSTMBackward(dhs, dhT, dcT, gates, hs, cs, h0, c0, w_hh,
#                                              True, False)         # dhT, dcT may be None
#   hs, gates, ghn = GRUForward(gx, h0, w_hh, b_hh, False)
#   dgx, dh0, dw_hh, db_hh = GRUBackward(dhs, dhT, gates, ghn, hs, h0, w_hh, True, False)
#   hs = RNNForward(gx, h0, w_hh, b_hh, relu=False, reverse=False)
#   dgx, dh0, dw_hh, db_hh = RNNBackward(dhs, dhT, hs, h0, w_hh, True, False, False)
#
# mask=None, or a float32 (T, N) of 1 / 0 (0: past that sequence's end), on every function.
# gx (T, N, G * H) holds every step's input projection x_t W_ih + b_ih (gates i, f, g, o; or
# r, z, n; or the one of a plain RNN). autograd's _LSTMLayer, _GRULayer and _RNNLayer
# (singa/autograd/rnn.py) are the differentiable ops.
from libcpp cimport bool
from libcpp.vector cimport vector

from csinga cimport *
from singa._wrap_tensor cimport Tensor, wrap, opt_tensor

register_error_classes()

cdef extern from "singa/ops/rnn.h" namespace "singa":
    vector[CTensor] c_LSTMForward "SINGA_NOGIL(singa::LSTMForward)"(
        const CTensor& gx, const CTensor& h0, const CTensor& c0, const CTensor& w_hh,
        const CTensor& b_hh, bool reverse, const CTensor& mask) except +raise_py_error
    vector[CTensor] c_LSTMBackward "SINGA_NOGIL(singa::LSTMBackward)"(
        const CTensor& dhs, const CTensor& dhT, const CTensor& dcT, const CTensor& gates,
        const CTensor& hs, const CTensor& cs, const CTensor& h0, const CTensor& c0,
        const CTensor& w_hh, bool has_bias, bool reverse,
        const CTensor& mask) except +raise_py_error
    vector[CTensor] c_GRUForward "SINGA_NOGIL(singa::GRUForward)"(
        const CTensor& gx, const CTensor& h0, const CTensor& w_hh, const CTensor& b_hh,
        bool reverse, const CTensor& mask) except +raise_py_error
    vector[CTensor] c_RNNForward "SINGA_NOGIL(singa::RNNForward)"(
        const CTensor& gx, const CTensor& h0, const CTensor& w_hh, const CTensor& b_hh,
        bool relu, bool reverse, const CTensor& mask) except +raise_py_error
    vector[CTensor] c_RNNBackward "SINGA_NOGIL(singa::RNNBackward)"(
        const CTensor& dhs, const CTensor& dhT, const CTensor& hs, const CTensor& h0,
        const CTensor& w_hh, bool has_bias, bool relu, bool reverse,
        const CTensor& mask) except +raise_py_error
    vector[CTensor] c_GRUBackward "SINGA_NOGIL(singa::GRUBackward)"(
        const CTensor& dhs, const CTensor& dhT, const CTensor& gates, const CTensor& ghn,
        const CTensor& hs, const CTensor& h0, const CTensor& w_hh, bool has_bias,
        bool reverse, const CTensor& mask) except +raise_py_error


def LSTMForward(Tensor gx not None, Tensor h0 not None, Tensor c0 not None,
                Tensor w_hh not None, Tensor b_hh, bint reverse=False, Tensor mask=None):
    """(hs, cs, gates): the states after every step (T, N, H) and the activated gates
    (T, N, 4H) of one LSTM layer run over gx (T, N, 4H); mask (T, N): 0 past a sequence's end
    (its states carried unchanged)."""
    cdef vector[CTensor] r = c_LSTMForward(gx.c, h0.c, c0.c, w_hh.c, opt_tensor(b_hh), reverse,
                                           opt_tensor(mask))
    return wrap(r[0]), wrap(r[1]), wrap(r[2])


def LSTMBackward(Tensor dhs not None, Tensor dhT, Tensor dcT, Tensor gates not None,
                 Tensor hs not None, Tensor cs not None, Tensor h0 not None,
                 Tensor c0 not None, Tensor w_hh not None, bint has_bias=True,
                 bint reverse=False, Tensor mask=None):
    """(dgx, dh0, dc0, dw_hh, db_hh): LSTMForward's gradients (db_hh None unless has_bias)."""
    cdef vector[CTensor] r = c_LSTMBackward(
        dhs.c, opt_tensor(dhT), opt_tensor(dcT), gates.c, hs.c, cs.c, h0.c, c0.c, w_hh.c,
        has_bias, reverse, opt_tensor(mask))
    return (wrap(r[0]), wrap(r[1]), wrap(r[2]), wrap(r[3]),
            wrap(r[4]) if has_bias else None)


def GRUForward(Tensor gx not None, Tensor h0 not None, Tensor w_hh not None, Tensor b_hh,
               bint reverse=False, Tensor mask=None):
    """(hs, gates, ghn): the states after every step (T, N, H), the activated gates r, z, n
    (T, N, 3H) and every step's h_{t-1} W_hn + b_hn (T, N, H) of one GRU layer over gx."""
    cdef vector[CTensor] r = c_GRUForward(gx.c, h0.c, w_hh.c, opt_tensor(b_hh), reverse,
                                          opt_tensor(mask))
    return wrap(r[0]), wrap(r[1]), wrap(r[2])


def GRUBackward(Tensor dhs not None, Tensor dhT, Tensor gates not None, Tensor ghn not None,
                Tensor hs not None, Tensor h0 not None, Tensor w_hh not None,
                bint has_bias=True, bint reverse=False, Tensor mask=None):
    """(dgx, dh0, dw_hh, db_hh): GRUForward's gradients (db_hh None unless has_bias)."""
    cdef vector[CTensor] r = c_GRUBackward(dhs.c, opt_tensor(dhT), gates.c, ghn.c, hs.c, h0.c,
                                           w_hh.c, has_bias, reverse, opt_tensor(mask))
    return wrap(r[0]), wrap(r[1]), wrap(r[2]), wrap(r[3]) if has_bias else None


def RNNForward(Tensor gx not None, Tensor h0 not None, Tensor w_hh not None, Tensor b_hh,
               bint relu=False, bint reverse=False, Tensor mask=None):
    """hs (T, N, H): the states after every step of a plain RNN layer (tanh, or ReLU) over gx
    (T, N, H)."""
    return wrap(c_RNNForward(gx.c, h0.c, w_hh.c, opt_tensor(b_hh), relu, reverse,
                             opt_tensor(mask))[0])


def RNNBackward(Tensor dhs not None, Tensor dhT, Tensor hs not None, Tensor h0 not None,
                Tensor w_hh not None, bint has_bias=True, bint relu=False, bint reverse=False,
                Tensor mask=None):
    """(dgx, dh0, dw_hh, db_hh): RNNForward's gradients (db_hh None unless has_bias)."""
    cdef vector[CTensor] r = c_RNNBackward(dhs.c, opt_tensor(dhT), hs.c, h0.c, w_hh.c, has_bias,
                                           relu, reverse, opt_tensor(mask))
    return wrap(r[0]), wrap(r[1]), wrap(r[2]), wrap(r[3]) if has_bias else None
