"""Matrix products: matmul (numpy.matmul semantics), gemm (ONNX Gemm), add_bias and cossim.

    y = autograd.matmul(x, w)                     # (N, K) x (K, M), batched and 1-d too
    y = autograd.add_bias(y, b)                   # b: (M,) or (1, M), added to every row
    y = autograd.gemm(A, B, C, alpha=1.0, beta=1.0, transA=0, transB=1)
    s = autograd.cossim(a, b)                     # row-wise cosine similarity, (N,)
"""
from .. import singa_wrap as singa
from .._args import as_float
from .errors import ShapeError, InputError
from .base import Operator, reduce_to

_M = singa.EltwiseMult


def _swap_last(t):
    """A view of t with its last two axes swapped (t has rank >= 2)."""
    nd = t.nDim()
    perm = list(range(nd - 2)) + [nd - 1, nd - 2]
    return singa.Transpose(t, perm)


class Matmul(Operator):
    """numpy.matmul(x, w): 1-d operands are promoted and the added axis removed; leading
    (batch) axes broadcast, and their gradients are summed back."""

    def forward(self, x, w):
        if x.nDim() == 0 or w.nDim() == 0:
            raise ShapeError("matmul: operands must have at least one axis, got shapes "
                             "%s and %s" % (x.shape(), w.shape()))
        self.x, self.w = x, w
        return singa.Mult(x, w)

    def backward(self, dy):
        x, w = self.x, self.w
        x2 = singa.Reshape(x, [1, x.shape()[0]]) if x.nDim() == 1 else x
        w2 = singa.Reshape(w, [w.shape()[0], 1]) if w.nDim() == 1 else w
        # dy with the promoted axes put back: (..., m, n)
        shape = list(dy.shape())
        if x.nDim() == 1:
            shape.insert(len(shape) - (0 if w.nDim() == 1 else 1), 1)
        if w.nDim() == 1:
            shape.append(1)
        dy2 = singa.Reshape(dy, shape)
        dx = dw = None
        if self.need(0):
            dx = singa.Reshape(reduce_to(singa.Mult(dy2, _swap_last(w2)), x2.shape()),
                               list(x.shape()))
        if self.need(1):
            dw = singa.Reshape(reduce_to(singa.Mult(_swap_last(x2), dy2), w2.shape()),
                               list(w.shape()))
        return dx, dw


def matmul(x, w):
    """The matrix product of x and w (numpy.matmul semantics)."""
    return Matmul()(x, w)[0]


class Gemm(Operator):
    """Y = alpha * A' B' + beta * C with A' = A^T if transA, B' = B^T if transB; A and B are
    matrices and C (optional) broadcasts to Y's shape (ONNX Gemm)."""

    def __init__(self, alpha=1.0, beta=1.0, transA=0, transB=0):
        super(Gemm, self).__init__()
        self.alpha, self.beta = as_float(alpha, "alpha", "gemm"), as_float(beta, "beta", "gemm")
        self.transA, self.transB = bool(transA), bool(transB)

    def forward(self, A, B, C=None):
        if A.nDim() != 2 or B.nDim() != 2:
            raise ShapeError("gemm: A and B must be matrices, got shapes %s and %s"
                             % (A.shape(), B.shape()))
        self.A = singa.Transpose(A) if self.transA else A
        self.B = singa.Transpose(B) if self.transB else B
        y = singa.Mult(self.A, self.B)
        if self.alpha != 1.0:
            y = _M(y, self.alpha)
        self.c_shape = None
        if C is not None:
            self.c_shape = C.shape()
            out = singa.Add(y, _M(C, self.beta))
            if out.shape() != y.shape():
                raise ShapeError("gemm: C of shape %s does not broadcast to the product's "
                                 "shape %s" % (C.shape(), y.shape()))
            y = out
        return y

    def backward(self, dy):
        dA = dB = dC = None
        if self.need(0):
            dA = _M(singa.Mult(dy, singa.Transpose(self.B)), self.alpha)
            dA = singa.Transpose(dA) if self.transA else dA
        if self.need(1):
            dB = _M(singa.Mult(singa.Transpose(self.A), dy), self.alpha)
            dB = singa.Transpose(dB) if self.transB else dB
        if self.c_shape is None:
            return dA, dB
        if self.need(2):
            dC = reduce_to(_M(dy, self.beta), self.c_shape)
        return dA, dB, dC


def gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    """alpha * op(A) op(B) + beta * C (ONNX Gemm)."""
    op = Gemm(alpha, beta, transA, transB)
    return op(A, B)[0] if C is None else op(A, B, C)[0]


class AddBias(Operator):
    """Adds vector b to every row (axis=0: b has x.shape[1] values) or every column (axis=1:
    b has x.shape[0] values) of matrix x."""

    def __init__(self, axis=0):
        super(AddBias, self).__init__()
        if axis not in (0, 1):
            raise InputError("add_bias: axis must be 0 (rows) or 1 (columns), got %r" % (axis,))
        self.axis = axis

    def forward(self, x, b):
        if x.nDim() != 2:
            raise ShapeError("add_bias: x must be a matrix, got shape %s" % (x.shape(),))
        n = x.shape()[1 - self.axis]
        if b.Size() != n:
            raise ShapeError("add_bias: b of shape %s does not match %s of x %s (expected "
                             "%d values)" % (b.shape(), "the columns" if self.axis == 0
                                             else "the rows", x.shape(), n))
        self.b_shape = b.shape()
        return singa.Add(x, singa.Reshape(b, [1, n] if self.axis == 0 else [n, 1]))

    def backward(self, dy):
        db = None
        if self.need(1):
            db = singa.Reshape(singa.ReduceSum(dy, [self.axis], False), list(self.b_shape))
        return dy, db


def add_bias(x, b, axis=0):
    """x + b for every row (axis=0) or column (axis=1) of matrix x."""
    return AddBias(axis)(x, b)[0]


class CosSim(Operator):
    """Cosine similarity of the rows of a and b (both (N, D)); returns (N,)."""

    @classmethod
    def dot(cls, a, b):
        """The dot products of the rows of core tensors a and b (both (N, D)), shape (N,)."""
        if a.nDim() != 2 or a.shape() != b.shape():
            raise ShapeError("CosSim.dot: a and b must be matrices of the same shape, got %s "
                             "and %s" % (a.shape(), b.shape()))
        return singa.Reshape(singa.ReduceSum(_M(a, b), [1], False), [a.shape()[0]])

    def forward(self, a, b):
        if a.nDim() != 2 or a.shape() != b.shape():
            raise ShapeError("cossim: a and b must be matrices of the same shape, got %s "
                             "and %s" % (a.shape(), b.shape()))
        self.a, self.b = a, b
        self.na = singa.Sqrt(singa.ReduceSum(singa.Square(a), [1], True))  # (N, 1)
        self.nb = singa.Sqrt(singa.ReduceSum(singa.Square(b), [1], True))
        self.y = singa.Div(singa.ReduceSum(_M(a, b), [1], True), _M(self.na, self.nb))
        return singa.Reshape(self.y, [a.shape()[0]])

    def backward(self, dy):
        dy = singa.Reshape(dy, [dy.Size(), 1])
        nab = _M(self.na, self.nb)
        # d cos / d a = b / (|a||b|) - cos * a / |a|^2, and symmetrically for b
        da = singa.Sub(singa.Div(self.b, nab), _M(self.y, singa.Div(self.a, singa.Square(self.na))))
        db = singa.Sub(singa.Div(self.a, nab), _M(self.y, singa.Div(self.b, singa.Square(self.nb))))
        return _M(da, dy), _M(db, dy)


def cossim(a, b):
    """Row-wise cosine similarity of matrices a and b."""
    return CosSim()(a, b)[0]
