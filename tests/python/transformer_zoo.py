"""Tiny transformers from ``transformers`` and torchvision, with random weights (never
from_pretrained), and their ONNX exports by either of torch's exporters.

    zoo = transformer_zoo.load()             # None when torch/transformers/torchvision is missing
    net, feeds = transformer_zoo.build("bert", attn="eager")
    onnx_bytes = transformer_zoo.export(net, feeds, dynamo=False, opset=13)

Each network takes numpy ``feeds`` (a dict name -> array, in the forward's argument order) and
returns one float tensor: BERT, RoBERTa, GPT-2 (input_ids, attention_mask with padding in the
second row) -> the last hidden state; the ViT (images) -> the logits.
"""
import io
import logging
import warnings

import numpy as np

VOCAB, SEQ = 100, 7

_zoo = None


def _torchvision(torch):
    """torchvision 0.28's wheel is built for CUDA torch: with the CPU build of torch 2.13 its
    import fails (``operator torchvision::nms does not exist``) unless its two custom ops are
    declared first. Declared once per process, only when torch lacks them."""
    if not hasattr(_torchvision, "lib"):
        try:  # a torchvision whose compiled ops load (the GPU image's) must not be redeclared:
            import glob  # defining them first makes its own registration abort the process
            import importlib.util
            import os
            spec = importlib.util.find_spec("torchvision")
            for path in glob.glob(os.path.join(os.path.dirname(spec.origin), "_C*.so")):
                torch.ops.load_library(path)
        except (OSError, RuntimeError, AttributeError, TypeError):
            pass
        try:
            torch.ops.torchvision.nms
        except (AttributeError, RuntimeError):
            lib = torch.library.Library("torchvision", "DEF")
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.define("qnms(Tensor qdets, Tensor qscores, Tensor dets, Tensor scores, "
                       "float iou_threshold, float output_scale, int output_zero_point) "
                       "-> Tensor")
            _torchvision.lib = lib  # the definitions live as long as the library object
    import torchvision
    return torchvision


def load():
    """(torch, transformers, torchvision), or None when one cannot be imported."""
    global _zoo
    if _zoo is None:
        try:
            import torch
            import transformers
            _zoo = (torch, transformers, _torchvision(torch))
            transformers.logging.set_verbosity_error()
        except Exception:  # noqa: BLE001  (any import failure means: skip)
            _zoo = False
    return _zoo or None


def missing_reason():
    return "needs torch, transformers and torchvision (the Makefile's PIP_TRANSFORMER_PKGS)"


def build(name, attn="eager"):
    """(the network in eval mode, its numpy feeds). ``attn``: transformers' attention
    implementation ("eager": written out; "sdpa": torch's fused op, exported with an
    IsNaN-guarded softmax)."""
    torch, transformers, torchvision = load()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if name == "vit":
        net = torchvision.models.VisionTransformer(image_size=16, patch_size=8, num_layers=2,
                                                   num_heads=2, hidden_dim=16, mlp_dim=32,
                                                   num_classes=5)
        return net.eval(), {"images": rng.standard_normal((2, 3, 16, 16)).astype(np.float32)}
    small = dict(vocab_size=VOCAB, num_hidden_layers=2, num_attention_heads=2,
                 attn_implementation=attn)
    if name == "gpt2":
        model = transformers.GPT2Model(transformers.GPT2Config(
            n_embd=16, n_layer=2, n_head=2, n_positions=16, vocab_size=VOCAB,
            attn_implementation=attn))
    else:
        config = {"bert": transformers.BertConfig, "roberta": transformers.RobertaConfig}[name]
        model = {"bert": transformers.BertModel, "roberta": transformers.RobertaModel}[name](
            config(hidden_size=16, intermediate_size=32, max_position_embeddings=16, **small))
    mask = np.ones((2, SEQ), np.int64)
    mask[1, SEQ - 2:] = 0  # padding at the end of the second sequence
    feeds = {"input_ids": rng.integers(3, VOCAB, (2, SEQ)).astype(np.int64),
             "attention_mask": mask}
    return _LastHidden(torch, model).eval(), feeds


def _LastHidden(torch, model):
    """model(input_ids=, attention_mask=).last_hidden_state as a plain tensor function (the
    exporters take positional inputs; transformers' forward takes keywords)."""
    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids,
                              attention_mask=attention_mask).last_hidden_state
    return LastHidden()


def export(net, feeds, dynamo, opset, dynamic_axes=False):
    """The serialized ONNX model of ``net`` on ``feeds`` by torch.onnx.export; with
    ``dynamic_axes`` (the TorchScript exporter), the batch and sequence sizes are symbolic."""
    torch = load()[0]
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        level = logging.getLogger("torch.onnx").level
        logging.getLogger("torch.onnx").setLevel(logging.ERROR)
        try:
            kwargs = {"verbose": False} if dynamo else {}
            if dynamic_axes:
                kwargs["dynamic_axes"] = {k: {0: "batch", 1: "seq"} if a.ndim == 2 else
                                          {0: "batch"} for k, a in feeds.items()}
                kwargs["dynamic_axes"]["y"] = {0: "batch"}
            torch.onnx.export(net, args, buf, dynamo=dynamo, opset_version=opset,
                              input_names=list(feeds), output_names=["y"], **kwargs)
        finally:
            logging.getLogger("torch.onnx").setLevel(level)
    return buf.getvalue()
