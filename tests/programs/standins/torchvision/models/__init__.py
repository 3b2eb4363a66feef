"""torchvision.models: the ResNet and VGG builders. ``weights=`` / ``pretrained=True`` give
generated stand-in weights, never a download (_weights.py)."""
from .resnet import *  # noqa: F401,F403
from .vgg import *  # noqa: F401,F403
