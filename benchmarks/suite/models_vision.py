"""torchvision and timm models of the suite (random weights: weights=None, pretrained=False,
and no pretrained backbone either).

"full": batch 64 at 224x224 for classifiers, batch 8 at 512x512 for the segmentation head
and the FPN. "small" (a CPU with these packages): batch 2 at 64x64, or batch 1 at 224x224
where the architecture fixes its resolution (Swin's windows, BEiT's relative positions).
"""
from __future__ import annotations

from .registry import Model, register


def _images(batch, side, device, dtype):
    import torch

    return (torch.randn(batch, 3, side, side, device=device, dtype=dtype),)


def _on(device, dtype, make):
    import torch

    torch.manual_seed(0)
    with torch.device(device):
        model = make()
    return model.to(dtype)


def _import_torchvision():
    """torchvision, also where its C extension does not load.

    A torchvision wheel built against another torch (this project's CPU machines get a CUDA
    build of 0.28.0 beside torch 2.13.0+cpu: its _C.so needs libtorch_cuda) fails at import:
    its fake-kernel registrations name operators (torchvision::nms, roi_align, ...) that only
    the C extension defines. No suite model calls those detection operators; the models are
    Python modules over ATen ops. So where _C.so does not load, the registrations are
    skipped, once, with a line on stderr; timm imports torchvision and needs the same."""
    import importlib.util
    import os
    import sys
    import types

    if "torchvision" not in sys.modules and "torchvision._meta_registrations" not in sys.modules:
        import torch

        spec = importlib.util.find_spec("torchvision")
        library = os.path.join(os.path.dirname(spec.origin), "_C.so")
        try:
            torch.ops.load_library(library)
        except Exception as e:
            stub = types.ModuleType("torchvision._meta_registrations")
            stub.__doc__ = "skipped by the suite: torchvision's C extension did not load"
            sys.modules[stub.__name__] = stub
            print(f"suite: torchvision's C extension does not load here ({e}); its operators' "
                  "fake kernels are not registered (no suite model calls them)", file=sys.stderr)
    import torchvision

    return torchvision


def _torchvision(name, ctor, family="convnet", train=False, weight=1.0, full=(64, 224), small=(2, 64), note=""):
    """ctor: a function of the torchvision module returning the model."""
    def build(device, dtype, size="full"):
        torchvision = _import_torchvision()
        batch, side = full if size == "full" else small
        return _on(device, dtype, lambda: ctor(torchvision)), _images(batch, side, device, dtype)

    register(Model(name, family, "torchvision", build, train=train, weight=weight, note=note))


def _timm(name, timm_name, family="convnet", train=False, weight=1.0, small=(2, 64), small_kwargs=None, note=""):
    def build(device, dtype, size="full"):
        _import_torchvision()
        import timm

        kwargs = {} if size == "full" else dict(small_kwargs or {})
        batch, side = (64, 224) if size == "full" else small
        model = _on(device, dtype, lambda: timm.create_model(timm_name, pretrained=False, **kwargs))
        return model, _images(batch, side, device, dtype)

    register(Model(name, family, "timm", build, train=train, weight=weight, note=note))


def _fpn(tv):
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

    return resnet_fpn_backbone(backbone_name="resnet50", weights=None, trainable_layers=5)


_torchvision("resnet50", lambda tv: tv.models.resnet50(weights=None), train=True,
             note="the anchor ConvNet: conv + BatchNorm + ReLU, bottlenecks")
_torchvision("resnext50_32x4d", lambda tv: tv.models.resnext50_32x4d(weights=None),
             note="grouped 3x3 convolutions (32 groups)")
_torchvision("regnet_y_1_6gf", lambda tv: tv.models.regnet_y_1_6gf(weights=None),
             note="group convolutions with squeeze-and-excitation")
_torchvision("mobilenet_v3_large", lambda tv: tv.models.mobilenet_v3_large(weights=None), train=True,
             note="depthwise convolutions, hardswish, squeeze-and-excitation")
_torchvision("densenet121", lambda tv: tv.models.densenet121(weights=None), weight=1.4,
             note="concatenation of every earlier feature map; BatchNorm before each conv")
_torchvision("shufflenet_v2", lambda tv: tv.models.shufflenet_v2_x1_0(weights=None),
             note="channel shuffle (view + transpose), channel split")
_torchvision("deeplabv3_resnet50",
             lambda tv: tv.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None),
             family="segmentation", weight=1.3, full=(8, 512),
             note="dilated ResNet-50, ASPP (global pooling branch), bilinear upsampling to the input size")
_torchvision("fpn_resnet50", _fpn, family="segmentation", weight=1.2, full=(8, 512),
             note="ResNet-50 with a feature pyramid: nearest upsampling + add, FrozenBatchNorm")

_timm("efficientnet_b0", "efficientnet_b0", train=True, note="depthwise convolutions, SiLU, squeeze-and-excitation")
_timm("convnext_tiny", "convnext_tiny", train=True,
      note="7x7 depthwise conv, LayerNorm over channels after a permute to channels-last, layer scale")
_timm("timm_swin_tiny", "swin_tiny_patch4_window7_224", family="vision", train=True, weight=1.3, small=(1, 224),
      note="Swin-T as timm writes it: window partition, shifted windows, relative position bias")
_timm("timm_vit_base", "vit_base_patch16_224", family="vision", train=True, small_kwargs={"img_size": 64},
      note="ViT-B/16 as timm writes it (the anchor ViT)")
_timm("convmixer_768_32", "convmixer_768_32", weight=1.2,
      note="depthwise-heavy: 32 blocks of 7x7 depthwise + pointwise convolutions at 32x32")
_timm("beit_base", "beit_base_patch16_224", family="vision", weight=1.2, small=(1, 224),
      note="relative position bias per layer (a float bias SDPA's fused kernels refuse)")
_timm("poolformer_s12", "poolformer_s12", note="average pooling as the token mixer, GroupNorm")
_timm("mixer_b16", "mixer_b16_224", family="vision", small_kwargs={"img_size": 64},
      note="MLP-Mixer: token-mixing MLPs over a transposed tensor")
