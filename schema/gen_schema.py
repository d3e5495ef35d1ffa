"""Generates every layer's glue of a schema theme (schema/activations.py) at build time.

    python schema/gen_schema.py cpp schema/activations.py build/gen        # C++ (libsinga)
    python schema/gen_schema.py pxi schema/activations.py build/cython/gen/activation_ops.pxi
    python schema/gen_schema.py nn schema/nn.py build/gen         # the NN theme (gen_nn.py)
    python schema/gen_schema.py nnpxi schema/nn.py build/cython/gen/nn_ops.pxi

C++ (under OUT): include/singa/ops/activation_ids.def (the OpIds, read by op_ids.h),
include/singa/ops/activation.h (the API), include/singa/ops/activation_functors.h (one forward
and one backward functor per op, shared by every backend), src/activation_fronts.inc (slots and
fronts, included by ops/elementwise.cc), src/activation_cpu.inc and src/activation_cuda.inc
(kernels and registrations, included by ops/cpu/elementwise.cc and ops/cuda/elementwise_unary.cu,
whose loops they instantiate). Cython: extern declarations, one wrapper per C++ function and the
table itself as singa_wrap.ACTIVATION_OPS, from which singa.autograd and
singa.sonnx build the rest at import. Files are rewritten only when their text changes, so an
unchanged schema recompiles nothing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_nn  # noqa: E402
from rows import fusable_table, load  # noqa: E402

BANNER = gen_nn.BANNER


def _params(op):
    return "".join(", float %s" % a.name for a in op.attrs)


def _names(op):
    return "".join(", %s" % a.name for a in op.attrs)


def _members(op):
    return "".join("  float %s;\n" % a.name for a in op.attrs)


def _body(expr):
    return expr if "return" in expr else "return (%s);" % expr


def _check(op):
    # What the fronts below pass to Exec; a row asking for more needs a path here first.
    if op.fusable:  # a part the producers' kernels apply (core/fusion.h) is a kernel's change
        raise NotImplementedError("%s: no producer's kernel applies an activation of this theme "
                                  "as its epilogue yet (core/fusion.h)" % op.name)
    unknown = set(op.backends) - {"kCpuRef", "kCuda"}
    if unknown:
        raise ValueError("%s: no generated kernel for backends %s" % (op.name, sorted(unknown)))


def ids(ops, theme):
    out = [BANNER % theme]
    for op in ops:
        out.append("SINGA_OP(%s)\nSINGA_OP(%s)\n" % (op.name, op.backward_name))
    return "".join(out)


def header(ops, theme):
    out = [BANNER % theme, """// singa/ops/activation.h: the activations of the op schema, elementwise on float32 and bfloat16
// (and float16 on a CUDA device), each with its backward op: dx = <Op>Backward(dy, x, ...).
//
//   Tensor y = singa::LeakyReLU(x, 0.1f);
//   Tensor dx = singa::LeakyReLUBackward(dy, x, 0.1f);
#pragma once

#include "singa/core/tensor.h"

