"""torchvision.models.vgg: VGG (configurations A, B, D, E, with and without batch norm), laid
out as torchvision's (``features`` Sequential, ``avgpool``, ``classifier``) so that state dict
keys and ``features[i]`` indices match."""
import torch
import torch.nn as nn

from ._weights import build, weights_enum

__all__ = ["VGG"] + [f"vgg{n}{bn}" for n in (11, 13, 16, 19) for bn in ("", "_bn")] + [
    f"VGG{n}{bn}_Weights" for n in (11, 13, 16, 19) for bn in ("", "_BN")]

CFGS = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512,
          "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512,
          512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, features, num_classes=1000, init_weights=True, dropout=0.5):
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes))
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def make_layers(cfg, batch_norm=False):
    """3x3 convolutions (padding 1), each followed by [BatchNorm2d,] ReLU; "M" a 2x2 max pool."""
    layers, in_channels = [], 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(nn.Conv2d(in_channels, v, kernel_size=3, padding=1))
        layers += [nn.BatchNorm2d(v), nn.ReLU(inplace=True)] if batch_norm else [
            nn.ReLU(inplace=True)]
        in_channels = v
    return nn.Sequential(*layers)


def _builder(arch, cfg, batch_norm, enum_name):
    weights_cls = weights_enum(enum_name, arch)

    def vgg(*, weights=None, progress=True, **kwargs):
        return build(lambda pretrained, **kw: VGG(make_layers(CFGS[cfg], batch_norm),
                                                  init_weights=not pretrained, **kw),
                     weights, kwargs, weights_cls)

    vgg.__name__ = vgg.__qualname__ = arch
    vgg.__doc__ = f"VGG configuration {cfg}{' with batch norm' if batch_norm else ''}."
    return vgg, weights_cls


vgg11, VGG11_Weights = _builder("vgg11", "A", False, "VGG11_Weights")
vgg11_bn, VGG11_BN_Weights = _builder("vgg11_bn", "A", True, "VGG11_BN_Weights")
vgg13, VGG13_Weights = _builder("vgg13", "B", False, "VGG13_Weights")
vgg13_bn, VGG13_BN_Weights = _builder("vgg13_bn", "B", True, "VGG13_BN_Weights")
vgg16, VGG16_Weights = _builder("vgg16", "D", False, "VGG16_Weights")
vgg16_bn, VGG16_BN_Weights = _builder("vgg16_bn", "D", True, "VGG16_BN_Weights")
vgg19, VGG19_Weights = _builder("vgg19", "E", False, "VGG19_Weights")
vgg19_bn, VGG19_BN_Weights = _builder("vgg19_bn", "E", True, "VGG19_BN_Weights")
