"""The ONNX ops that map one-to-one onto a singa autograd function and its Operator class, each
written once: import (sonnx.ops, sonnx.ops_tensor) reads ONNX type -> function, export
(sonnx.frontend, sonnx.frontend_tensor) the reverse, Operator class -> ONNX type.

    >>> from singa.sonnx import names
    >>> names.UNARY["Relu"]                   # (autograd function, Operator class)
    ('relu', 'ReLU')
    >>> names.export_types(names.UNARY)["ReLU"]
    'Relu'

Ops with attributes, or whose import or export needs more than the call (Identity, Cast, Clip...),
have handlers of their own and are not listed here.
"""

# ONNX type: (autograd function, autograd Operator class). One input.
UNARY = {
    "Relu": ("relu", "ReLU"), "Sigmoid": ("sigmoid", "Sigmoid"), "Tanh": ("tanh", "Tanh"),
    "Abs": ("abs", "Abs"), "Neg": ("negative", "Negative"), "Exp": ("exp", "Exp"),
    "Log": ("log", "Log"), "Sqrt": ("sqrt", "Sqrt"), "Reciprocal": ("reciprocal", "Reciprocal"),
    "Softplus": ("softplus", "SoftPlus"), "Softsign": ("softsign", "SoftSign"),
    "Sin": ("sin", "Sin"), "Cos": ("cos", "Cos"), "Tan": ("tan", "Tan"),
    "Asin": ("asin", "Asin"), "Acos": ("acos", "Acos"), "Atan": ("atan", "Atan"),
    "Sinh": ("sinh", "Sinh"), "Cosh": ("cosh", "Cosh"), "Asinh": ("asinh", "Asinh"),
    "Acosh": ("acosh", "Acosh"), "Atanh": ("atanh", "Atanh"), "Erf": ("erf", "Erf"),
    "Ceil": ("ceil", "Ceil"), "Floor": ("floor", "Floor"), "Sign": ("sign", "Sign"),
}
# Two inputs.
BINARY = {
    "Add": ("add", "Add"), "Sub": ("sub", "Sub"), "Mul": ("mul", "Mul"), "Div": ("div", "Div"),
    "Pow": ("pow", "Pow"), "MatMul": ("matmul", "Matmul"), "PRelu": ("prelu", "PRelu"),
}
# Any number of inputs.
VARIADIC = {
    "Sum": ("sum", "Sum"), "Mean": ("mean", "Mean"), "Max": ("max", "Max"),
    "Min": ("min", "Min"),
}
# Outputs ONNX types as bool (singa computes 0/1 floats: the export casts, see frontend_tensor).
COMPARE = {
    "Less": ("less", "Less"), "Greater": ("greater", "Greater"), "Equal": ("equal", "Equal"),
    "LessOrEqual": ("less_equal", "LessEqual"),
    "GreaterOrEqual": ("greater_equal", "GreaterEqual"),
}
# Inputs and outputs ONNX types as bool; Not takes one input, the others two.
LOGICAL = {
    "And": ("_and", "And"), "Or": ("_or", "Or"), "Xor": ("_xor", "Xor"), "Not": ("_not", "Not"),
}


def export_types(*tables):
    """Operator class name -> ONNX type, over the given tables (the reverse direction)."""
    return {cls: onnx_type for table in tables for onnx_type, (_, cls) in table.items()}