namespace singa {
"""]
    for op in ops:
        out.append("\n/// %s, elementwise.\nTensor %s(const Tensor& x%s);\n"
                   % (op.doc, op.name, _params(op)))
        out.append("/// dy times the derivative of %s at x (dy and x of one shape).\n"
                   "Tensor %s(const Tensor& dy, const Tensor& x%s);\n"
                   % (op.name, op.backward_name, _params(op)))
    out.append("\n}  // namespace singa\n")
    return "".join(out)


def functors(ops, theme):
    out = [BANNER % theme, """// The functors of the schema's activations (singa::fn::<Op>Op and <Op>BackwardOp), host and
// device, written as elementwise_functors.h's (which includes this header).
#pragma once

#include "singa/ops/elementwise_functors.h"

namespace singa {
namespace fn {
namespace math {
#ifdef __CUDACC__
using ::expm1;
#else
using std::expm1;
#endif
}  // namespace math
"""]
    for op in ops:
        out.append("""
/// %(doc)s
struct %(n)sOp {
%(m)s  template <typename T>
  SINGA_HOST_DEVICE T operator()(T x) const {
    using namespace ::singa::fn::math;
    %(f)s
  }
};
struct %(n)sBackwardOp {
%(m)s  template <typename T>
  SINGA_HOST_DEVICE T operator()(T dy, T x) const {
    using namespace ::singa::fn::math;
    %(b)s
  }
};
""" % {"doc": op.doc, "n": op.name, "m": _members(op), "f": _body(op.forward),
       "b": _body(op.backward)})
    out.append("\n}  // namespace fn\n}  // namespace singa\n")
    return "".join(out)


def fronts(ops, theme):
    out = [BANNER % theme, """// Included at the end of ops/elementwise.cc: the slots and fronts of the schema's activations,
// on that file's RunUnaryWith / RunBinaryWith.
#include "singa/ops/activation.h"

namespace singa {
namespace {
// A backward op's operands: dy and x of one shape and device; the dtype both compute in.
DataType ActivationBackwardType(OpId id, const Tensor& dy, const Tensor& x) {
  const char* name = OpName(id);
  SINGA_CHECK(dy.block() != nullptr && x.block() != nullptr, ValueError,
              name << ": an input tensor is empty");
  CheckSameDevice(name, {&dy, &x});
  SINGA_CHECK_SHAPE(dy.shape() == x.shape(), name << ": dy " << dy.shape() << " and x "
                                                  << x.shape() << " must have one shape");
  const DataType dt = CommonType(name, dy.data_type(), x.data_type(), *x.device());
  return dt == kInt ? kFloat32 : dt;
}
}  // namespace
"""]
    for op in ops:
        f = {"n": op.name, "b": op.backward_name, "p": _params(op), "a": _names(op),
             "caps": "".join(", " + a.name for a in op.attrs),
             "fl": "".join(", float" for _ in op.attrs),
             "rec": "/*recomputable=*/%s" % ("true" if op.recomputable else "false")}
        out.append("""
SINGA_KERNEL_SLOT(%(n)s, void(const Tensor&%(fl)s, const Tensor&, Context*));
SINGA_KERNEL_SLOT(%(b)s, void(const Tensor&, const Tensor&%(fl)s, const Tensor&, Context*));
Tensor %(n)s(const Tensor& x%(p)s) {
  auto* k = %(n)sKernel().For(*x.device());
  return RunUnaryWith(OpId::k%(n)s, kF, x, nullptr,
                      [k%(caps)s](const Tensor& in, const Tensor& y, Context* ctx) {
                        k(in%(a)s, y, ctx);
                      }, %(rec)s);
}
Tensor %(b)s(const Tensor& dy, const Tensor& x%(p)s) {
  const DataType dt = ActivationBackwardType(OpId::k%(b)s, dy, x);
  auto* k = %(b)sKernel().For(*x.device());
  return RunBinaryWith(OpId::k%(b)s, dt, dy, x, nullptr,
                       [k%(caps)s](const Tensor& g, const Tensor& in, const Tensor& dx,
                                    Context* ctx) { k(g, in%(a)s, dx, ctx); },
                       %(rec)s);
}
""" % f)
    out.append("\n}  // namespace singa\n")
    return "".join(out)


def kernels(ops, theme, backend):
    cuda = backend == "kCuda"
    ns = "cuda" if cuda else "cpu"
    out = [BANNER % theme, "// The %s kernels of the schema's activations, on the loops of the file that includes this one.\n"
           % ("CUDA" if cuda else "CPU reference"), "namespace singa {\n"]
    for op in ops:
        if op.attrs:
            out.append("SINGA_KERNEL_SLOT_DECL(%s, void(const Tensor&%s, const Tensor&, Context*));\n"
                       % (op.name, "".join(", float" for _ in op.attrs)))
        else:
            out.append("SINGA_KERNEL_SLOT_DECL(%s, void(const Tensor&, const Tensor&, Context*));\n"
                       % op.name)
        out.append("SINGA_KERNEL_SLOT_DECL(%s, void(const Tensor&, const Tensor&%s, const Tensor&, "
                   "Context*));\n" % (op.backward_name, "".join(", float" for _ in op.attrs)))
    out.append("namespace %s {\nnamespace {\n" % ns)
    regs = []
    for op in [o for o in ops if backend in o.backends]:
        f = {"n": op.name, "b": op.backward_name, "p": _params(op), "a": _names(op).lstrip(", "),
             "q": '"%s", ' % op.name if cuda else "", "qb": '"%s", ' % op.backward_name if cuda else "",
             "ctx": "Context* ctx" if cuda else "Context*", "c": ", ctx" if cuda else ""}
        out.append("""void %(n)sKernel_(const Tensor& in%(p)s, const Tensor& out, %(ctx)s) {
  Unary<fn::%(n)sOp, kF>(%(q)sfn::%(n)sOp{%(a)s}, in, out%(c)s);
}
void %(b)sKernel_(const Tensor& dy, const Tensor& x%(p)s, const Tensor& out, %(ctx)s) {
  Binary<fn::%(b)sOp, kF>(%(qb)sfn::%(b)sOp{%(a)s}, dy, x, out%(c)s);
}
""" % f)
        regs.append("SINGA_REGISTER_KERNEL(%s, %s, &%sKernel_);\n" % (op.name, backend, op.name))
        regs.append("SINGA_REGISTER_KERNEL(%s, %s, &%sKernel_);\n"
                    % (op.backward_name, backend, op.backward_name))
    out.append("}  // namespace\n")
    out.extend(regs)
    out.append("}  // namespace %s\n}  // namespace singa\n" % ns)
    return "".join(out)


def pxi(ops, theme):
    out = ['cdef extern from "singa/ops/activation.h" namespace "singa" nogil:\n']
    for op in ops:
        fl = "".join(", float" for _ in op.attrs)
        out.append('    CTensor c_%s "singa::%s"(const CTensor&%s) except +raise_py_error\n'
                   % (op.name, op.name, fl))
        out.append('    CTensor c_%s "singa::%s"(const CTensor&, const CTensor&%s) '
                   'except +raise_py_error\n' % (op.backward_name, op.backward_name, fl))
    for op in ops:
        f = {"n": op.name, "b": op.backward_name, "doc": op.doc,
             "p": "".join(", float %s" % a.name for a in op.attrs), "a": _names(op)}
        out.append('''

def %(n)s(Tensor x not None%(p)s):
    """%(doc)s, elementwise (schema op %(n)s)."""
    cdef CTensor r
    with nogil:
        r = c_%(n)s(x.c%(a)s)
    return wrap(r)


def %(b)s(Tensor dy not None, Tensor x not None%(p)s):
    """dy times the derivative of %(n)s at x."""
    cdef CTensor r
    with nogil:
        r = c_%(b)s(dy.c, x.c%(a)s)
    return wrap(r)
''' % f)
    rows = "".join("\n    %r," % (op.as_tuple(),) for op in ops)
    out.append("\n\n# The rows of schema/%s: (name, autograd class, function, doc, attrs (name, "
               "keyword,\n# default, ONNX name, ONNX default), (ONNX name, first opset, last), "
               "torch.nn module,\n# backends, fusable, recomputable).\n"
               "ACTIVATION_OPS = (%s\n)\n" % (theme, rows))
    return "".join(out)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


def write_pxi(what, ops, theme, dst):
    """A theme's Cython side: one .pxi (CMake names it, cython/CMakeLists.txt) that one
    extension module includes (activations: cython/singa/_wrap_activations.pyx, NN rows:
    _wrap_nn.pyx)."""
    body = pxi(ops, theme) if what == "pxi" else gen_nn.pxi(ops, theme)
    _write(dst, "# Generated by schema/gen_schema.py from schema/%s. Do not edit.\n" % theme + body)


def write_nn(ops, theme, src, dst):
    inc, srcdir = os.path.join(dst, "include", "singa", "ops"), os.path.join(dst, "src")
    _write(os.path.join(inc, "nn_ids.def"), gen_nn.ids(ops, theme))
    _write(os.path.join(inc, "nn_schema.h"), gen_nn.api(ops, theme))
    _write(os.path.join(srcdir, "nn_args.inc"), gen_nn.args(ops, theme))
    _write(os.path.join(srcdir, "nn_launch.inc"), gen_nn.launch(ops, theme))
    _write(os.path.join(srcdir, "nn_slots.inc"), gen_nn.slots(ops, theme))
    _write(os.path.join(srcdir, "epilogue_ops.inc"), gen_nn.epilogue(fusable_table([src]), theme))


def main(what, src, dst):
    ops, _ = load(src)
    theme = os.path.basename(src)
    if what in ("pxi", "nnpxi"):
        if what == "pxi":
            for op in ops:
                _check(op)
        write_pxi(what, ops, theme, dst)
        return
    if what == "nn":
        write_nn(ops, theme, src, dst)
        return
    for op in ops:
        _check(op)
    inc, srcdir = os.path.join(dst, "include", "singa", "ops"), os.path.join(dst, "src")
    _write(os.path.join(inc, "activation_ids.def"), ids(ops, theme))
    _write(os.path.join(inc, "activation.h"), header(ops, theme))
    _write(os.path.join(inc, "activation_functors.h"), functors(ops, theme))
    _write(os.path.join(srcdir, "activation_fronts.inc"), fronts(ops, theme))
    _write(os.path.join(srcdir, "activation_cpu.inc"), kernels(ops, theme, "kCpuRef"))
    _write(os.path.join(srcdir, "activation_cuda.inc"), kernels(ops, theme, "kCuda"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
