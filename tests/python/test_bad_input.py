"""Bad input raises a Python exception of the right class, naming the op and the shapes; the
interpreter survives (one test replays every case in a subprocess and checks it exits 0)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from singa import autograd, layer, singa_wrap, tensor, utils

F32 = np.float32


def T(*shape, dtype=F32):
    """A tensor of the given shape holding 0, 1, 2, ..."""
    return tensor.from_numpy(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))


def _iadd(a, b):
    a += b


def _setitem(t, key, value):
    t[key] = value


# (id, call, exception class, substrings the message must contain)
CASES = [
    # mismatched shapes
    ("add-shapes", lambda: T(3, 4) + T(5), ValueError, ["Add", "(3, 4)", "(5,)"]),
    ("sub-shapes-fn", lambda: tensor.sub(T(2, 3), T(3, 2)), ValueError, ["Sub", "(2, 3)", "(3, 2)"]),
    ("lt-shapes", lambda: T(2, 3) < T(4), ValueError, ["LT", "(2, 3)", "(4,)"]),
    ("inplace-grow", lambda: _iadd(T(2, 1), T(2, 3)), ValueError, ["Add", "(2, 1)", "(2, 3)"]),
    ("ret-shape", lambda: tensor.add(T(2, 3), T(2, 3), tensor.Tensor((3, 2))), ValueError,
     ["Add", "(3, 2)", "(2, 3)"]),
    ("copy-data-size", lambda: tensor.Tensor((2, 2)).copy_data(T(5)), ValueError,
     ["copy_data", "(5,)", "(2, 2)"]),
    ("copy-from-numpy-size", lambda: tensor.Tensor((2, 2)).copy_from_numpy(np.ones(3, F32)),
     ValueError, ["copy_from_numpy", "(3,)", "(2, 2)"]),
    ("sum-out-shape", lambda: tensor.sum(T(2, 3), 0, out=tensor.Tensor((2,))), ValueError,
     ["sum", "(2,)", "(3,)"]),
    ("setitem-shape", lambda: _setitem(T(3, 4), 0, T(3)), ValueError, ["(3,)", "(1, 4)"]),
    ("add-row-size", lambda: T(2, 3).add_row(T(2)), ValueError, ["AddRow", "(2, 3)"]),
    ("axpy-shape", lambda: tensor.axpy(1.0, T(3), T(4)), ValueError, ["Axpy", "(3,)", "(4,)"]),
    # Mult inner sizes
    ("mult-inner", lambda: tensor.mult(T(3, 4), T(5, 2)), ValueError, ["Mult", "(3, 4)", "(5, 2)"]),
    ("matmul-inner", lambda: T(2, 3) @ T(2, 3), ValueError, ["Mult", "(2, 3)"]),
    ("mult-C-shape", lambda: tensor.mult(T(3, 4), T(4, 2), C=tensor.Tensor((3, 3))), ValueError,
     ["Mult", "(3, 3)", "(3, 2)"]),
    ("tensordot-sizes", lambda: tensor.tensordot(T(3, 4), T(3, 4), 1), ValueError,
     ["tensordot", "(3, 4)"]),
    ("einsum-sizes", lambda: tensor.einsum("ij,jk->ik", T(2, 3), T(4, 2)), ValueError,
     ["einsum", "(4, 2)"]),
    ("einsum-ndim", lambda: tensor.einsum("ijk,jk->i", T(2, 3), T(3, 2)), ValueError,
     ["einsum", "(2, 3)", "ijk"]),
    ("einsum-operands", lambda: tensor.einsum("ij,jk->ik", T(2, 3)), ValueError, ["einsum"]),
    # wrong dtype
    ("float16-math", lambda: T(3, dtype=np.float16) + 1, TypeError, ["Add", "float16"]),
    ("float16-exp", lambda: tensor.exp(T(3, dtype=np.float16)), TypeError, ["Exp", "float16"]),
    ("int-inplace-float", lambda: _iadd(T(3, dtype=np.int32), 0.5), TypeError,
     ["Add", "int32", "float32"]),
    ("int-mult", lambda: tensor.mult(T(2, 2, dtype=np.int32), T(2, 2, dtype=np.int32)), TypeError,
     ["Mult", "int32"]),
    ("bad-dtype", lambda: tensor.Tensor((2,), dtype="complex"), TypeError, ["Tensor", "complex"]),
    ("as-type-bad", lambda: T(2).as_type("double"), TypeError, ["as_type", "double"]),
    ("from-numpy-complex", lambda: tensor.from_numpy(np.ones(2, complex)), TypeError,
     ["from_numpy", "complex"]),
    ("operand-str", lambda: T(2) + "x", TypeError, ["str"]),
    ("fn-operand-str", lambda: tensor.add(T(2), "x"), TypeError, ["Add", "str"]),
    ("fn-not-tensor", lambda: tensor.exp(np.ones(2)), TypeError, ["exp", "ndarray"]),
    ("set-value-str", lambda: T(2).set_value("a"), TypeError, ["set_value", "str"]),
    # bad reshape
    ("reshape-size", lambda: T(2, 3).reshape((4,)), ValueError, ["Reshape", "(2, 3)", "(4,)"]),
    ("reshape-two-minus", lambda: T(2, 3).reshape((-1, -1)), ValueError, ["Reshape", "-1"]),
    ("reshape-infer", lambda: T(2, 3).reshape((4, -1)), ValueError, ["Reshape", "(2, 3)"]),
    ("shape-negative", lambda: tensor.Tensor((2, -3)), ValueError, ["Tensor", "(2, -3)"]),
    ("shape-float", lambda: tensor.Tensor((2.5,)), TypeError, ["Tensor", "2.5"]),
    # out-of-range / repeated axes and indices
    ("sum-axis", lambda: tensor.sum(T(2, 3), 2), IndexError, ["ReduceSum", "axis 2", "rank 2"]),
    ("average-axis", lambda: tensor.average(T(2, 3), -3), IndexError, ["axis -3"]),
    ("softmax-axis", lambda: tensor.softmax(T(2, 3), axis=5), IndexError, ["SoftMax", "axis 5"]),
    ("concat-axis", lambda: tensor.concatenate([T(2), T(2)], 1), IndexError, ["ConcatOn", "1"]),
    ("repeat-axis", lambda: T(2, 3).repeat(2, 4), IndexError, ["Repeat", "4"]),
    ("transpose-repeated", lambda: T(2, 3, 4).transpose((0, 0, 1)), IndexError,
     ["Transpose", "repeated"]),
    ("transpose-range", lambda: T(2, 3).transpose((0, 2)), IndexError, ["Transpose", "axis 2"]),
    ("transpose-count", lambda: T(2, 3).transpose((1, 0, 2)), IndexError, ["Transpose"]),
    ("tensordot-axis", lambda: tensor.tensordot(T(2, 3), T(3, 2), ([5], [0])), IndexError,
     ["tensordot", "axis 5"]),
    ("getitem-range", lambda: T(3, 4)[3], IndexError, ["__getitem__", "index 3", "(3, 4)"]),
    ("getitem-negative", lambda: T(3, 4)[:, -5], IndexError, ["__getitem__", "-5", "(3, 4)"]),
    ("getitem-too-many", lambda: T(3)[0, 0], IndexError, ["__getitem__", "(3,)"]),
    ("getitem-type", lambda: T(3)["a"], TypeError, ["__getitem__", "str"]),
    ("getitem-step", lambda: T(3)[::-1], ValueError, ["__getitem__", "negative"]),
    # concatenate mismatched / empty
    ("concat-shapes", lambda: tensor.concatenate([T(3, 4), T(2, 5)], 0), ValueError,
     ["ConcatOn", "(2, 5)", "(3, 4)"]),
    ("concat-empty", lambda: tensor.concatenate([], 0), ValueError, ["ConcatOn"]),
    ("concat-dtypes", lambda: tensor.concatenate([T(2), T(2, dtype=np.int32)], 0), Exception,
     ["ConcatOn"]),
    # empty tensors
    ("reduce-max-empty", lambda: singa_wrap.ReduceMax(tensor.Tensor((0, 3)).data), ValueError,
     ["ReduceMax", "(0, 3)"]),
    ("average-empty", lambda: tensor.average(tensor.Tensor((0,))), ValueError,
     ["average", "(0,)"]),
    # non-contiguous views at the raw level
    ("raw-copy-into-view", lambda: singa_wrap.copy_from_numpy(T(2, 3).T().data, np.ones(6)),
     ValueError, ["copy_from_numpy", "non-contiguous"]),
    # bad random parameters
    ("gaussian-std", lambda: tensor.Tensor((3,)).gaussian(0, -1), ValueError, ["Gaussian", "-1"]),
    ("uniform-order", lambda: tensor.Tensor((3,)).uniform(2, 1), ValueError, ["Uniform", "2"]),
    ("bernoulli-p", lambda: tensor.Tensor((3,)).bernoulli(1.5), ValueError, ["Bernoulli", "1.5"]),
    ("bernoulli-fn-p", lambda: tensor.bernoulli(-0.1, tensor.Tensor((3,))), ValueError,
     ["Bernoulli", "-0.1"]),
    ("uniform-nan", lambda: tensor.uniform(float("nan"), 1, tensor.Tensor((3,))), ValueError,
     ["Uniform"]),
    # other bad values
    ("repeat-negative", lambda: T(3).repeat(-1, 0), ValueError, ["repeat", "-1"]),
    ("repeat-counts", lambda: T(3, 2).repeat([1, 2], 0), ValueError, ["Repeat", "(3, 2)"]),
    ("repeat-seq-none", lambda: tensor.repeat(T(3), [1, 2, 3]), ValueError, ["repeat"]),
    ("clip-order", lambda: tensor.clip(T(3), 2, 1), ValueError, ["Clamp", "2", "1"]),
    ("sum-columns-3d", lambda: tensor.sum_columns(T(2, 2, 2)), ValueError,
     ["SumColumns", "(2, 2, 2)"]),
    ("einsum-ellipsis", lambda: tensor.einsum("...i->i", T(2, 3)), ValueError, ["einsum", "..."]),
    ("einsum-diagonal", lambda: tensor.einsum("ii->i", T(3, 3)), ValueError, ["einsum", "ii"]),
    ("device-type", lambda: tensor.Tensor((2,), device="cuda"), TypeError, ["Tensor", "str"]),
    # sizes past 2^63 - 1 elements or bytes (found by tools/fuzz_api.py: these crashed, the
    # element count wrapped to a block of 0 bytes)
    ("size-overflow", lambda: tensor.Tensor((3, 2 ** 63)), ValueError,
     ["(3, 9223372036854775808)", "too big"]),
    ("bytes-overflow", lambda: tensor.Tensor((2 ** 62,)), ValueError, ["float32", "too big"]),
    ("layer-size-overflow", lambda: layer.Embedding(3, 2 ** 63)(T(2, 4, dtype=np.int32)),
     ValueError, ["too big"]),
    ("reshape-wraps", lambda: T(2).reshape((2 ** 31 - 1,) * 3), ValueError, ["too big"]),
    # a non-tensor where a tensor belongs (these raised AttributeError from inside)
    ("zeros-like-int", lambda: tensor.zeros_like(3), TypeError, ["zeros_like", "int"]),
    ("ones-like-list", lambda: tensor.ones_like([1.0]), TypeError, ["ones_like", "list"]),
    ("sum-out-float", lambda: tensor.sum(T(2, 3), 0, out=2.0), TypeError, ["sum", "out", "float"]),
    ("softmax-out-list", lambda: tensor.softmax(T(2, 3), out=[]), TypeError, ["out", "list"]),
    ("gaussian-none", lambda: tensor.gaussian(0, 1, None), TypeError, ["gaussian", "NoneType"]),
    ("bernoulli-int", lambda: tensor.bernoulli(0.5, 3), TypeError, ["bernoulli", "int"]),
    ("mse-target-int", lambda: autograd.mse_loss(T(3), -1), TypeError,
     ["mse_loss", "target", "int"]),
    ("cross-entropy-target", lambda: autograd.cross_entropy(T(2, 3), 3), TypeError,
     ["CrossEntropy", "target", "int"]),
    ("softmax-ce-target", lambda: autograd.softmax_cross_entropy(T(2, 3), [0, 1]), TypeError,
     ["SoftMaxCrossEntropy", "target", "list"]),
    ("back-broadcast-x", lambda: autograd.back_broadcast((2, 3), (3,), 0), TypeError,
     ["back_broadcast", "int"]),
    ("gather-elements-x", lambda: autograd.gather_elements((), 0), TypeError,
     ["gather_elements", "x", "tuple"]),
    ("sdpa-q", lambda: autograd.scaled_dot_product_attention(None, T(1, 2, 4), T(1, 2, 4)),
     TypeError, ["scaled_dot_product_attention", "q", "NoneType"]),
    ("softmax-x", lambda: autograd.softmax(7, 1, 1), TypeError, ["softmax", "int"]),
    ("block-name-none", lambda: T(2).data.set_block_name(None), TypeError, ["None"]),
    # bad values that reached numpy or a tuple index unchecked
    ("constant-of-shape-value", lambda: autograd.constant_of_shape(T(2), value=T(0)),
     ValueError, ["constant_of_shape", "one element", "0"]),
    ("onehot-values", lambda: autograd.onehot(-1, T(2, dtype=np.int32), 3, [0, 1, 2]),
     ValueError, ["onehot", "off_value", "3 values"]),
    ("copy-from-numpy-offset-view", lambda: T(2, 3).T().copy_from_numpy(np.ones(2, F32), 1),
     ValueError, ["copy_from_numpy", "transposed", "(3, 2)"]),
    ("encoder-layer-scalar", lambda: layer.TransformerEncoderLayer(4, 2)(T()), ValueError,
     ["TransformerEncoderLayer", "3-d", "()"]),
    ("gemm-kernels", lambda: layer.Gemm(0), ValueError, ["Gemm", "nb_kernels", "0"]),
    ("linear-features", lambda: layer.Linear(-2), ValueError, ["Linear", "out_features", "-2"]),
    ("lstm-layers", lambda: layer.LSTM(2, 3, num_layers=1.5), ValueError,
     ["LSTM", "num_layers", "1.5"]),
    # singa.utils' handle helpers (AttributeError from inside, or a division by zero, before)
    ("re-new-handle-class", lambda: utils.re_new_handle(
        singa_wrap.BatchNormHandle(0.9, T(2, 3, 4, 4).data), T(2, 3, 4, 4)), TypeError,
     ["re_new_handle", "ConvHandle", "BatchNormHandle"]),
    ("re-new-handle-pool", lambda: utils.re_new_handle(
        singa_wrap.ConvHandle([2, 3, 4, 4], 3, 1, 1, 3, 4, True), T(2, 3, 4, 4), True),
     TypeError, ["re_new_handle", "is_pool=True", "PoolingHandle", "ConvHandle"]),
    ("same-pad-x", lambda: utils.same_pad_shape_check(
        singa_wrap.PoolingHandle([2, 3, 4, 4], 2, 2, 0), "SAME_UPPER", 1), TypeError,
     ["same_pad_shape_check", "x", "int"]),
    ("post-order-root", lambda: utils.post_order_recursive(T(2), None), TypeError,
     ["post_order_recursive", "Operator", "Tensor"]),
    ("same-pad-stride", lambda: utils.get_padding_shape("SAME_UPPER", [5], [2], [0]),
     ValueError, ["stride", "0"]),
]


@pytest.mark.parametrize("call,exc,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    msg = str(info.value)
    for w in words:
        assert w in msg, "%r not in message %r" % (w, msg)


def test_singa_exception_classes():
    assert issubclass(singa_wrap.ShapeError, ValueError)
    assert issubclass(singa_wrap.AxisError, ValueError) and issubclass(singa_wrap.AxisError,
                                                                       IndexError)
    assert issubclass(singa_wrap.DTypeError, TypeError)
    assert issubclass(singa_wrap.ArgumentError, ValueError)
    assert issubclass(singa_wrap.OutOfMemoryError, MemoryError)
    with pytest.raises(singa_wrap.ShapeError):
        T(2) + T(3)
    with pytest.raises(singa_wrap.AxisError):
        T(2, 3).transpose((1, 1))
    with pytest.raises(singa_wrap.DTypeError):
        T(2, dtype=np.float16) * 2


def test_tensor_still_usable_after_errors():
    t = T(2, 3)
    for bad in (lambda: t + T(4), lambda: t.reshape((7,)), lambda: _iadd(t, T(3, 3))):
        with pytest.raises(ValueError):
            bad()
    np.testing.assert_array_equal(tensor.to_numpy(t + 1), np.arange(1, 7, dtype=F32).reshape(2, 3))


SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import test_bad_input as m
caught = 0
for name, call, exc, words in m.CASES:
    try:
        call()
    except exc:
        caught += 1
    else:
        print("no exception from", name)
        sys.exit(3)
print("survived", caught)
"""


def test_bad_calls_do_not_abort_the_interpreter():
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, here], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "survived %d" % len(CASES) in proc.stdout
